"""What every model kind offers: the contract between modeling, analysis, reports and the GUI.

PMNF models (:class:`extradeep.modeling.Model`), the per-collective communication sum, the step
composition and epoch models all satisfy :class:`PerformanceModel`, so the analysis, the reports,
the JSON output and the GUI treat them alike and never ask which kind they hold.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class PerformanceModel(Protocol):
    """A fitted model of one quantity over the modeled parameters: predictions with intervals, a
    formula for people, its asymptotic growth, and a lossless JSON-ready form."""

    def predict(self, X):
        """The value at X (a scalar or array for one parameter; rows of an (n, m) array for m)."""

    def interval(self, X, level: float = 0.95):
        """(lo, hi) of the prediction interval of one new measurement at X."""

    def formula(self, names: dict | None = None, digits: int = 4) -> str:
        """The model as a formula, parameters shown by `names`."""

    def growth(self, names: dict | None = None) -> str:
        """The fastest-growing term, like ``O(p^0.5 log p)``."""

    def growth_key(self):
        """A sortable key of the growth: (polynomial degree, log degree) of the fastest term."""

    def to_dict(self) -> dict:
        """A JSON-ready dict that the kind's ``from_dict`` turns back into an equal model."""
