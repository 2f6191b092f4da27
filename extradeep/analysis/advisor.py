"""Which configurations and repetitions to profile next: a cost-aware measurement-point advisor.

Two situations. From nothing: the target scale, the largest allocation, the node size and a
profiling budget give an initial set of configurations (the paper's minimum of five, spread
linearly up to the largest one the budget pays for, since points close to the target predict
best) and repetitions. From an experiment: the next configurations or repetitions that shrink
the 95% interval of the primary time model at the target points the most per unit of cost. The
prediction and interval at the targets are those of the primary time model, the one every command
answers with (:mod:`extradeep.analysis.primary`); the shrink a run would bring is estimated on a
direct PMNF of the same measurements per step, whose interval can be updated before the run is
taken (see :mod:`extradeep.analysis.hypothetical`), and applied to the primary interval.

A profiled run costs ``run_seconds`` (start-up, the short sample, the export) on all its GPUs;
the user's :class:`~extradeep.analysis.cost.CostSettings` turn that into their unit. Node
boundaries: when targets lie beyond one node, at least two configurations on each side of the
node boundary are asked for, since communication changes regime there (NVLink -> network).
Beyond one node the candidates are whole nodes, as clusters allocate them, unless
``partial_nodes``. The node size comes from ``gpus_per_node``, else the experiment's layout (its
profiles' most trusted node signal, else its system file), else the cost settings.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from extradeep.analysis.cost import CostSettings, cost_of
from extradeep.analysis.epoch import EPOCH_TIME
from extradeep.analysis.hypothetical import PointData, interval_width, updated_model
from extradeep.columns import COST, GPU_HOURS, HI, LO, PREDICTED, RANKS, REP, VALUE
from extradeep.errors import InputError
from extradeep.io.placement import resolve_layout, source_name

DEFAULT_RUN_SECONDS = 300.0  # nsys start-up + 2 sampled epochs + export, per run
MAX_CANDIDATES = 48
MIN_SHRINK_PCT = 2.0  # expected shrink (% of the interval) below which a run is not worth its cost
PLAN_COLUMNS = [
    RANKS,
    "reps",
    "first_rep",
    "nodes",
    "action",
    GPU_HOURS,
    COST,
    "interval_before_pct",
    "interval_after_pct",
    "shrink_pct",
    "reason",
]
NEW, REPEAT, INITIAL = "new configuration", "repetition", "initial"


class MeasurementAdvisor:
    """Proposes the profiling runs (configurations and repetitions) that make the predictions at
    `target` ranks precise for the least cost, within `max_ranks` and a GPU-hour budget.

    Configure in the constructor, ``fit(None | Experiment | DataFrame)``, then ``propose(k)``.
    A DataFrame holds one row per measurement with columns ``ranks``, ``rep``, ``value``.
    Fitted attributes: ``targets_``, ``gpus_per_node_``, ``ranks_per_node_``, ``candidates_``,
    ``measurements_`` (None from nothing), ``model_`` (the per-step PMNF the shrink is estimated
    on), ``primary_`` (the primary time model of an experiment, :class:`~extradeep.analysis.primary.
    PrimaryTime`, else None), ``primary_measured_`` (its measured medians: ranks, value), ``current_``
    (prediction and interval at each target, from ``primary_`` when there is one), ``quantity_``,
    ``app_``, ``fixed_``, ``notes_``.
    """

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
    def fit(self, data=None, primary=None) -> MeasurementAdvisor:
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

    # -- propose ------------------------------------------------------------------------------
    def propose(self, k: int = 3) -> pd.DataFrame:
        """The proposed runs (PLAN_COLUMNS): the initial set, or the next `k` steps for an experiment."""
        if not hasattr(self, "targets_"):
            raise RuntimeError("call fit() before propose()")
        if k < 1:
            raise InputError("-k", f"must be at least 1, got {k}")
        rows = self._initial() if self.model_ is None else self._next(int(k))
        plan = pd.DataFrame(rows, columns=PLAN_COLUMNS)
        for column in ("interval_before_pct", "interval_after_pct"):  # in terms of the primary interval
            plan[column] = plan[column].astype(float) * self.width_scale_
        primary = self.primary_
        plan.attrs.update(
            app=self.app_,
            fixed=dict(self.fixed_),
            quantity=self.quantity_ if primary is None else primary.label,
            model=None if primary is None else primary.text,
            notes=list(self.notes_),
            targets=self.targets_.astype(int).tolist(),
            cost_unit=self.cost_.unit,
            gpus_per_node=self.gpus_per_node_,
            level=self.level,
            current=self.current_.copy(),
            formula=primary.model.formula() if primary is not None else (self.model_ and self.model_.formula()),
        )
        return plan

    def run_cost(self, ranks) -> tuple[np.ndarray, np.ndarray]:
        """(GPU-hours, cost in the user's unit) of one profiled run at each rank count."""
        ranks = np.asarray(ranks, dtype=float)
        seconds = np.full_like(ranks, float(self.run_seconds))
        points = pd.DataFrame({self.cost_.ranks_param: ranks, **{k: v for k, v in self.fixed_.items()}})
        params = [self.cost_.ranks_param, *self.fixed_]
        gpu_hours = seconds / 3600.0 * ranks * self.cost_.gpus_per_rank
        return gpu_hours, np.asarray(cost_of(seconds, points, self.cost_, params), float)

    def nodes(self, ranks) -> np.ndarray:
        if not self.gpus_per_node_:
            return np.full(np.shape(ranks), np.nan)
        return np.ceil(np.asarray(ranks, float) * self.cost_.gpus_per_rank / self.gpus_per_node_)

    def _crosses_boundary(self) -> bool:
        rpn = self.ranks_per_node_
        return bool(rpn and self.targets_.max() > rpn)

    def _initial(self) -> list[dict]:
        """From nothing (or too few points): the largest affordable linear set, completed."""
        measured = set() if self.measurements_ is None else set(self.measurements_[RANKS].astype(int))
        budget = None if self.budget_gpu_hours is None else self.budget_gpu_hours * self.initial_share
        for reps in range(self.reps, 0, -1):
            for top in sorted(self.candidates_, reverse=True):
                points = self._spread(top)
                if points is None:
                    continue
                new = [p for p in points if p not in measured]
                hours = float(self.run_cost(new)[0].sum() * reps) if new else 0.0
                if budget is None or hours <= budget:
                    if reps < self.reps:
                        self.notes_.append(
                            f"the budget pays for {reps} repetition(s) per configuration only, "
                            "so the noise cannot be measured well"
                        )
                    return self._initial_rows(points, new, reps)
        cheapest = (
            self._spread(min(t for t in self.candidates_ if self._spread(t) is not None))
            if any(self._spread(t) is not None for t in self.candidates_)
            else None
        )
        if cheapest is None:
            raise InputError(
                "--max-ranks",
                f"{self.max_ranks} allows fewer than {self.min_points} configurations "
                f"(candidates: {', '.join(map(str, self.candidates_))})",
            )
        need = float(self.run_cost(cheapest)[0].sum())
        raise InputError(
            "--budget",
            f"{self.budget_gpu_hours:g} GPU-hours cannot pay for {self.min_points} "
            f"configurations: the cheapest set ({', '.join(map(str, cheapest))}, "
            f"one run each) needs {need / self.initial_share:.3g} GPU-hours "
            f"({self.initial_share:.0%} of the budget goes to the initial set)",
        )

    def _spread(self, top: int) -> list[int] | None:
        """`min_points` candidates spread linearly up to `top`, with two on each side of a crossed node boundary."""
        below = [c for c in self.candidates_ if c <= top]
        if len(below) < self.min_points:
            return None
        chosen: list[int] = []
        for k in range(1, self.min_points + 1):
            want = top * k / self.min_points
            free = [c for c in below if c not in chosen]
            chosen.append(min(free, key=lambda c: (abs(c - want), c)))
        rpn = self.ranks_per_node_
        if self._crosses_boundary() and top > rpn:
            for side in (lambda c: c <= rpn, lambda c: c > rpn):
                while sum(map(side, chosen)) < 2:
                    free = [c for c in below if side(c) and c not in chosen]
                    if not free:
                        return None
                    # nearest to the boundary: the regime change is best seen next to it
                    chosen.append(min(free, key=lambda c: abs(c - rpn)))
        return sorted(chosen)

    def _initial_rows(self, points: list[int], new: list[int], reps: int) -> list[dict]:
        rpn = self.ranks_per_node_
        if self._crosses_boundary() and max(points) <= rpn:
            self.notes_.append(
                f"targets lie beyond one node ({rpn} ranks) but the largest allocation does not: "
                "the change of communication at the node boundary is not measured"
            )
        gpu_hours, cost = self.run_cost(new)
        nodes = self.nodes(new)
        reason = "initial set: " + ", ".join(map(str, points)) + " ranks spread linearly up to the largest affordable"
        return [
            {
                "ranks": int(r),
                "reps": reps,
                "first_rep": 1,
                "nodes": nodes[i],
                "action": INITIAL,
                "gpu_hours": gpu_hours[i] * reps,
                "cost": cost[i] * reps,
                "interval_before_pct": np.nan,
                "interval_after_pct": np.nan,
                "shrink_pct": np.nan,
                "reason": reason,
            }
            for i, r in enumerate(new)
        ]

    def _next(self, k: int) -> list[dict]:
        """Greedy: each step takes the run that shrinks the interval at the targets most per cost."""
        m = self.modeled()
        data = PointData.from_values(m[RANKS], m[VALUE])
        every = self.measurements_
        next_rep = {int(x): int(every.loc[every[RANKS] == x, REP].max()) + 1 for x in every[RANKS].unique()}
        model, rows = self.model_, []
        width = self._width(model)
        spent = 0.0
        for _ in range(k):
            options, scored = self._options(data), []
            if not options:
                break
            for x, n, action, reason in options:
                hours, cost = (v[0] * n for v in self.run_cost([x]))
                if self.budget_gpu_hours is not None and spent + hours > self.budget_gpu_hours + 1e-12:
                    continue
                new_model, new_data = updated_model(model, data, float(x), n)
                new_width = self._width(new_model)
                gain = (width - new_width) / cost if cost > 0 else -np.inf
                scored.append((gain, x, n, action, (new_model, new_data, new_width, hours, cost), reason))
            if not scored:
                self.notes_.append("the budget is spent: no further run fits")
                break
            best = self._choose(scored, width, data)
            _, x, n, action, (model, data, new_width, hours, cost), reason = best
            first = next_rep.get(int(x), 1)
            next_rep[int(x)] = first + n
            rows.append(
                {
                    "ranks": int(x),
                    "reps": n,
                    "first_rep": first,
                    "nodes": self.nodes([x])[0],
                    "action": action,
                    "gpu_hours": hours,
                    "cost": cost,
                    "interval_before_pct": width,
                    "interval_after_pct": new_width,
                    "shrink_pct": 100.0 * (1 - new_width / width) if width > 0 else np.nan,
                    "reason": reason or "largest expected shrink of the interval per cost",
                }
            )
            spent += hours
            width = new_width
        return rows

    def _choose(self, scored: list, width: float, data: PointData):
        """The largest expected shrink per cost, unless it is below `min_shrink` % of the interval:
        the estimate assumes a run lands on the model, so a series of cheap repetitions with ~1%
        each never tests the model's form. Then a new configuration (beyond a crossed node boundary
        until `min_points` are there, the regime the targets live in), else a run worth the threshold."""

        def worth(s):
            return width - s[4][2] >= self.min_shrink / 100.0 * width

        def per_cost(runs):
            return max(runs, key=lambda s: s[0])

        best = per_cost(scored)
        new = [s for s in scored if s[3] == NEW]
        if worth(best) or not new:
            return best if worth(best) else per_cost([s for s in scored if worth(s)] or scored)
        why = f"no run shrinks the interval by {self.min_shrink:g}% or more: a new configuration tests the model"
        rpn = self.ranks_per_node_
        measured = set(self.measurements_[RANKS].astype(int)) | {int(x) for x in data.x}
        if self._crosses_boundary() and sum(x > rpn for x in measured) < self.min_points:
            beyond = [s for s in new if s[1] > rpn]
            if beyond:
                new, why = beyond, why + f" beyond the node boundary ({rpn} ranks), where the targets are"
        return (*per_cost(new)[:5], why)

    def _options(self, data: PointData) -> list[tuple[int, int, str, str]]:
        """Candidate runs: (ranks, repetitions, action, reason); with a node rule to meet, only those."""
        measured = {int(x) for x in data.x} | set(self.measurements_[RANKS].astype(int))
        rpn = self.ranks_per_node_
        if self._crosses_boundary() and max(self.candidates_) > rpn:
            for name, side in (("below", lambda c: c <= rpn), ("beyond", lambda c: c > rpn)):
                if sum(map(side, measured)) < 2:
                    reason = (
                        f"node boundary at {rpn} ranks: the predictions cross it, so two configurations "
                        f"{name} it are needed"
                    )
                    forced = [(c, self.reps, NEW, reason) for c in self.candidates_ if side(c) and c not in measured]
                    if forced:
                        return forced
        # one repetition: the noise is known from the repeated points, and a second stays an option
        new = [(c, 1, NEW, "") for c in self.candidates_ if c not in measured]
        return new + [(int(x), 1, REPEAT, "") for x in data.x]

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


def plan_measurements(
    target,
    max_ranks: int,
    gpus_per_node: int | None = None,
    budget_gpu_hours: float | None = None,
    experiment=None,
    k: int = 3,
    **options,
) -> pd.DataFrame:
    """One call: ``MeasurementAdvisor(...).fit(experiment).propose(k)``."""
    advisor = MeasurementAdvisor(target, max_ranks, gpus_per_node, budget_gpu_hours, **options)
    return advisor.fit(experiment).propose(k)
