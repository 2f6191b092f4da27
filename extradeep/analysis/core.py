"""One call from an Experiment to every model the answers need: :func:`analyse` -> :class:`Analysis`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from extradeep.aggregate.experiment import Dataset, Experiment
from extradeep.analysis.communication import layout_notes, node_layout, nodes_spanned
from extradeep.analysis.cost import CostSettings, cost_table
from extradeep.analysis.epoch import (
    EPOCH_TIME,
    REGION_KEYS,
    application_steps,
    dataset_notes,
    per_epoch,
    point_summary,
    step_values,
    work_samples,
)
from extradeep.analysis.fitting import (
    application_models,
    experiment_topology,
    fit_region_models,
    step_communication_model,
    without_totals,
)
from extradeep.analysis.notes import (  # noqa: F401 (extrapolation_notes, step_time_model: re-exported)
    contradiction_notes,
    extrapolation_notes,
    reliability_notes,
    step_time_model,
)
from extradeep.analysis.points import format_point
from extradeep.analysis.primary import PrimaryTime, primary_from_models, require_primary, with_primary_step_region
from extradeep.analysis.saved import effective_options, reusable_models, saved_choices, saved_mismatch
from extradeep.analysis.scaling import (
    default_baseline,
    scaling_models,
    scaling_table,
)
from extradeep.columns import METRIC, RANKS, VALUE
from extradeep.errors import InputError


@dataclass
class Analysis:
    """The fitted models of one experiment: application quantities and every region and metric.

    Values are in seconds (time), counts (visits) or bytes, per epoch when the dataset sizes are
    known (``per == "epoch"``) and per training step otherwise.
    """

    params: list[str]
    ranks_param: str
    per: str
    scaling: str
    baseline: dict
    application: pd.DataFrame  # quantity, params, rep, value
    application_points: pd.DataFrame  # quantity, params, value (median), rep_min, rep_max, n_reps
    application_models: pd.DataFrame  # quantity, model, formula, growth, smape, reason
    regions: pd.DataFrame  # region, kind, category, metric, params, rep, value
    region_points: pd.DataFrame  # region keys, params, value (median), rep_min, rep_max, n_reps
    region_models: pd.DataFrame  # region keys, model, formula, growth, smape, reason
    dataset: Dataset | None = None
    notes: list[str] = field(default_factory=list)
    options: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)  # parameters with one value (not modeled)
    layout: dict = field(default_factory=dict)  # gpus_per_node, source; {} when unknown (node_layout)

    @property
    def gpus_per_node(self) -> int | None:
        """GPUs per node of the cluster layout (exports or --system), None when unknown."""
        return self.layout.get("gpus_per_node")

    @property
    def points(self) -> pd.DataFrame:
        """The modeled parameter points."""
        source = self.application_points if not self.application_points.empty else self.region_points
        return source[self.params].drop_duplicates().sort_values(self.params).reset_index(drop=True)

    def model(self, quantity: str = EPOCH_TIME):
        """The model of an application quantity, or None when it could not be modeled."""
        rows = self.application_models[self.application_models["quantity"] == quantity]
        return None if rows.empty else rows["model"].iloc[0]

    @property
    def primary(self) -> PrimaryTime | None:
        """The one model of the time per epoch (or step) that every answer uses, and why it is the one
        (:mod:`extradeep.analysis.primary`); None when no time could be modeled."""
        return primary_from_models(self.application_models, self.per, self.params)


def per_unit(dataset: Dataset | None) -> str:
    return "epoch" if dataset is not None else "step"


def default_scaling(dataset: Dataset | None) -> str:
    """Strong scaling for epochs of a fixed data set; weak when the work grows with the ranks
    (data sets that grow with G, or per-step values with a fixed batch per rank)."""
    return "strong" if dataset is not None and not dataset.weak_scaling else "weak"


def ranks_parameter(params: list[str], preferred: str | None = None) -> str:
    """The parameter that counts ranks (resources): ``preferred``, else "ranks", else the first."""
    if preferred:
        if preferred not in params:
            raise InputError(
                None, field="ranks_param", problem=f"{preferred!r} is not a parameter ({', '.join(params)})"
            )
        return preferred
    return RANKS if RANKS in params else params[0]


def require_parameters(experiment: Experiment) -> None:
    """Refuse, in one line that says what would help, an experiment where no parameter varies."""
    if experiment.params:
        return
    fixed = experiment.fixed_params
    if fixed:
        where = ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in fixed.items())
        raise InputError(
            None,
            f"every export is of one configuration ({where}); models need measurements at "
            "several values of a parameter (5 by default, --min-points): profile more scales",
        )
    raise InputError(
        None,
        "no parameter varies across the exports: their names carry no values (like "
        "app.p4.r1.mpi0.sqlite) and no --manifest gives them, so there is nothing to model",
    )


def analyse(
    experiment: Experiment,
    dataset: Dataset | None = None,
    options: dict | None = None,
    scaling: str | None = None,
    ranks_param: str | None = None,
    metrics=("time", "visits", "bytes"),
    progress=None,
    refit: bool = False,
) -> Analysis:
    """Fit application and region models of ``experiment`` (per epoch when a dataset is known).

    ``options`` go to the modeler (exponents, terms, nonnegative, min_points), over the experiment's
    own (:func:`~extradeep.analysis.saved.effective_options`); ``scaling`` is "strong" or "weak"
    (default: the saved models', else the dataset's weak_scaling flag). Models saved with the
    experiment are reused when they were fitted with the same options and dataset, unless ``refit``.
    """
    dataset = dataset or experiment.dataset
    require_parameters(experiment)
    params = list(experiment.params)
    # a saved experiment's own options are the defaults: commands on the file model as its maker did
    options = effective_options(experiment, options)
    chosen = saved_choices(experiment, dataset, params)
    scaling, ranks_param = scaling or chosen.get("scaling"), ranks_param or chosen.get("ranks_param")
    app_steps, region_steps, application, regions, notes = _measure(experiment, dataset, metrics)
    fixed = experiment.fixed_params
    topology = experiment_topology(experiment)
    system = experiment.settings.system
    saved = None if refit else reusable_models(experiment.saved_models, dataset, options, system)
    if saved is not None:
        _say(progress, "using the models saved with the experiment")
        app_models, region_models = saved
    else:
        if experiment.saved_models and not refit:
            differs = saved_mismatch(experiment.saved_models, dataset, options, system) or ["settings"]
            notes.append(f"the saved models were fitted with other {' and '.join(differs)}, so they were refitted")
        app_models, region_models = _fit(experiment, app_steps, region_steps, regions, dataset, options, progress)
    app_points = point_summary(application, ["quantity"], params)
    region_models = with_primary_step_region(region_models, primary_from_models(app_models, per_unit(dataset), params))
    ranks = ranks_parameter(params, ranks_param)
    mode = scaling or default_scaling(dataset)
    if dataset is None and scaling is None:
        notes.append(
            "per-step values: each rank's step keeps its batch as ranks grow, so efficiency is "
            "the weak-scaling T(x1)/T(xk) (throughput per GPU); --scaling strong overrides"
        )
    idle = application[application["quantity"] == "idle"][VALUE]
    if len(idle) and not (idle > 0).any():
        notes.append(
            "GPU activity covers the whole measured step everywhere, so no idle time is visible "
            "(an experiment saved before reader version 2 has no GPU busy time: idle is then step - summed "
            "GPU time, which overlapping streams push to 0; model the exports again)"
        )
    notes = reliability_notes(app_models, per_unit(dataset)) + notes + contradiction_notes(app_points, params)
    notes += layout_notes(experiment.settings, topology, step_communication_model(app_models))
    baseline = default_baseline(app_points if not app_points.empty else regions, params, ranks)
    if EPOCH_TIME not in set(application["quantity"]):
        notes.append(
            "no step marks were measured, so there is no measured time per "
            f"{per_unit(dataset)}; the GPU-activity sum (paper Eq. 6) stands in for it"
        )
    return Analysis(
        params,
        ranks,
        per_unit(dataset),
        mode,
        baseline,
        application,
        app_points,
        app_models,
        regions,
        point_summary(regions, REGION_KEYS, params),
        region_models,
        dataset,
        notes,
        dict(options or {}),
        dict(fixed),
        node_layout(experiment.settings),
    )


def _fit(experiment, app_steps, region_steps, regions, dataset, options, progress):
    params, fixed = list(experiment.params), experiment.fixed_params
    _say(progress, "modeling the application quantities")
    app_models, _ = application_models(experiment, dataset, options, app_steps=app_steps)
    _say(progress, f"modeling {len(regions[REGION_KEYS].drop_duplicates())} region metrics")
    return app_models, fit_region_models(region_steps, params, dataset, fixed, options)


def _measure(experiment: Experiment, dataset: Dataset | None, metrics):
    """Per-step values (application, regions), their per-epoch values and notes."""
    params = experiment.params
    steps = step_values(experiment, metrics)
    notes = dataset_notes(experiment, dataset, steps)
    app_steps = application_steps(steps, params)
    region_steps = without_totals(steps)
    application = per_epoch(app_steps, ["quantity"], params, dataset, experiment.fixed_params)
    regions = per_epoch(region_steps, REGION_KEYS, params, dataset, experiment.fixed_params)
    return app_steps, region_steps, application, regions, notes


def measured_points(experiment: Experiment, dataset: Dataset | None, metrics=("time", "visits", "bytes")):
    """(application points, region points): medians over repetitions, as :func:`analyse` models them."""
    _, _, application, regions, _ = _measure(experiment, dataset, metrics)
    params = experiment.params
    return point_summary(application, ["quantity"], params), point_summary(regions, REGION_KEYS, params)


def measured_values(experiment: Experiment, dataset: Dataset | None = None) -> pd.DataFrame:
    """Application quantities per repetition (quantity, params, rep, value): per epoch with a
    dataset, per training step without one (None: per step, whatever the experiment's dataset)."""
    return _measure(experiment, dataset, ("time",))[2]


def _say(progress, message: str) -> None:
    if progress is not None:
        progress(message)


def primary_quantity(analysis: Analysis) -> str:
    """The time the answers use: measured epoch time, else the GPU-activity sum (one line when neither)."""
    return require_primary(analysis.primary, analysis.per, analysis.application_models).quantity


def subset_experiment(experiment: Experiment, keep: pd.DataFrame) -> Experiment:
    """The experiment restricted to the parameter points listed in ``keep`` (for evaluation)."""
    params = experiment.params

    def restrict(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty or not set(params) <= set(frame.columns):
            return frame
        marks = (
            frame[params]
            .astype(float)
            .merge(keep[params].astype(float).drop_duplicates(), how="left", indicator=True)["_merge"]
            .to_numpy()
        )
        return frame[marks == "both"].reset_index(drop=True)

    values, points = restrict(experiment.values), restrict(experiment.points)
    if points.empty:
        raise InputError(None, "no measured points are left for modeling")
    # the saved models (if any) were fitted on every point, the held-out ones included: never reused
    return replace(
        experiment, values=values, points=points, provenance=restrict(experiment.provenance), saved_models=None
    )


def prediction_table(
    analysis: Analysis, grid: pd.DataFrame, cost: CostSettings | None = None, level: float = 0.95
) -> pd.DataFrame:
    """Every application quantity at every ``grid`` point: T with its prediction interval,
    speedup, efficiency and runtime change vs the baseline (per sample with a dataset), the
    training samples an epoch processes and the share it leaves out, and (with ``cost``)
    core-hours, GPU-hours and cost."""
    table = scaling_table(
        analysis.application_models,
        grid,
        analysis.params,
        ["quantity"],
        analysis.baseline,
        analysis.scaling,
        analysis.ranks_param,
        level=level,
        samples=sample_counter(analysis),
    )
    if analysis.dataset is not None and not table.empty:
        counts = analysis.dataset.samples_per_epoch(table[analysis.params], analysis.fixed)
        table["samples"], table["skipped_share"] = counts["samples"], counts["skipped_share"]
    if cost is not None and not table.empty:
        table = cost_table(table, replace(cost, ranks_param=analysis.ranks_param), analysis.params)
    if analysis.gpus_per_node and not table.empty:  # how many nodes each point spans
        gpus = table[analysis.ranks_param].to_numpy(float) * (cost.gpus_per_rank if cost is not None else 1.0)
        table["nodes"] = nodes_spanned(gpus, analysis.gpus_per_node)
    return table


def analyse_table(
    table: pd.DataFrame,
    params: list[str],
    options: dict | None = None,
    scaling: str | None = None,
    ranks_param: str | None = None,
) -> Analysis:
    """Models of a plain measurement table (region, metric, params, rep, value), e.g. an Extra-P
    text file: region models only, fastest-growing first; no epoch or category quantities."""
    from extradeep.modeling import fit_models

    table = table.assign(kind="region", category="")
    models = fit_models(table, params, value="value", by=tuple(REGION_KEYS), rep="rep", options=options)
    order = sorted(range(len(models)), key=lambda i: models["growth_key"].iloc[i] or (-1.0, -1.0), reverse=True)
    models = models.iloc[order].reset_index(drop=True)
    ranks = ranks_parameter(params, ranks_param)
    empty = pd.DataFrame(columns=["quantity", *params, VALUE])
    return Analysis(
        params,
        ranks,
        "measurement",
        scaling or "strong",
        default_baseline(table, params, ranks),
        empty.assign(rep=[]),
        empty,
        pd.DataFrame(columns=["quantity", "model", "formula", "growth", "smape", "reason"]),
        table,
        point_summary(table, REGION_KEYS, params),
        models,
        notes=["plain measurement table: values are modeled as given (no epochs, no categories)"],
        options=dict(options or {}),
    )


def sample_counter(analysis: Analysis):
    """points -> training samples per epoch, so speedup and efficiency compare time per sample
    (floor() in n_t must not pass for speedup); None without a dataset or when the scaling mode is
    not the dataset's (then the textbook time ratios apply as asked)."""
    return samples_per_epoch_function(analysis.dataset, analysis.per, analysis.scaling, analysis.fixed)


def samples_per_epoch_function(dataset: Dataset | None, per: str, scaling: str, fixed: dict):
    """points -> training samples per epoch, for scaling tables (:func:`sample_counter`); None when
    values are per step or the scaling mode is not the dataset's."""
    if dataset is None or per != "epoch" or (scaling == "weak") != bool(dataset.weak_scaling):
        return None
    return lambda points: work_samples(dataset, points, fixed)


def derived_models(analysis: Analysis) -> pd.DataFrame:
    """Models of speedup, efficiency and runtime change of each application quantity (paper Eq.
    12) as functions of the ranks, fitted to the values the prediction tables use (same baseline,
    same per-sample definition) at the modeled points whose other parameters equal the baseline's:
    a ratio across batch sizes is not a scaling figure. Column ``at`` names those fixed values."""
    ranks = analysis.ranks_param
    others = [p for p in analysis.params if p != ranks]
    points = analysis.points
    if others:
        same = (points[others].astype(float) == pd.Series({p: float(analysis.baseline[p]) for p in others})).all(axis=1)
        points = points[same.to_numpy()]
    table = scaling_table(
        analysis.application_models,
        points,
        analysis.params,
        ["quantity"],
        analysis.baseline,
        analysis.scaling,
        ranks,
        samples=sample_counter(analysis),
    )
    fitted = scaling_models(table, [ranks] if others else analysis.params, ["quantity"], analysis.options)
    if not fitted.empty:
        fitted["at"] = format_point(analysis.baseline, others) if others else ""
    return fitted


def rebase(analysis: Analysis, fixed: dict) -> Analysis:
    """The analysis with its baseline moved to the smallest ranks among the modeled points whose
    other parameters equal ``fixed`` (so efficiency compares like with like); unchanged if none."""
    others = [p for p in analysis.params if p != analysis.ranks_param and p in fixed]
    if not others:
        return analysis
    points = analysis.points
    same = points[(points[others].astype(float) == pd.Series({p: float(fixed[p]) for p in others})).all(axis=1)]
    if same.empty:
        return analysis
    return replace(analysis, baseline=default_baseline(same, analysis.params, analysis.ranks_param))


def region_scaling(analysis: Analysis, grid: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Speedup, efficiency and runtime change of every region's time model at ``grid`` (same
    definitions and baseline as the application quantities)."""
    models = analysis.region_models[analysis.region_models[METRIC] == "time"]
    # Per sample, as for the application quantities: floor() in n_t must not pass for speedup.
    return scaling_table(
        models,
        grid,
        analysis.params,
        ["region", "kind", "category"],
        analysis.baseline,
        analysis.scaling,
        analysis.ranks_param,
        level=level,
        samples=sample_counter(analysis),
    )
