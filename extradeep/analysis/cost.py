"""Training cost (paper Eq. 14): core-hours, GPU-hours, money, or a user formula.

C = T * ranks * cores_per_rank / 3600 core-hours for a runtime T in seconds. Money is core-hours
times a price per core-hour or GPU-hours times a price per GPU-hour; a custom formula (see
:mod:`extradeep.analysis.expression`) replaces both when the billing is different.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.analysis.expression import Expression, parse_expression
from extradeep.columns import COST, GPU_HOURS, GPUS, RANKS
from extradeep.errors import InputError


@dataclass
class CostSettings:
    """How runtime turns into cost: resources per rank, prices, or a custom formula."""

    cores_per_rank: float = 1.0
    gpus_per_rank: float = 1.0
    gpus_per_node: float | None = None
    price_per_core_hour: float | None = None
    price_per_gpu_hour: float | None = None
    formula: str | None = None
    ranks_param: str = "ranks"
    currency: str | None = None  # what a price is in (EUR, USD, credits); only labels the numbers

    def __post_init__(self):
        for name in ("cores_per_rank", "gpus_per_rank", "gpus_per_node", "price_per_core_hour", "price_per_gpu_hour"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise InputError(None, f"must be a positive number, got {value!r}", field=name)
        given = [n for n in ("price_per_core_hour", "price_per_gpu_hour", "formula") if getattr(self, n) is not None]
        if len(given) > 1:
            raise InputError("cost", "give only one of --price-per-core-hour, --price-per-gpu-hour, --cost-formula")

    @property
    def unit(self) -> str:
        """Label of the `cost` column."""
        if self.formula is not None:
            return "cost (formula)"
        if self.price_per_core_hour is not None or self.price_per_gpu_hour is not None:
            return f"cost ({self.currency or 'currency units'})"
        return "core-hours"

    def describe(self) -> str:
        """One sentence for reports saying exactly how cost was computed."""
        base = (
            f"core-hours = T[s] / 3600 x ranks x {self.cores_per_rank:g} cores per rank; "
            f"GPU-hours = T[s] / 3600 x ranks x {self.gpus_per_rank:g} GPUs per rank"
        )
        if self.formula is not None:
            return f"{base}; cost = {self.formula} (user formula, T in seconds)"
        if self.price_per_core_hour is not None:
            return f"{base}; cost = core-hours x {self.price_per_core_hour:g} per core-hour"
        if self.price_per_gpu_hour is not None:
            return f"{base}; cost = GPU-hours x {self.price_per_gpu_hour:g} per GPU-hour"
        return f"{base}; cost = core-hours"


def cost_variables(params: list[str]) -> set[str]:
    """Names a cost formula may use: T (seconds), every parameter, ranks, gpus, nodes."""
    return {"T", "ranks", "gpus", "nodes", *params}


def compile_formula(settings: CostSettings, params: list[str]) -> Expression | None:
    if settings.formula is None:
        return None
    try:  # the user's formula is named as they gave it (--cost-formula, a dialog's field)
        expr = parse_expression(settings.formula, cost_variables(params))
    except InputError as exc:
        raise InputError(None, exc.problem, field="cost_formula") from None
    if "nodes" in expr.variables and settings.gpus_per_node is None:
        raise InputError(None, f"{settings.formula!r} uses nodes; give --gpus-per-node", field="cost_formula")
    return expr


def resources(points: pd.DataFrame, settings: CostSettings) -> dict[str, np.ndarray]:
    """ranks, gpus, cores and nodes for each row of ``points`` (which holds the parameter columns)."""
    if settings.ranks_param not in points.columns:
        raise InputError(
            "cost",
            f"needs the number of ranks but there is no parameter {settings.ranks_param!r} "
            f"(parameters: {', '.join(map(str, points.columns))}); name it with --ranks-param",
        )
    ranks = points[settings.ranks_param].to_numpy(dtype=float)
    gpus = ranks * settings.gpus_per_rank
    nodes = np.ceil(gpus / settings.gpus_per_node) if settings.gpus_per_node else np.full_like(ranks, np.nan)
    return {"ranks": ranks, "gpus": gpus, "cores": ranks * settings.cores_per_rank, "nodes": nodes}


def cost_of(seconds, points: pd.DataFrame, settings: CostSettings, params: list[str]) -> np.ndarray:
    """The cost (in ``settings.unit``) of running ``seconds`` at each point of ``points``."""
    seconds = np.asarray(seconds, dtype=float)
    res = resources(points, settings)
    expr = compile_formula(settings, params)
    if expr is not None:
        env = {p: points[p].to_numpy(dtype=float) for p in params}
        env.update(T=seconds, ranks=res[RANKS], gpus=res[GPUS], nodes=res["nodes"])
        return np.broadcast_to(expr(**env), seconds.shape).astype(float)
    if settings.price_per_gpu_hour is not None:
        return seconds / 3600.0 * res[GPUS] * settings.price_per_gpu_hour
    core_hours = seconds / 3600.0 * res["cores"]
    return core_hours * (settings.price_per_core_hour or 1.0)


def cost_table(frame: pd.DataFrame, settings: CostSettings, params: list[str], time: str = "T") -> pd.DataFrame:
    """Add core_hours, gpu_hours and cost (plus cost_lo/cost_hi when T_lo/T_hi exist) to ``frame``."""
    out = frame.copy()
    res = resources(out, settings)
    seconds = out[time].to_numpy(dtype=float)
    out["core_hours"] = seconds / 3600.0 * res["cores"]
    out[GPU_HOURS] = seconds / 3600.0 * res[GPUS]
    out[COST] = cost_of(seconds, out, settings, params)
    for bound in ("lo", "hi"):
        column = f"{time}_{bound}"
        if column in out.columns:
            out[f"cost_{bound}"] = cost_of(out[column].to_numpy(dtype=float), out, settings, params)
    if "cost_lo" in out.columns and "cost_hi" in out.columns:
        # A formula need not grow with T, so order the bounds after evaluating both.
        lo, hi = out["cost_lo"].to_numpy(), out["cost_hi"].to_numpy()
        out["cost_lo"], out["cost_hi"] = np.minimum(lo, hi), np.maximum(lo, hi)
    out.attrs["cost_unit"] = settings.unit
    return out


def amount_text(value: float, unit: str) -> str:
    """A cost value with its unit label (see CostSettings.unit): ``5 (EUR)``, ``300 core-hours``."""
    return f"{value:.4g} {unit.removeprefix('cost ')}"
