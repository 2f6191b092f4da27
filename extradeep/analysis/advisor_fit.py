"""The measurement advisor's first half: its settings, their checks, and what `fit` learns.

`AdvisorFit` holds what `MeasurementAdvisor` (:mod:`extradeep.analysis.advisor`) is configured with
and reads before it can propose anything: the targets, the node size (given, else the experiment's
layout, else the cost settings), the candidate rank counts (`candidate_ranks`), the measurements
so far, the per-step PMNF the shrink is estimated on, the primary time model and its interval at
the targets. Proposing runs (the initial set, the greedy next runs, their cost) is the second
stage and lives in `advisor.py`, which subclasses this one; this module never looks at a plan.
"""

from __future__ import annotations

import math

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


class AdvisorFit:
    """The settings of a :class:`~extradeep.analysis.advisor.MeasurementAdvisor`, checked by `fit`,
    and what `fit` reads from the measurements (the fitted attributes listed there)."""

    def __init__(
        self,
        target,
        max_ranks: int,
        gpus_per_node: int | None = None,
        budget_gpu_hours: float | None = None,
        *,
        cost: CostSettings | None = None,
        run_seconds: float = DEFAULT_RUN_SECONDS,
        level: float = 0.95,
        reps: int = 2,
        min_points: int = 5,
        quantity: str = EPOCH_TIME,
        initial_share: float = 0.5,
        candidates=None,
        options: dict | None = None,
        min_shrink: float = MIN_SHRINK_PCT,
        partial_nodes: bool = False,
    ):
        self.target = target
        self.max_ranks = max_ranks
        self.gpus_per_node = gpus_per_node
        self.budget_gpu_hours = budget_gpu_hours
        self.cost = cost
        self.run_seconds = run_seconds
        self.level = level
        self.reps = reps
        self.min_points = min_points
        self.quantity = quantity
        self.initial_share = initial_share
        self.candidates = candidates
        self.options = options
        self.min_shrink = min_shrink
        self.partial_nodes = partial_nodes

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, data=None, primary=None) -> AdvisorFit:
        """Read the measurements so far (None: nothing measured yet) and fit the time model.
        ``primary``: the experiment's primary time model when already made (``Analysis.primary``)."""
        self._check()
        self.cost_ = self.cost or CostSettings()
        self.targets_ = np.array(sorted({int(t) for t in np.atleast_1d(self.target)}), dtype=float)
        self.notes_: list[str] = []
        self.app_, self.fixed_, self.quantity_ = "app", {}, self.quantity
        self.primary_, self.primary_measured_ = None, None
        layout = None
        if data is not None and not isinstance(data, pd.DataFrame):
            data, layout = self._from_experiment(data, primary)
        self.gpus_per_node_ = self._node_size(layout)
        per_node = self.gpus_per_node_ / self.cost_.gpus_per_rank if self.gpus_per_node_ else None
        # one rank per node: every run with 2+ ranks uses the network, so there is no boundary to cross
        self.ranks_per_node_ = int(per_node) if per_node and per_node >= 2 else None
        self.candidates_ = candidate_ranks(
            self.max_ranks, self.ranks_per_node_, self.candidates, whole_nodes=not self.partial_nodes
        )
        if self.ranks_per_node_ and self.candidates is None and self.max_ranks > self.ranks_per_node_:
            self.notes_.append(
                f"beyond one node the plan proposes whole nodes ({self.ranks_per_node_} ranks each), as clusters "
                "allocate them"
                if not self.partial_nodes
                else f"--partial-nodes: beyond one node the plan also proposes half nodes ({self.ranks_per_node_} "
                "ranks per node)"
            )
        self.measurements_ = None if data is None else _clean(data)
        self.model_ = self._fit_model() if self.measurements_ is not None else None
        self.current_ = self._current()
        self.width_scale_ = self._width_scale()
        return self

    def _check(self) -> None:
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
                raise InputError(option, f"must be {kind} >= {low}{' (> 0)' if low == 0 else ''}, got {value!r}")
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

    def _from_experiment(self, experiment, primary=None):
        from extradeep.analysis.core import measured_values
        from extradeep.analysis.epoch import quantity_label

        params = list(experiment.params)
        ranks = self.cost_.ranks_param
        if params != [ranks]:
            raise InputError(
                "plan",
                f"proposes rank counts for experiments that model {ranks!r} only; "
                f"this one models {', '.join(params)} (fix the others with --param)",
            )
        values = measured_values(experiment)
        values = values[values["quantity"] == self.quantity]
        if values.empty:
            raise InputError("plan", f"the experiment has no {self.quantity!r} values to model")
        self.app_ = str(experiment.settings.app or "app")
        self.fixed_ = experiment.fixed_params
        self._primary_of(experiment, primary)
        # Per training step, as analyse() models epochs (n_t x step model): the step counts are
        # exact, so the relative interval of the step time is that of the epoch time.
        self.quantity_ = quantity_label(self.quantity, "step")
        frame = values.rename(columns={ranks: RANKS})[[RANKS, REP, VALUE]]
        # the cluster layout: the profiles' node signals, else the system file (--system)
        return frame, resolve_layout(experiment.settings.layout, experiment.settings.system)

    def _primary_of(self, experiment, primary=None) -> None:
        """The primary time model and its measured medians: the prediction the plan improves."""
        from extradeep.analysis.core import measured_values
        from extradeep.analysis.primary import primary_time_model

        self._check_range(experiment)
        self.primary_ = primary if primary is not None else primary_time_model(experiment, self.options)
        if self.primary_ is not None:
            values = measured_values(experiment, experiment.dataset)
            values = values[values["quantity"] == self.primary_.quantity]
            ranks = self.cost_.ranks_param
            medians = values.groupby(ranks)[VALUE].median()
            self.primary_measured_ = pd.DataFrame({RANKS: medians.index.to_numpy(float), VALUE: medians.to_numpy()})

    def _check_range(self, experiment) -> None:
        """Targets beyond what the models support are refused (extradeep.analysis.scales)."""
        from extradeep.analysis.scales import range_limit

        ranks = self.cost_.ranks_param
        largest = float(experiment.points[ranks].max())
        limit, why = range_limit(largest, ranks, [ranks], experiment.dataset, experiment.fixed_params)
        if self.targets_.max() > limit:
            raise InputError(
                "--target",
                f"{self.targets_.max():g} ranks is beyond what the models support: at most {limit:g} ({why})",
            )

    def _node_size(self, layout) -> int | None:
        if self.gpus_per_node is not None:
            return int(self.gpus_per_node)
        if isinstance(layout, dict) and layout.get("gpus_per_node"):
            gpus = int(layout["gpus_per_node"])
            where = "system file" if layout["source"] == "system" else f"profiles' {source_name(layout['source'])}"
            self.notes_.append(f"node size {gpus} GPU{'s' if gpus != 1 else ''} from the experiment's {where}")
            if layout.get("warning"):
                self.notes_.append(layout["warning"])
            return gpus
        if self.cost_.gpus_per_node:
            return int(self.cost_.gpus_per_node)
        self.notes_.append("node size unknown (give --gpus-per-node): node boundaries are not considered")
        return None

    def modeled(self) -> pd.DataFrame:
        """The measurements the time model uses: beyond a crossed node boundary only, once there are
        :meth:`beyond_points` configurations there (the targets live in that communication regime)."""
        data = self.measurements_[self.measurements_[RANKS] > 1]
        rpn = self.ranks_per_node_
        if self._crosses_boundary():
            beyond = data[data[RANKS] > rpn]
            if beyond[RANKS].nunique() >= self.beyond_points():
                return beyond
        return data

    def beyond_points(self) -> int:
        """Configurations beyond the node boundary a model there needs: `min_points`, or every
        candidate the allocation offers there when that is fewer (whole nodes: 8, 12, 16 ranks on
        4-GPU nodes within 16), but at least 3."""
        offered = sum(c > self.ranks_per_node_ for c in self.candidates_) if self.ranks_per_node_ else 0
        return max(3, min(self.min_points, offered))

    def _fit_model(self):
        from extradeep.modeling.modeler import PMNFModeler

        data = self.modeled()
        if self._crosses_boundary() and data[RANKS].min() > self.ranks_per_node_:
            self.notes_.append(
                f"the model uses the {data[RANKS].nunique()} configurations beyond the node "
                f"boundary ({self.ranks_per_node_} ranks), where the targets are"
            )
        beyond = self._crosses_boundary() and data[RANKS].min() > self.ranks_per_node_
        need = self.beyond_points() if beyond else self.min_points
        if data[RANKS].nunique() < need:
            self.notes_.append(
                f"{data[RANKS].nunique()} configurations measured, a model needs "
                f"{need}: the plan completes the initial set first"
            )
            return None
        options = {**(self.options or {}), "min_points": min(need, (self.options or {}).get("min_points", need))}
        modeler = PMNFModeler(**options, param_names=["ranks"])
        try:
            return modeler.fit(
                data[[RANKS]].to_numpy(float), data[VALUE].to_numpy(float), reps=data[REP].to_numpy()
            ).model_
        except InputError as exc:
            self.notes_.append(f"no model of the measurements ({exc.problem}): the plan completes the initial set")
            return None

    def _current(self) -> pd.DataFrame:
        columns = ["ranks", "predicted", "lo", "hi", "interval_pct"]
        if self.primary_ is not None:
            table = self.primary_.predict(
                pd.DataFrame({self.cost_.ranks_param: self.targets_}), [self.cost_.ranks_param]
            )
            pred, lo, hi = (table[c].to_numpy(float) for c in ("T", "T_lo", "T_hi"))
        elif self.model_ is not None:
            pred = np.asarray(self.model_.predict(self.targets_), float)
            lo, hi = self.model_.interval(self.targets_, level=self.level)
        else:
            return pd.DataFrame({RANKS: self.targets_.astype(int)}).reindex(columns=columns)
        return pd.DataFrame(
            {
                RANKS: self.targets_.astype(int),
                PREDICTED: pred,
                LO: lo,
                HI: hi,
                "interval_pct": _relative_half_width(hi - lo, pred),
            }
        )

    def _width_scale(self) -> float:
        """Primary interval at the targets over the per-step PMNF's: the shrinks estimated on the PMNF
        are shown as shrinks of the primary interval (1 without a primary model)."""
        if self.primary_ is None or self.model_ is None:
            return 1.0
        primary, surrogate = float(np.nanmean(self.current_["interval_pct"])), self._width(self.model_)
        return primary / surrogate if np.isfinite(primary) and surrogate > 0 else 1.0

    def _crosses_boundary(self) -> bool:
        rpn = self.ranks_per_node_
        return bool(rpn and self.targets_.max() > rpn)

    def _width(self, model) -> float:
        """Mean relative half-width (%) of the interval at the targets."""
        pred = np.asarray(model.predict(self.targets_), float)
        return float(np.nanmean(_relative_half_width(interval_width(model, self.targets_, self.level), pred)))


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
