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

The settings, their checks and what `fit` reads (targets, node size, candidates, the models and the
interval at the targets) are :mod:`extradeep.analysis.advisor_fit`'s; this module proposes the runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.analysis.advisor_fit import AdvisorFit
from extradeep.analysis.cost import cost_of
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


class MeasurementAdvisor(AdvisorFit):
    """Proposes the profiling runs (configurations and repetitions) that make the predictions at
    `target` ranks precise for the least cost, within `max_ranks` and a GPU-hour budget.

    Configure in the constructor, ``fit(None | Experiment | DataFrame)``, then ``propose(k)``.
    A DataFrame holds one row per measurement with columns ``ranks``, ``rep``, ``value``.
    Fitted attributes: ``targets_``, ``gpus_per_node_``, ``ranks_per_node_``, ``candidates_``,
    ``measurements_`` (None from nothing), ``model_`` (the per-step PMNF the shrink is estimated
    on), ``primary_`` (the primary time model of an experiment, :class:`~extradeep.analysis.primary.
    PrimaryTime`, else None), ``primary_measured_`` (its measured medians: ranks, value), ``current_``
    (prediction and interval at each target, from ``primary_`` when there is one), ``quantity_``,
    ``app_``, ``fixed_``, ``notes_``. The settings, their checks and `fit` are
    :class:`~extradeep.analysis.advisor_fit.AdvisorFit`'s; this class proposes.
    """

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
