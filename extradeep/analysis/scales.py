"""Which points predictions may be asked for: rank counts are positive whole numbers, and no point
lies beyond the range the models support.

A model of a few small runs says nothing sensible about a trillion ranks: there an epoch of a
fixed data set has no training step left (n_t = floor(D_t / (G B)) = 0, so "0 s" and a NaN speedup),
and long before that the extrapolation has lost all meaning. Points are refused, in one line naming
the option, beyond the smaller of

* MAX_FACTOR x the largest measured value of the ranks parameter, and
* with dataset sizes, the last value at which an epoch still has one full training step.

The GUI's x axis ends at the same place (``gui/param_panel.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.errors import InputError

MAX_FACTOR = 64  # predictions end at this multiple of the largest measured value of the ranks parameter


def rank_like(analysis) -> list[str]:
    """The parameters that count processes or GPUs: the ranks parameter and the dataset's data- and
    model-parallel degrees where they name a parameter. Their values are positive whole numbers."""
    names = {analysis.ranks_param}
    dataset = analysis.dataset
    if dataset is not None:
        names |= {spec for spec in (dataset.gpus_param, dataset.model_parallel) if isinstance(spec, str)}
    return [p for p in analysis.params if p in names]


def last_with_a_step(
    dataset, params: list[str], along: str, fixed: dict, lo: float, hi: float, integral: bool
) -> float:
    """Largest value of ``along`` in [lo, hi] at which ``dataset`` gives at least one training step per
    epoch (n_t >= 1, paper Eq. 2), the other parameters at ``fixed``: n_t does not grow with the
    ranks, so a bisection finds it (``lo`` when even lo has none)."""

    def has_a_step(x: float) -> bool:
        point = pd.DataFrame([{**{p: float(fixed.get(p, 0.0)) for p in params}, along: float(x)}])[params]
        return bool(dataset.steps_per_epoch(point, fixed)[0][0] >= 1)

    if has_a_step(hi) or not has_a_step(lo):
        return hi if has_a_step(hi) else lo
    for _ in range(200):
        mid = np.floor((lo + hi) / 2) if integral else (lo + hi) / 2
        if hi - lo <= (1 if integral else 1e-6 * hi):
            break
        lo, hi = (mid, hi) if has_a_step(mid) else (lo, mid)
    return lo


def supported_limit(analysis, fixed: dict) -> tuple[float, str]:
    """(largest supported value of the ranks parameter at the other parameters ``fixed``, why there)."""
    point = {**analysis.baseline, **{k: v for k, v in fixed.items() if k in analysis.params}}
    dataset = analysis.dataset if analysis.per == "epoch" else None
    largest = float(analysis.points[analysis.ranks_param].max())
    return range_limit(largest, analysis.ranks_param, analysis.params, dataset, {**analysis.fixed, **point})


def range_limit(largest: float, ranks: str, params: list[str], dataset, fixed: dict) -> tuple[float, str]:
    """(largest supported value of ``ranks``, why there): MAX_FACTOR x ``largest`` (the largest
    measured), or earlier where an epoch of ``dataset`` (None: values per step) has no training step."""
    limit = MAX_FACTOR * largest
    why = f"{MAX_FACTOR}x the largest measured {ranks}, {largest:g}"
    if dataset is not None:
        last = last_with_a_step(dataset, params, ranks, fixed, largest, limit, True)
        if last < limit:
            limit = last
            why = (
                f"the last with a full training step per epoch: {dataset.train_samples:,.0f} training samples, "
                f"batch {dataset.batch_per_rank} per rank"
            )
    return limit, why


def check_whole(analysis, grid: pd.DataFrame, field: str) -> None:
    """Refuse, in one line naming ``field``, a rank-like value that is not a positive whole number."""
    for name in rank_like(analysis):
        if name not in grid:
            continue
        values = grid[name].to_numpy(float)
        bad = values[(values <= 0) | (values % 1 != 0) | ~np.isfinite(values)]
        if len(bad):
            raise InputError(
                None, field=field, problem=f"{bad[0]:g} is not a whole number of {name}: {name} counts processes"
            )


def supported_points(analysis, grid: pd.DataFrame, field: str, strict: bool = True) -> tuple[pd.DataFrame, list[str]]:
    """(the grid's points, notes): rank-like values checked (:func:`check_whole`); points beyond the
    supported range refused in one line naming ``field`` (``strict``: the user asked for them) or
    left out with a note (a default grid)."""
    check_whole(analysis, grid, field)
    ranks = analysis.ranks_param
    others = [p for p in analysis.params if p != ranks]
    keep, notes = np.ones(len(grid), bool), []
    for key in grid[others].drop_duplicates().itertuples(index=False) if others else [()]:
        fixed = dict(zip(others, key))
        rows = np.ones(len(grid), bool)
        for name, value in fixed.items():
            rows &= grid[name].to_numpy(float) == float(value)
        limit, why = supported_limit(analysis, fixed)
        beyond = rows & (grid[ranks].to_numpy(float) > limit)
        if not beyond.any():
            continue
        values = _listed(grid.loc[beyond, ranks].to_numpy(float))
        if strict:
            raise InputError(
                None,
                field=field,
                problem=f"{ranks} = {values} is beyond what the models support: at most {limit:g} ({why})",
            )
        keep &= ~beyond
        notes.append(f"no predictions at {ranks} = {values}: beyond what the models support, at most {limit:g} ({why})")
    return grid[keep].reset_index(drop=True), notes


def _listed(values: np.ndarray) -> str:
    """Values as "64, 128", or for many as "782 .. 4000 (1610 values)"."""
    if len(values) <= 4:
        return ", ".join(f"{v:g}" for v in values)
    return f"{values.min():g} .. {values.max():g} ({len(values)} values)"
