"""A step's wall time split exclusively into the parts of the layout model (they sum to the step).

At every instant of a step one part is charged, the first of these whose GPU work is running on the
rank: `optimizer` kernels, other `compute` kernels (memcpy and memset too), tensor-parallel
collectives (`tp_comm`), point-to-point transfers (`pp_p2p`, then the part of them that was waiting
for the other stage: `pp_bubble`), data-parallel collectives (`dp_sync`), other collectives (the
gradient norm, the tied embedding: waiting for the pipeline to drain, so `pp_bubble` with pipeline
stages, else `dp_sync`); an instant with nothing running is `host_overhead`, or `pp_bubble` before
the step's first compute kernel when there are pipeline stages (the fill). So compute hidden behind
communication counts as compute, communication hidden behind compute counts nowhere, and the
exposed rest is what each part costs the step.
"""

from __future__ import annotations

import numpy as np


def exclusive_split(
    intervals: dict[str, tuple[np.ndarray, np.ndarray]], order: list[str], lo: float, hi: float, idle: str
) -> dict[str, float]:
    """Time of [lo, hi) charged to the first class of `order` active at each instant (intervals per
    class: starts, ends); `idle` gets the instants with no class active. Sums to hi - lo."""
    if hi <= lo:
        return {}
    cuts = [np.array([lo, hi])]
    for s, e in intervals.values():
        cuts += [np.clip(s, lo, hi), np.clip(e, lo, hi)]
    bounds = np.unique(np.concatenate(cuts))
    widths = np.diff(bounds)
    charged = np.full(len(widths), -1, dtype=np.int64)
    for k, name in enumerate(order):
        if name not in intervals:
            continue
        s, e = intervals[name]
        keep = (e > lo) & (s < hi) & (e > s)
        if not keep.any():
            continue
        delta = np.zeros(len(bounds) + 1, dtype=np.int64)
        np.add.at(delta, np.searchsorted(bounds, np.clip(s[keep], lo, hi)), 1)
        np.add.at(delta, np.searchsorted(bounds, np.clip(e[keep], lo, hi)), -1)
        active = np.cumsum(delta)[: len(widths)] > 0
        charged[(charged < 0) & active] = k
    out = {name: float(widths[charged == k].sum()) for k, name in enumerate(order) if (charged == k).any()}
    if (charged < 0).any():
        out[idle] = out.get(idle, 0.0) + float(widths[charged < 0].sum())
    return out
