"""Fitting the models an Analysis holds: per-phase region models, the application quantities with the
training step composed of computation and exposed communication, on the experiment's topology.

:func:`extradeep.analysis.core.analyse` and the GUI's modeling process both call these, so their
models cannot diverge.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from extradeep.aggregate.experiment import TOTAL, Dataset, Experiment
from extradeep.analysis.communication import Topology, as_vector, layout_notes, pure_times
from extradeep.analysis.epoch import (
    BREAKDOWN,
    EPOCH_TIME,
    REGION_KEYS,
    EpochModel,
    application_steps,
    per_epoch,
    point_summary,
    step_values,
)
from extradeep.analysis.overlap import Exposure, fit_step_composition, step_parts
from extradeep.analysis.parts import GPU_TOTAL, PARTS, part_models
from extradeep.columns import CATEGORY, EPOCH_CATEGORIES, KIND, PHASE, VALUE
from extradeep.modeling.batched import smape


def experiment_topology(experiment: Experiment) -> Topology | None:
    """The cluster layout the communication model follows (one parameter only; None without one)."""
    params = experiment.params
    if len(params) != 1:
        return None
    return Topology.from_settings(experiment.settings, experiment.points[params[0]].unique())


def application_step_values(experiment: Experiment) -> pd.DataFrame:
    """Per-step values of the application quantities (step time, category sums, idle): what
    :func:`application_models` fits, from only the regions they are made of."""
    wanted = (*EPOCH_CATEGORIES, "step")  # the step wall time and GPU busy union are category "step"
    keep = replace(
        experiment,
        values=experiment.values[experiment.values[CATEGORY].isin(wanted).to_numpy()],
        points=experiment.points[experiment.points[CATEGORY].isin(wanted).to_numpy()],
    )
    return application_steps(step_values(keep), experiment.params)


def application_models(
    experiment: Experiment,
    dataset: Dataset | None = None,
    options: dict | None = None,
    upto: float = np.inf,
    app_steps: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """(models, notes): the application quantities' models exactly as :func:`analyse` fits them (per-phase
    step models; the training step composed of computation and exposed communication, across node
    boundaries with the experiment's layout) from the points whose first parameter is <= ``upto`` (the
    rest held out), and the layout notes (the one-node warning, each collective's model).
    ``app_steps``: :func:`application_step_values` of the experiment, when already made."""
    params = list(experiment.params)
    if np.isfinite(upto):
        experiment = _up_to(experiment, upto)
    steps = (
        application_step_values(experiment)
        if app_steps is None
        else app_steps[app_steps[params[0]].to_numpy(float) <= upto]
    )
    if steps.empty:
        return pd.DataFrame(columns=["quantity", "model", "formula", "growth", "smape", "reason"]), []
    topology = experiment_topology(experiment)
    models = fit_application_models(
        steps,
        experiment.values,
        params,
        dataset,
        experiment.fixed_params,
        options,
        Exposure.from_experiment(experiment, upto=upto),
        topology,
    )
    return models, layout_notes(experiment.settings, topology, step_communication_model(models))


def _up_to(experiment: Experiment, upto: float) -> Experiment:
    first = experiment.params[0]

    def kept(frame):
        return frame[frame[first].to_numpy(float) <= upto]

    return replace(experiment, values=kept(experiment.values), points=kept(experiment.points))


def region_step_values(experiment: Experiment, metrics=("time", "visits", "bytes")) -> pd.DataFrame:
    """Per-step values of every region, metric, phase, point and repetition, as :func:`analyse` models
    them (the category sums left out: they are application quantities)."""
    return without_totals(step_values(experiment, metrics))


def without_totals(steps: pd.DataFrame) -> pd.DataFrame:
    # Category sums (kind total) are modeled once, as application quantities, not again as regions.
    return steps[steps[KIND] != TOTAL].reset_index(drop=True)


def fit_region_models(
    region_steps: pd.DataFrame,
    params: list[str],
    dataset: Dataset | None,
    fixed: dict,
    options: dict | None,
    upto: float = np.inf,
    keys=tuple(REGION_KEYS),
) -> pd.DataFrame:
    """The region models exactly as :func:`analyse` fits them (per-phase step models combined into
    epoch models, :func:`fit_phase_models`) from the points whose first parameter is <= ``upto``;
    ``keys``: the columns naming a region (the GUI's row id)."""
    if np.isfinite(upto):
        region_steps = region_steps[region_steps[params[0]].to_numpy(float) <= upto]
    return fit_phase_models(region_steps, list(keys), params, dataset, fixed, options)


def fit_phase_models(
    steps: pd.DataFrame, keys: list[str], params: list[str], dataset: Dataset | None, fixed: dict, options: dict | None
) -> pd.DataFrame:
    """Fit per-step models per phase and combine them per key into epoch models (or, without a
    dataset, keep the training-step model)."""
    from extradeep.modeling import fit_models

    phases = ("train", "val") if dataset is not None else ("train",)
    data = steps[steps[PHASE].isin(phases)]
    # A phase in which a region never ran (all zeros) adds nothing: no model needed there.
    ran = (data[VALUE] != 0).groupby([data[k] for k in [*keys, "phase"]]).transform("any")
    data = data[ran.to_numpy(dtype=bool)]
    columns = [*keys, "model", "formula", "growth", "smape", "reason"]
    if data.empty:
        return pd.DataFrame(columns=columns)
    fitted = fit_models(data, params, value="value", by=(*keys, "phase"), rep="rep", options=options)
    rows = []
    for key, group in fitted.groupby(keys, sort=True):
        by_phase = {row.phase: row for row in group.itertuples(index=False)}
        model = _combine(by_phase.get("train"), by_phase.get("val"), dataset, params, fixed)
        reasons = "; ".join(f"{r.phase}: {r.reason}" for r in by_phase.values() if r.model is None and r.reason)
        rows.append(
            {
                **dict(zip(keys, key if isinstance(key, tuple) else (key,))),
                "model": model,
                "formula": "" if model is None else model.formula(),
                "growth": "" if model is None else model.growth(),
                "smape": np.nan if model is None else float(getattr(model, "smape", np.nan)),
                "reason": "" if model is not None else reasons,
            }
        )
    return pd.DataFrame(rows, columns=columns)


def fit_application_models(
    app_steps: pd.DataFrame,
    values: pd.DataFrame,
    params: list[str],
    dataset: Dataset | None,
    fixed: dict,
    options: dict | None,
    exposure: Exposure | None = None,
    topology: Topology | None = None,
) -> pd.DataFrame:
    """The application models of :func:`analyse`: per-phase step models of every quantity, the
    training step time composed of computation and exposed communication. ``values``: the
    Experiment's per-repetition values (their rank spreads give the pure collective durations);
    ``exposure``: a traced run's exposure curve (``Exposure.from_experiment``)."""
    models = fit_phase_models(app_steps, ["quantity"], params, dataset, fixed, options)
    models = compose_step_time(
        models, app_steps, params, dataset, fixed, options, pure_times(values, params), exposure, topology
    )
    return consistent_parts(models, app_steps, params, dataset, fixed)


def consistent_parts(
    app_models: pd.DataFrame, app_steps: pd.DataFrame, params: list[str], dataset: Dataset | None, fixed: dict
) -> pd.DataFrame:
    """The parts' own models replaced by the parts of one :class:`~extradeep.analysis.parts.Breakdown`
    of the epoch time, so that no part exceeds it and "gpu total" is the sum of its parts
    (:mod:`extradeep.analysis.parts`); a part without a model keeps its reason. Each part's SMAPE is
    its error at the measured medians."""
    by = dict(zip(app_models["quantity"], app_models["model"]))
    raw = {name: by.get(name) for name in PARTS}
    if all(m is None for m in raw.values()):
        return app_models
    measured = point_summary(per_epoch(app_steps, ["quantity"], params, dataset, fixed), ["quantity"], params)
    complete = all(by.get(name) is not None for name in BREAKDOWN if name in by)
    out = app_models.copy()
    for name, model in part_models(by.get(EPOCH_TIME), raw, len(params)).items():
        rows = out.index[out["quantity"] == name]
        if not len(rows) or (out.at[rows[0], "model"] is None and not (name == GPU_TOTAL and complete)):
            continue
        points = measured[measured["quantity"] == name]
        if len(points):
            X = points[params].to_numpy(float)
            predicted = as_vector(model.predict(X[:, 0] if len(params) == 1 else X))
            model.smape = float(smape(points[VALUE].to_numpy(float), predicted))
        index = rows[0]
        out.at[index, "model"] = model
        out.at[index, "formula"], out.at[index, "growth"] = model.formula(), model.growth()
        out.at[index, "smape"], out.at[index, "reason"] = model.smape, ""
    return out


def compose_step_time(
    app_models: pd.DataFrame,
    app_steps: pd.DataFrame,
    params: list[str],
    dataset: Dataset | None,
    fixed: dict,
    options: dict | None,
    pure: pd.DataFrame | None = None,
    exposure: Exposure | None = None,
    topology: Topology | None = None,
) -> pd.DataFrame:
    """The epoch-time model with its training step as computation + exposed communication
    (:mod:`extradeep.analysis.overlap`), when that applies; the models unchanged otherwise.
    ``pure``: pure collective durations (:func:`extradeep.analysis.communication.pure_times`)."""
    rows = app_models["quantity"] == EPOCH_TIME
    if not rows.any() or app_models.loc[rows, "model"].iloc[0] is None:
        return app_models
    train = fit_step_composition(step_parts(app_steps, params), params, options, pure, exposure, topology)
    if train is None:
        return app_models
    current = app_models.loc[rows, "model"].iloc[0]
    model = train if dataset is None else replace(current, train=train)
    out = app_models.copy()
    index = out.index[rows][0]
    out.at[index, "model"] = model
    out.at[index, "formula"], out.at[index, "growth"] = model.formula(), model.growth()
    out.at[index, "smape"] = float(model.smape)
    return out


def step_communication_model(app_models: pd.DataFrame):
    """The communication model inside the composed training-step model, if there is one."""
    rows = app_models[app_models["quantity"] == EPOCH_TIME]
    model = rows["model"].iloc[0] if len(rows) else None
    train = getattr(model, "train", model)
    return getattr(train, "comm", None)


def _combine(train, val, dataset, params, fixed):
    train_model = None if train is None else train.model
    if dataset is None:
        return train_model
    val_model = None if val is None else val.model
    # A phase that ran but could not be modeled would make the epoch value wrong: no model then.
    if (train is not None and train_model is None) or (val is not None and val_model is None):
        return None
    return EpochModel(train_model, val_model, dataset, params, fixed)
