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

The settings and what fitting reads (targets, node size, candidates, the models and the interval
at the targets) are data, with the functions that check and fill them, in
:mod:`extradeep.analysis.advisor_fit` (`AdvisorSettings`, `fit_advisor` -> `AdvisorFit`).
`MeasurementAdvisor` is the estimator around them: it keeps its constructor's settings as
attributes, its fit as ``fitted_`` (shown as the fitted attributes ``targets_``, ``model_``, ...)
and proposes the runs.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pandas as pd

from extradeep.analysis.advisor_fit import AdvisorSettings, fit_advisor
from extradeep.analysis.cost import CostSettings, cost_of
from extradeep.analysis.hypothetical import PointData, updated_model
from extradeep.columns import COST, GPU_HOURS, RANKS, REP, VALUE
from extradeep.errors import InputError

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


def _fitted(name: str) -> property:
    """The fitted attribute ``name_``: the field `name` of the advisor's :class:`AdvisorFit` (``fitted_``)."""
    return property(
        lambda self: getattr(self.fitted_, name),
        lambda self, value: setattr(self.fitted_, name, value),
        doc=f"``fitted_.{name}`` (:class:`~extradeep.analysis.advisor_fit.AdvisorFit`).",
    )


class MeasurementAdvisor:
    """Proposes the profiling runs (configurations and repetitions) that make the predictions at
    `target` ranks precise for the least cost, within `max_ranks` and a GPU-hour budget.

    Configure in the constructor (the settings of :class:`~extradeep.analysis.advisor_fit.
    AdvisorSettings`, kept as attributes of the same names), ``fit(None | Experiment | DataFrame)``,
    then ``propose(k)``. A DataFrame holds one row per measurement with columns ``ranks``, ``rep``,
    ``value``. ``fit`` keeps what it read as ``fitted_``, an :class:`~extradeep.analysis.advisor_fit.
    AdvisorFit` (with the settings it was made with, which ``propose`` uses), and shows its fields as
    the fitted attributes: ``targets_``, ``gpus_per_node_``, ``ranks_per_node_``, ``candidates_``,
    ``measurements_`` (None from nothing), ``model_`` (the per-step PMNF the shrink is estimated
    on), ``primary_`` (the primary time model of an experiment, :class:`~extradeep.analysis.primary.
    PrimaryTime`, else None), ``primary_measured_`` (its measured medians: ranks, value), ``current_``
    (prediction and interval at each target, from ``primary_`` when there is one), ``quantity_``,
    ``app_``, ``fixed_``, ``notes_``, ``cost_``, ``width_scale_``.
    """

    # the settings of AdvisorSettings, its names and defaults; kept as attributes (sklearn style)
    def __init__(
        self,
        target,
        max_ranks: int,
        gpus_per_node: int | None = AdvisorSettings.gpus_per_node,
        budget_gpu_hours: float | None = AdvisorSettings.budget_gpu_hours,
        *,
        cost: CostSettings | None = AdvisorSettings.cost,
        run_seconds: float = AdvisorSettings.run_seconds,
        level: float = AdvisorSettings.level,
        reps: int = AdvisorSettings.reps,
        min_points: int = AdvisorSettings.min_points,
        quantity: str = AdvisorSettings.quantity,
        initial_share: float = AdvisorSettings.initial_share,
        candidates=AdvisorSettings.candidates,
        options: dict | None = AdvisorSettings.options,
        min_shrink: float = AdvisorSettings.min_shrink,
        partial_nodes: bool = AdvisorSettings.partial_nodes,
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

    cost_ = _fitted("cost")
    targets_ = _fitted("targets")
    notes_ = _fitted("notes")
    app_ = _fitted("app")
    fixed_ = _fitted("fixed")
    quantity_ = _fitted("quantity")
    primary_ = _fitted("primary")
    primary_measured_ = _fitted("primary_measured")
    gpus_per_node_ = _fitted("gpus_per_node")
    ranks_per_node_ = _fitted("ranks_per_node")
    candidates_ = _fitted("candidates")
    measurements_ = _fitted("measurements")
    model_ = _fitted("model")
    current_ = _fitted("current")
    width_scale_ = _fitted("width_scale")

    def settings(self) -> AdvisorSettings:
        """The constructor's settings as data."""
        return AdvisorSettings(**{f.name: getattr(self, f.name) for f in fields(AdvisorSettings)})

    def fit(self, data=None, primary=None) -> MeasurementAdvisor:
        """Read the measurements so far (None: nothing measured yet) and fit the time model
        (:func:`~extradeep.analysis.advisor_fit.fit_advisor`). ``primary``: the experiment's primary
        time model when already made (``Analysis.primary``)."""
        self.fitted_ = fit_advisor(self.settings(), data, primary)
        return self

    # -- propose ------------------------------------------------------------------------------
    def propose(self, k: int = 3) -> pd.DataFrame:
        """The proposed runs (PLAN_COLUMNS): the initial set, or the next `k` steps for an experiment."""
        if not hasattr(self, "fitted_"):
            raise RuntimeError("call fit() before propose()")
        if k < 1:
            raise InputError("-k", f"must be at least 1, got {k}")
        fit = self.fitted_
        rows = self._initial() if fit.model is None else self._next(int(k))
        plan = pd.DataFrame(rows, columns=PLAN_COLUMNS)
        for column in ("interval_before_pct", "interval_after_pct"):  # in terms of the primary interval
            plan[column] = plan[column].astype(float) * fit.width_scale
        primary = fit.primary
        plan.attrs.update(
            app=fit.app,
            fixed=dict(fit.fixed),
            quantity=fit.quantity if primary is None else primary.label,
            model=None if primary is None else primary.text,
            notes=list(fit.notes),
            targets=fit.targets.astype(int).tolist(),
            cost_unit=fit.cost.unit,
            gpus_per_node=fit.gpus_per_node,
            level=fit.settings.level,
            current=fit.current.copy(),
            formula=primary.model.formula() if primary is not None else (fit.model and fit.model.formula()),
        )
        return plan

    def run_cost(self, ranks) -> tuple[np.ndarray, np.ndarray]:
        """(GPU-hours, cost in the user's unit) of one profiled run at each rank count."""
        fit = self.fitted_
        settings = fit.settings
        ranks = np.asarray(ranks, dtype=float)
        seconds = np.full_like(ranks, float(settings.run_seconds))
        points = pd.DataFrame({fit.cost.ranks_param: ranks, **{k: v for k, v in fit.fixed.items()}})
        params = [fit.cost.ranks_param, *fit.fixed]
        gpu_hours = seconds / 3600.0 * ranks * fit.cost.gpus_per_rank
        return gpu_hours, np.asarray(cost_of(seconds, points, fit.cost, params), float)

    def nodes(self, ranks) -> np.ndarray:
        """Nodes a run at each rank count takes (NaN: node size unknown)."""
        fit = self.fitted_
        if not fit.gpus_per_node:
            return np.full(np.shape(ranks), np.nan)
        return np.ceil(np.asarray(ranks, float) * fit.cost.gpus_per_rank / fit.gpus_per_node)

    def _initial(self) -> list[dict]:
        """From nothing (or too few points): the largest affordable linear set, completed."""
        fit = self.fitted_
        settings = fit.settings
        measured = set() if fit.measurements is None else set(fit.measurements[RANKS].astype(int))
        budget = None if settings.budget_gpu_hours is None else settings.budget_gpu_hours * settings.initial_share
        for reps in range(settings.reps, 0, -1):
            for top in sorted(fit.candidates, reverse=True):
                points = self._spread(top)
                if points is None:
                    continue
                new = [p for p in points if p not in measured]
                hours = float(self.run_cost(new)[0].sum() * reps) if new else 0.0
                if budget is None or hours <= budget:
                    if reps < settings.reps:
                        fit.notes.append(
                            f"the budget pays for {reps} repetition(s) per configuration only, "
                            "so the noise cannot be measured well"
                        )
                    return self._initial_rows(points, new, reps)
        cheapest = (
            self._spread(min(t for t in fit.candidates if self._spread(t) is not None))
            if any(self._spread(t) is not None for t in fit.candidates)
            else None
        )
        if cheapest is None:
            raise InputError(
                "--max-ranks",
                f"{settings.max_ranks} allows fewer than {settings.min_points} configurations "
                f"(candidates: {', '.join(map(str, fit.candidates))})",
            )
        need = float(self.run_cost(cheapest)[0].sum())
        raise InputError(
            "--budget",
            f"{settings.budget_gpu_hours:g} GPU-hours cannot pay for {settings.min_points} "
            f"configurations: the cheapest set ({', '.join(map(str, cheapest))}, "
            f"one run each) needs {need / settings.initial_share:.3g} GPU-hours "
            f"({settings.initial_share:.0%} of the budget goes to the initial set)",
        )

    def _spread(self, top: int) -> list[int] | None:
        """`min_points` candidates spread linearly up to `top`, with two on each side of a crossed node boundary."""
        fit = self.fitted_
        settings = fit.settings
        below = [c for c in fit.candidates if c <= top]
        if len(below) < settings.min_points:
            return None
        chosen: list[int] = []
        for k in range(1, settings.min_points + 1):
            want = top * k / settings.min_points
            free = [c for c in below if c not in chosen]
            chosen.append(min(free, key=lambda c: (abs(c - want), c)))
        rpn = fit.ranks_per_node
        if fit.crosses_boundary() and top > rpn:
            for side in (lambda c: c <= rpn, lambda c: c > rpn):
                while sum(map(side, chosen)) < 2:
                    free = [c for c in below if side(c) and c not in chosen]
                    if not free:
                        return None
                    # nearest to the boundary: the regime change is best seen next to it
                    chosen.append(min(free, key=lambda c: abs(c - rpn)))
        return sorted(chosen)

    def _initial_rows(self, points: list[int], new: list[int], reps: int) -> list[dict]:
        fit = self.fitted_
        rpn = fit.ranks_per_node
        if fit.crosses_boundary() and max(points) <= rpn:
            fit.notes.append(
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
        fit = self.fitted_
        settings = fit.settings
        m = fit.modeled()
        data = PointData.from_values(m[RANKS], m[VALUE])
        every = fit.measurements
        next_rep = {int(x): int(every.loc[every[RANKS] == x, REP].max()) + 1 for x in every[RANKS].unique()}
        model, rows = fit.model, []
        width = fit.width(model)
        spent = 0.0
        for _ in range(k):
            options, scored = self._options(data), []
            if not options:
                break
            for x, n, action, reason in options:
                hours, cost = (v[0] * n for v in self.run_cost([x]))
                if settings.budget_gpu_hours is not None and spent + hours > settings.budget_gpu_hours + 1e-12:
                    continue
                new_model, new_data = updated_model(model, data, float(x), n)
                new_width = fit.width(new_model)
                gain = (width - new_width) / cost if cost > 0 else -np.inf
                scored.append((gain, x, n, action, (new_model, new_data, new_width, hours, cost), reason))
            if not scored:
                fit.notes.append("the budget is spent: no further run fits")
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
        fit = self.fitted_
        settings = fit.settings

        def worth(s):
            return width - s[4][2] >= settings.min_shrink / 100.0 * width

        def per_cost(runs):
            return max(runs, key=lambda s: s[0])

        best = per_cost(scored)
        new = [s for s in scored if s[3] == NEW]
        if worth(best) or not new:
            return best if worth(best) else per_cost([s for s in scored if worth(s)] or scored)
        why = f"no run shrinks the interval by {settings.min_shrink:g}% or more: a new configuration tests the model"
        rpn = fit.ranks_per_node
        measured = set(fit.measurements[RANKS].astype(int)) | {int(x) for x in data.x}
        if fit.crosses_boundary() and sum(x > rpn for x in measured) < settings.min_points:
            beyond = [s for s in new if s[1] > rpn]
            if beyond:
                new, why = beyond, why + f" beyond the node boundary ({rpn} ranks), where the targets are"
        return (*per_cost(new)[:5], why)

    def _options(self, data: PointData) -> list[tuple[int, int, str, str]]:
        """Candidate runs: (ranks, repetitions, action, reason); with a node rule to meet, only those."""
        fit = self.fitted_
        settings = fit.settings
        measured = {int(x) for x in data.x} | set(fit.measurements[RANKS].astype(int))
        rpn = fit.ranks_per_node
        if fit.crosses_boundary() and max(fit.candidates) > rpn:
            for name, side in (("below", lambda c: c <= rpn), ("beyond", lambda c: c > rpn)):
                if sum(map(side, measured)) < 2:
                    reason = (
                        f"node boundary at {rpn} ranks: the predictions cross it, so two configurations "
                        f"{name} it are needed"
                    )
                    forced = [(c, settings.reps, NEW, reason) for c in fit.candidates if side(c) and c not in measured]
                    if forced:
                        return forced
        # one repetition: the noise is known from the repeated points, and a second stays an option
        new = [(c, 1, NEW, "") for c in fit.candidates if c not in measured]
        return new + [(int(x), 1, REPEAT, "") for x in data.x]


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
