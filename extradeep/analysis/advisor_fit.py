"""The measurement advisor's first half, as data: its settings, their checks, and what fitting learns.

`AdvisorSettings` holds what :class:`~extradeep.analysis.advisor.MeasurementAdvisor` is configured
with; `fit_advisor(settings, data, primary)` reads what the advisor needs before it can propose
anything and returns it as an `AdvisorFit`: the targets, the node size (given, else the
experiment's layout, else the cost settings), the candidate rank counts (`candidate_ranks`), the
measurements so far, the per-step PMNF the shrink is estimated on, the primary time model and its
interval at the targets. Proposing runs (the initial set, the greedy next runs, their cost) is the
second stage and lives in `advisor.py`, which keeps an `AdvisorFit` as its `fitted_`; this module
never looks at a plan.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import pandas as pd

from extradeep.analysis.cost import CostSettings
from extradeep.analysis.epoch import EPOCH_TIME
from extradeep.analysis.hypothetical import interval_width
from extradeep.columns import HI, LO, PREDICTED, RANKS, REP, VALUE
from extradeep.errors import InputError
from extradeep.io.placement import resolve_layout, source_name

DEFAULT_RUN_SECONDS = 300.0  # nsys start-up + 2 sampled epochs + export, per run
MAX_CANDIDATES = 48
MIN_SHRINK_PCT = 2.0  # expected shrink (% of the interval) below which a run is not worth its cost


@dataclass
class AdvisorSettings:
    """The settings of a :class:`~extradeep.analysis.advisor.MeasurementAdvisor` (its constructor's
    arguments, the same names and defaults), checked by `check`."""

    target: object
    max_ranks: int
    gpus_per_node: int | None = None
    budget_gpu_hours: float | None = None
    _: KW_ONLY
    cost: CostSettings | None = None
    run_seconds: float = DEFAULT_RUN_SECONDS
    level: float = 0.95
    reps: int = 2
    min_points: int = 5
    quantity: str = EPOCH_TIME
    initial_share: float = 0.5
    candidates: object = None
    options: dict | None = None
    min_shrink: float = MIN_SHRINK_PCT
    partial_nodes: bool = False

    def check(self) -> None:
        """A bad setting is an InputError naming its option."""
        targets = np.atleast_1d(np.asarray(self.target, dtype=float))
        if targets.size == 0 or not np.all(np.isfinite(targets)) or (targets < 2).any() or (targets % 1).any():
            raise InputError("--target", f"needs whole rank counts >= 2, got {self.target!r}")
        checks = [
            ("--max-ranks", self.max_ranks, 2, True),
            ("--reps", self.reps, 1, True),
            ("--min-points", self.min_points, 2, True),
            ("--run-seconds", self.run_seconds, 0, False),
        ]
        for option, value, low, whole in checks:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and np.isfinite(value)
            if not ok or value < low or (low == 0 and value <= 0) or (whole and value % 1):
                kind = "a whole number" if whole else "a number"
                bound = "> 0" if low == 0 else f">= {low}"
                raise InputError(option, f"must be {kind} {bound}, got {value!r}")
        budget = self.budget_gpu_hours
        if budget is not None and not (np.isfinite(budget) and budget > 0):
            raise InputError("--budget", f"must be a positive number of GPU-hours, got {self.budget_gpu_hours!r}")
        per_node = self.gpus_per_node
        if per_node is not None and not (float(per_node) >= 1 and float(per_node) % 1 == 0):
            raise InputError("--gpus-per-node", f"must be a whole number >= 1, got {self.gpus_per_node!r}")
        if not 0 < self.level < 1:
            raise InputError("--level", f"must be between 0 and 1, got {self.level!r}")
        if not 0 < self.initial_share <= 1:
            raise InputError("initial_share", f"must be in (0, 1], got {self.initial_share!r}")


@dataclass
class AdvisorFit:
    """What `fit_advisor` read from the measurements with `settings`: the cost settings in use,
    the `targets` (sorted rank counts), `notes` for the user, the experiment's `app` and `fixed`
    parameters, the modeled `quantity`, the `primary` time model (an experiment's, else None) and
    its measured medians `primary_measured` (ranks, value), the node size `gpus_per_node` and
    `ranks_per_node` (None: unknown, or one rank per node), the `candidates` rank counts, the
    `measurements` (ranks, rep, value; None from nothing), the per-step PMNF `model` the shrink is
    estimated on (None: too few points), `current` (prediction and interval at each target) and
    `width_scale` (primary interval over the PMNF's, 1 without a primary model)."""

    settings: AdvisorSettings
    cost: CostSettings
    targets: np.ndarray
    quantity: str
    notes: list[str] = field(default_factory=list)
    app: str = "app"
    fixed: dict = field(default_factory=dict)
    primary: object = None
    primary_measured: pd.DataFrame | None = None
    gpus_per_node: int | None = None
    ranks_per_node: int | None = None
    candidates: list[int] = field(default_factory=list)
    measurements: pd.DataFrame | None = None
    model: object = None
    current: pd.DataFrame | None = None
    width_scale: float = 1.0

    def modeled(self) -> pd.DataFrame:
        """The measurements the time model uses: beyond a crossed node boundary only, once there are
        :meth:`beyond_points` configurations there (the targets live in that communication regime)."""
        data = self.measurements[self.measurements[RANKS] > 1]
        rpn = self.ranks_per_node
        if self.crosses_boundary():
            beyond = data[data[RANKS] > rpn]
            if beyond[RANKS].nunique() >= self.beyond_points():
                return beyond
        return data

    def beyond_points(self) -> int:
        """Configurations beyond the node boundary a model there needs: `min_points`, or every
        candidate the allocation offers there when that is fewer (whole nodes: 8, 12, 16 ranks on
        4-GPU nodes within 16), but at least 3."""
        offered = sum(c > self.ranks_per_node for c in self.candidates) if self.ranks_per_node else 0
        return max(3, min(self.settings.min_points, offered))

    def crosses_boundary(self) -> bool:
        """Whether the targets lie beyond one node."""
        rpn = self.ranks_per_node
        return bool(rpn and self.targets.max() > rpn)

    def width(self, model) -> float:
        """Mean relative half-width (%) of `model`'s interval at the targets."""
        pred = np.asarray(model.predict(self.targets), float)
        level = self.settings.level
        return float(np.nanmean(_relative_half_width(interval_width(model, self.targets, level), pred)))


def fit_advisor(settings: AdvisorSettings, data=None, primary=None) -> AdvisorFit:
    """Check `settings`, read the measurements so far (None: nothing measured yet; an Experiment;
    a DataFrame of ranks, rep, value) and fit the time model. ``primary``: the experiment's
    primary time model when already made (``Analysis.primary``)."""
    settings.check()
    targets = np.array(sorted({int(t) for t in np.atleast_1d(settings.target)}), dtype=float)
    fit = AdvisorFit(settings, settings.cost or CostSettings(), targets, settings.quantity)
    layout = None
    if data is not None and not isinstance(data, pd.DataFrame):
        data, layout = _from_experiment(fit, data, primary)
    fit.gpus_per_node = _node_size(fit, layout)
    _set_candidates(fit)
    fit.measurements = None if data is None else _clean(data)
    fit.model = _fit_model(fit) if fit.measurements is not None else None
    fit.current = _current(fit)
    fit.width_scale = _width_scale(fit)
    return fit


def _set_candidates(fit: AdvisorFit) -> None:
    """Ranks per node and the candidate rank counts, from the node size."""
    settings = fit.settings
    per_node = fit.gpus_per_node / fit.cost.gpus_per_rank if fit.gpus_per_node else None
    # one rank per node: every run with 2+ ranks uses the network, so there is no boundary to cross
    fit.ranks_per_node = int(per_node) if per_node and per_node >= 2 else None
    fit.candidates = candidate_ranks(
        settings.max_ranks, fit.ranks_per_node, settings.candidates, whole_nodes=not settings.partial_nodes
    )
    if fit.ranks_per_node and settings.candidates is None and settings.max_ranks > fit.ranks_per_node:
        fit.notes.append(
            f"beyond one node the plan proposes whole nodes ({fit.ranks_per_node} ranks each), as clusters "
            "allocate them"
            if not settings.partial_nodes
            else f"--partial-nodes: beyond one node the plan also proposes half nodes ({fit.ranks_per_node} "
            "ranks per node)"
        )


def _from_experiment(fit: AdvisorFit, experiment, primary=None):
    """The experiment's measurements (ranks, rep, value) of the quantity and its cluster layout."""
    from extradeep.analysis.core import measured_values
    from extradeep.analysis.epoch import quantity_label

    quantity = fit.settings.quantity
    params = list(experiment.params)
    ranks = fit.cost.ranks_param
    if params != [ranks]:
        raise InputError(
            "plan",
            f"proposes rank counts for experiments that model {ranks!r} only; "
            f"this one models {', '.join(params)} (fix the others with --param)",
        )
    values = measured_values(experiment)
    values = values[values["quantity"] == quantity]
    if values.empty:
        raise InputError("plan", f"the experiment has no {quantity!r} values to model")
    fit.app = str(experiment.settings.app or "app")
    fit.fixed = experiment.fixed_params
    _primary_of(fit, experiment, primary)
    # Per training step, as analyse() models epochs (n_t x step model): the step counts are
    # exact, so the relative interval of the step time is that of the epoch time.
    fit.quantity = quantity_label(quantity, "step")
    frame = values.rename(columns={ranks: RANKS})[[RANKS, REP, VALUE]]
    # the cluster layout: the profiles' node signals, else the system file (--system)
    return frame, resolve_layout(experiment.settings.layout, experiment.settings.system)


def _primary_of(fit: AdvisorFit, experiment, primary=None) -> None:
    """The primary time model and its measured medians: the prediction the plan improves."""
    from extradeep.analysis.core import measured_values
    from extradeep.analysis.primary import primary_time_model

    _check_range(fit, experiment)
    fit.primary = primary if primary is not None else primary_time_model(experiment, fit.settings.options)
    if fit.primary is not None:
        values = measured_values(experiment, experiment.dataset)
        values = values[values["quantity"] == fit.primary.quantity]
        ranks = fit.cost.ranks_param
        medians = values.groupby(ranks)[VALUE].median()
        fit.primary_measured = pd.DataFrame({RANKS: medians.index.to_numpy(float), VALUE: medians.to_numpy()})


def _check_range(fit: AdvisorFit, experiment) -> None:
    """Targets beyond what the models support are refused (extradeep.analysis.scales)."""
    from extradeep.analysis.scales import range_limit

    ranks = fit.cost.ranks_param
    largest = float(experiment.points[ranks].max())
    limit, why = range_limit(largest, ranks, [ranks], experiment.dataset, experiment.fixed_params)
    if fit.targets.max() > limit:
        raise InputError(
            "--target",
            f"{fit.targets.max():g} ranks is beyond what the models support: at most {limit:g} ({why})",
        )


def _node_size(fit: AdvisorFit, layout) -> int | None:
    """GPUs per node: the setting, else the experiment's layout, else the cost settings (None: unknown)."""
    if fit.settings.gpus_per_node is not None:
        return int(fit.settings.gpus_per_node)
    if isinstance(layout, dict) and layout.get("gpus_per_node"):
        gpus = int(layout["gpus_per_node"])
        where = "system file" if layout["source"] == "system" else f"profiles' {source_name(layout['source'])}"
        fit.notes.append(f"node size {gpus} GPU{'s' if gpus != 1 else ''} from the experiment's {where}")
        if layout.get("warning"):
            fit.notes.append(layout["warning"])
        return gpus
    if fit.cost.gpus_per_node:
        return int(fit.cost.gpus_per_node)
    fit.notes.append("node size unknown (give --gpus-per-node): node boundaries are not considered")
    return None


def _fit_model(fit: AdvisorFit):
    """The per-step PMNF of the modeled measurements, or None (with a note) when they are too few."""
    from extradeep.modeling.modeler import PMNFModeler

    data = fit.modeled()
    beyond = fit.crosses_boundary() and data[RANKS].min() > fit.ranks_per_node
    if beyond:
        fit.notes.append(
            f"the model uses the {data[RANKS].nunique()} configurations beyond the node "
            f"boundary ({fit.ranks_per_node} ranks), where the targets are"
        )
    need = fit.beyond_points() if beyond else fit.settings.min_points
    if data[RANKS].nunique() < need:
        fit.notes.append(
            f"{data[RANKS].nunique()} configurations measured, a model needs "
            f"{need}: the plan completes the initial set first"
        )
        return None
    given = fit.settings.options or {}
    options = {**given, "min_points": min(need, given.get("min_points", need))}
    modeler = PMNFModeler(**options, param_names=["ranks"])
    try:
        return modeler.fit(data[[RANKS]].to_numpy(float), data[VALUE].to_numpy(float), reps=data[REP].to_numpy()).model_
    except InputError as exc:
        fit.notes.append(f"no model of the measurements ({exc.problem}): the plan completes the initial set")
        return None


def _current(fit: AdvisorFit) -> pd.DataFrame:
    """Prediction and interval at each target: the primary model's, else the PMNF's, else empty."""
    columns = ["ranks", "predicted", "lo", "hi", "interval_pct"]
    targets = fit.targets
    if fit.primary is not None:
        table = fit.primary.predict(pd.DataFrame({fit.cost.ranks_param: targets}), [fit.cost.ranks_param])
        pred, lo, hi = (table[c].to_numpy(float) for c in ("T", "T_lo", "T_hi"))
    elif fit.model is not None:
        pred = np.asarray(fit.model.predict(targets), float)
        lo, hi = fit.model.interval(targets, level=fit.settings.level)
    else:
        return pd.DataFrame({RANKS: targets.astype(int)}).reindex(columns=columns)
    return pd.DataFrame(
        {
            RANKS: targets.astype(int),
            PREDICTED: pred,
            LO: lo,
            HI: hi,
            "interval_pct": _relative_half_width(hi - lo, pred),
        }
    )


def _width_scale(fit: AdvisorFit) -> float:
    """Primary interval at the targets over the per-step PMNF's: the shrinks estimated on the PMNF
    are shown as shrinks of the primary interval (1 without a primary model)."""
    if fit.primary is None or fit.model is None:
        return 1.0
    primary, surrogate = float(np.nanmean(fit.current["interval_pct"])), fit.width(fit.model)
    return primary / surrogate if np.isfinite(primary) and surrogate > 0 else 1.0


def _relative_half_width(width, pred) -> np.ndarray:
    width, pred = np.asarray(width, float), np.asarray(pred, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pred > 0, 50.0 * width / pred, np.nan)


def _clean(data: pd.DataFrame) -> pd.DataFrame:
    missing = {"ranks", "value"} - set(data.columns)
    if missing:
        raise InputError("plan", f"measurements need columns ranks, rep, value; missing {', '.join(sorted(missing))}")
    frame = data.copy()
    if REP not in frame:
        frame[REP] = frame.groupby(RANKS).cumcount() + 1
    frame = frame[np.isfinite(frame[VALUE].to_numpy(float))]
    if frame.empty:
        raise InputError("plan", "no finite measurements")
    return frame.astype({"ranks": int, "rep": int, "value": float})[[RANKS, REP, VALUE]]


def candidate_ranks(
    max_ranks: int, ranks_per_node: int | None = None, given=None, whole_nodes: bool = False
) -> list[int]:
    """Rank counts worth profiling: even counts within a node; beyond it whole nodes
    (``whole_nodes``, as clusters allocate them), else multiples of half a node."""
    if given is not None:
        values = sorted({int(v) for v in given if 2 <= int(v) <= max_ranks})
        if not values:
            raise InputError("--candidates", f"no candidate between 2 and {max_ranks} ranks")
        return values
    rpn = ranks_per_node or max_ranks
    within = set(range(2, min(rpn, max_ranks) + 1, 2)) | ({rpn} if rpn <= max_ranks else set())
    step = rpn if whole_nodes else max(2, rpn // 2)
    beyond = set(range(rpn + step, int(max_ranks) + 1, step)) if rpn < max_ranks else set()
    values = sorted(within | beyond)
    if len(values) > MAX_CANDIDATES:  # keep a geometric ladder, always with the largest allocation
        ladder = np.geomspace(values[0], values[-1], MAX_CANDIDATES)
        values = sorted({min(values, key=lambda v, t=t: abs(math.log(v / t))) for t in ladder} | {values[-1]})
    return values
