"""Communication per step as the sum of each collective's pure duration plus the wait for the slowest rank.

A collective kernel on one rank lasts from that rank's arrival until every rank has arrived and the
transfer is done, so its measured time is the pure transfer time plus a wait for the slowest rank.
The rank that arrives last waits for nobody: the minimum over ranks (``rank_min`` of the
aggregated data) is the pure duration. Pure durations follow each collective's own law (an
all-reduce grows like p log p, an all-gather like p), while the waits are noise of the compute
before the collective. One PMNF of their category sum mixes both and extrapolates low (waits that
do not grow dilute the growth the modeler sees); so the communication of the step composition is

    C = sum over collectives k of PMNF_k(pure duration of k) + W,

with W the median measured wait per step (C - sum of pure durations), kept constant: it comes from
compute jitter, which does not grow with the collectives' size. docs/analysis.md, "Time per step as
a composition", has the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

PURE = "pure:"  # prefix of the per-collective parts in the batched fit of the step composition


@dataclass
class CommunicationSum:
    """Communication time per step: per-collective PMNF models of the pure duration plus a constant
    wait for the slowest rank. Same interface as :class:`extradeep.modeling.Model` for the parts
    the step composition uses (predict, interval, points, formula, growth, serialisation)."""

    kernels: dict   # region -> Model of its pure (rank-minimum) time per step
    wait: float     # median wait for the slowest rank per step (s)

    @property
    def points(self) -> np.ndarray:
        return next(iter(self.kernels.values())).points

    def predict(self, X):
        value = sum(as_vector(m.predict(X)) for m in self.kernels.values()) + self.wait
        return float(value[0]) if np.ndim(X) == 0 else value

    def interval(self, X, level: float = 0.95):
        # Each collective's band added up (their errors share the parameter, so they add, not cancel).
        bands = [tuple(as_vector(v) for v in m.interval(X, level=level)) for m in self.kernels.values()]
        lo = sum(b[0] for b in bands) + self.wait
        hi = sum(b[1] for b in bands) + self.wait
        return (float(lo[0]), float(hi[0])) if np.ndim(X) == 0 else (lo, hi)

    def formula(self, names: dict | None = None, digits: int = 4) -> str:
        parts = [f"[{m.formula(names, digits)}]" for m in self.kernels.values()]
        return " + ".join(parts + [f"{self.wait:.{digits}g}"])

    def _lead(self):
        return max(self.kernels.values(), key=lambda m: m.growth_key())

    def growth(self, names: dict | None = None) -> str:
        return self._lead().growth(names)

    def growth_key(self):
        return self._lead().growth_key()

    def __str__(self) -> str:
        return self.formula()

    def to_dict(self) -> dict:
        return {"type": "communication sum", "wait": float(self.wait),
                "kernels": {name: m.to_dict() for name, m in self.kernels.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> CommunicationSum:
        from extradeep.modeling import Model

        return cls({name: Model.from_dict(m) for name, m in data["kernels"].items()}, float(data["wait"]))


def load_comm_model(data: dict):
    """A saved communication model: a :class:`CommunicationSum` or a plain PMNF model."""
    from extradeep.modeling import Model

    return CommunicationSum.from_dict(data) if data.get("type") == "communication sum" else Model.from_dict(data)


def as_vector(value) -> np.ndarray:
    """A model value (scalar or array) as a flat float array."""
    return np.asarray(value, dtype=float).reshape(-1)


def pure_times(values: pd.DataFrame, params: list[str], phase: str = "train") -> pd.DataFrame:
    """Per communication region and point of ``phase``: the pure duration per step, the minimum
    over ranks and repetitions (one row per point, rep 1). Waits only ever add to a collective's
    time, so the lowest observation is the least contaminated one (a rank's per-step median still
    holds waits from steps in which it was not the last to arrive). Empty when the data keep no
    per-rank spread."""
    columns = ["region", *params, "rep", "pure"]
    if values is None or "rank_min" not in values.columns:
        return pd.DataFrame(columns=columns)
    rows = values[(values["category"] == "communication") & (values["metric"] == "time")
                  & (values["phase"] == phase)].dropna(subset=["rank_min"])
    lowest = rows.groupby(["region", *params], as_index=False)["rank_min"].min()
    return lowest.rename(columns={"rank_min": "pure"}).assign(rep=1)[columns]


def pure_long(pure: pd.DataFrame, parts: pd.DataFrame, params: list[str]) -> pd.DataFrame:
    """The pure durations as rows (part "pure:<region>") to fit beside S, B and C. Empty when a
    collective is missing at a measured point (its sum would silently drop it there)."""
    empty = pd.DataFrame(columns=[*params, "rep", "part", "value"])
    if pure.empty:
        return empty
    measured = parts[params].drop_duplicates().shape[0]
    if (pure.groupby("region")[params].nunique().min(axis=1) < measured).any():
        return empty
    return pure.assign(part=PURE + pure["region"], value=pure["pure"])[[*params, "rep", "part", "value"]]


def communication_sum(models: dict, parts: pd.DataFrame, pure: pd.DataFrame, params: list[str]):
    """A :class:`CommunicationSum` from the fitted ``pure:`` parts of ``models``, the wait taken
    from the points those parts were fitted on; None without pure parts or when one has no model."""
    kernels = {k[len(PURE):]: m for k, m in models.items() if k.startswith(PURE)}
    if not kernels or any(m is None for m in kernels.values()):
        return None
    used = pure[pure[params[0]].isin(np.asarray(next(iter(kernels.values())).points, float).reshape(-1))]
    total = used.groupby([*params, "rep"])["pure"].sum()
    comm = parts.set_index([*params, "rep"])["C"]
    wait = (comm - total).dropna().groupby(level=params).median()
    return CommunicationSum(kernels, float(max(np.median(wait), 0.0)) if len(wait) else 0.0)
