"""`extradeep budget` as one call: which configurations meet a deadline and/or a budget, and the best
by efficiency, cost and time (paper Q5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from extradeep.errors import InputError
from extradeep.workflows.options import AnalysisOptions, field_error, named
from extradeep.workflows.reading import read_analysis

__all__ = ["BudgetOptions", "BudgetStudyResult", "budget_study"]


@dataclass(frozen=True)
class BudgetOptions(AnalysisOptions):
    """The analysis options and the limits, for `epochs` epochs: `max_time` (seconds, or "90min",
    "10h", "2d") and/or `max_cost` (in the cost unit). Candidates vary the ranks parameter:
    `candidates` ("8,16,32", "8:256:8" or a list), else multiples of the smallest measured value up
    to `max_ranks` (default 8x the largest measured). Derived: `limits` (a BudgetLimits, or None
    where no limit is given and none is needed)."""

    limits_required: ClassVar[bool] = True

    max_time: object = None
    max_cost: float | None = None
    epochs: float = 1.0
    candidates: object = None
    max_ranks: float | None = None
    limits: object = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "limits", self._limits())

    def _limits(self):
        from extradeep.analysis.budget import BudgetLimits
        from extradeep.analysis.points import parse_duration

        if self.max_time is None and self.max_cost is None:
            if self.limits_required:
                raise InputError(None, "give --max-time and/or --max-cost")
            return None
        max_time = self.max_time
        if isinstance(max_time, str):
            with named("max_time"):
                max_time = parse_duration(max_time)
        return BudgetLimits(max_time=max_time, max_cost=self.max_cost, epochs=self.epochs)

    def budget(self, analysis):
        """The BudgetResult of the limits (None without limits) over the candidates, for `analysis`."""
        from extradeep.analysis.workflows import plan_budget
        from extradeep.workflows.options import rank_values

        if self.limits is None:
            return None
        return plan_budget(
            analysis,
            self.limits,
            candidates=rank_values(self.candidates, "candidates"),
            max_ranks=self.max_ranks,
            fixed=self.fixed(analysis),
            cost=self.cost,
            level=self.level,
        )


@dataclass
class BudgetStudyResult:
    """The analysis the search used, its BudgetResult (`budget`: candidates, valid intervals, best
    configurations, or the failing limit; None without limits) and the experiment read (None for
    an Extra-P text file)."""

    options: BudgetOptions
    analysis: object
    budget: object
    experiment: object = None


def budget_study(options: BudgetOptions, *, progress=None, on_read=None) -> BudgetStudyResult:
    """Read and model as `options` say and search the candidates for the limits. `progress` and
    `on_read` as for :func:`extradeep.workflows.model_study`."""
    if not isinstance(options, BudgetOptions):
        raise field_error("options", "must be a BudgetOptions")
    analysis, experiment = read_analysis(options, on_read, progress)
    return BudgetStudyResult(options, analysis, options.budget(analysis), experiment)
