"""Gradient buckets: DDP's size rule, and the exact search over contiguous bucket layouts.

A *layout* is the number of gradients in each bucket, in the order the gradients become ready
(DDP builds its buckets over the parameters in reverse order, which is the backward's ready order).
A bucket's collective can start when its last gradient is ready and the communication stream is
free; collectives of one stream run one after another. Under that chain model the earliest end of
the last collective obeys an exact dynamic programme over the position of the last cut:

    E[i] = min over k < i of  max(R[i], E[k]) + t(bytes[k+1..i]),     E[0] = start,

because max(R, e) + t grows with e, so the best prefix is the earliest one (O(n^2) for n
gradients). `best_layout` solves it; `cap_layout` is DDP's own rule, so that a layout found by the
search can be named as the `bucket_cap_mb` that produces it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIB = 1 << 20
DEFAULT_CAP_MB = 25.0  # torch.nn.parallel.DistributedDataParallel's bucket_cap_mb
FIRST_BUCKET_BYTES = MIB  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES: DDP's first bucket is small


@dataclass(frozen=True)
class CollectiveCost:
    """Pure time of one gradient collective: alpha + bytes * beta (s, s/B), with the relative
    spread of the calibration (`rel_sd`) for intervals and where the numbers came from."""

    alpha: float
    beta: float
    rel_sd: float = 0.0
    source: str = "fit"

    def time(self, nbytes) -> np.ndarray:
        return self.alpha + np.asarray(nbytes, dtype=float) * self.beta

    def scaled(self, factor: float) -> CollectiveCost:
        """The same model, every collective `factor` times as long (interval ends)."""
        return CollectiveCost(self.alpha * factor, self.beta * factor, self.rel_sd, self.source)


def cap_layout(sizes, cap_bytes: float, first_bytes: float | None = FIRST_BUCKET_BYTES) -> list[int]:
    """Gradients per bucket as DDP assigns them: a bucket closes as soon as its size reaches the
    limit (the gradient that crosses it stays in); the first bucket's limit is `first_bytes`
    (None: the same cap for every bucket)."""
    layout, count, acc = [], 0, 0.0
    limit = cap_bytes if first_bytes is None else min(first_bytes, cap_bytes)
    for size in np.asarray(sizes, dtype=float):
        acc += size
        count += 1
        if acc >= limit:
            layout.append(count)
            count, acc, limit = 0, 0.0, cap_bytes
    if count:
        layout.append(count)
    return layout


def check_layout(layout, n: int) -> list[int]:
    """A layout as a list of positive counts summing to n (ValueError otherwise)."""
    out = [int(c) for c in layout]
    if any(c < 1 for c in out) or sum(out) != n:
        raise ValueError(f"a bucket layout needs positive counts that sum to the {n} gradients, got {out}")
    return out


def bucket_sums(values, layout) -> np.ndarray:
    """Sum of `values` over each bucket of a layout."""
    cuts = np.cumsum([0, *layout])
    return np.add.reduceat(np.asarray(values, dtype=float), cuts[:-1]) if len(layout) else np.zeros(0)


def chain_ends(ready, nbytes, layout, cost: CollectiveCost, start: float = -np.inf, parts=None) -> np.ndarray:
    """End of each bucket's collective under the chain model (`ready`: when each gradient is ready;
    `parts`: pieces each bucket is sent in, one after another)."""
    ready = np.maximum.accumulate(np.asarray(ready, dtype=float))
    last = np.cumsum(layout) - 1
    parts = np.ones(len(layout)) if parts is None else np.asarray(parts, dtype=float)
    ends = np.empty(len(layout))
    t = start
    for j, (i, b) in enumerate(zip(last, bucket_sums(nbytes, layout))):
        t = max(float(ready[i]), t) + float(cost.time(b / parts[j])) * parts[j]
        ends[j] = t
    return ends


def best_layout(ready, nbytes, cost: CollectiveCost, start: float = -np.inf) -> tuple[list[int], float]:
    """The contiguous layout whose last collective ends earliest (exact, O(n^2)); ties go to fewer
    buckets. Returns (layout, end)."""
    ready = np.maximum.accumulate(np.asarray(ready, dtype=float))  # a bucket waits for all its gradients
    n = len(ready)
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(nbytes, dtype=float))])
    best = np.full(n + 1, np.inf)
    best[0] = start
    count = np.zeros(n + 1, dtype=np.int64)
    cut = np.zeros(n + 1, dtype=np.int64)
    for i in range(1, n + 1):
        k = np.arange(i)
        cand = np.maximum(ready[i - 1], best[k]) + cost.time(prefix[i] - prefix[k])
        # earliest end first, then the fewest buckets (less launch work for the same time)
        order = np.lexsort((count[k], np.round(cand, 12)))
        j = int(order[0])
        best[i], cut[i], count[i] = cand[j], j, count[j] + 1
    layout, i = [], n
    while i > 0:
        layout.append(i - cut[i])
        i = int(cut[i])
    return layout[::-1], float(best[n])


def candidate_caps(sizes) -> np.ndarray:
    """Caps (bytes) at which DDP's rule changes the layout of these gradients: every sum of a run
    of consecutive gradients is a threshold, so these (thinned to at most ~400 on a log grid)
    give every layout `cap_layout` can produce, up to one bucket."""
    sizes = np.asarray(sizes, dtype=float)
    prefix = np.concatenate([[0.0], np.cumsum(sizes)])
    n = len(sizes)
    if n <= 200:
        i, j = np.triu_indices(n + 1, k=1)
        sums = np.unique(prefix[j] - prefix[i])
    else:
        sums = np.unique(np.concatenate([sizes, prefix[1:]]))
    sums = sums[sums > 0]
    if len(sums) > 400:
        grid = np.geomspace(sums.min(), sums.max(), 400)
        sums = np.unique(sums[np.clip(np.searchsorted(sums, grid), 0, len(sums) - 1)])
    return sums


def cap_interval(sizes, layout, first_bytes: float | None = FIRST_BUCKET_BYTES) -> tuple[float, float] | None:
    """(lo, hi]: the caps (bytes) for which DDP's rule gives exactly `layout`, or None when no cap
    does. A closed bucket of sum s whose last gradient has size l needs its limit in (s - l, s];
    the last bucket must not close early (limit > s - l); the first bucket's limit is
    min(first_bytes, cap)."""
    sizes = np.asarray(sizes, dtype=float)
    layout = check_layout(layout, len(sizes))
    cuts = np.cumsum([0, *layout])
    lo, hi = 0.0, np.inf
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        s, last = float(sizes[a:b].sum()), float(sizes[b - 1])
        closed = b < len(sizes)
        low, high = s - last, (s if closed else np.inf)
        if k == 0 and first_bytes is not None:
            if low < first_bytes <= high:  # any cap from first_bytes up, or one in (low, first_bytes)
                high = np.inf
            else:  # only a cap below first_bytes can close the first bucket here
                high = min(high, first_bytes - 1.0)
        lo, hi = max(lo, low), min(hi, high)
        if lo >= hi:
            return None
    return (lo, hi) if lo < hi else None


def nice_cap_mb(lo: float, hi: float) -> float:
    """A round `bucket_cap_mb` inside (lo, hi] bytes: the largest value with the fewest significant
    digits that fits."""
    lo_mb, hi_mb = lo / MIB, hi / MIB
    if not np.isfinite(hi_mb):  # any cap above lo: a round one not far above it
        hi_mb = max(2.0 * lo_mb, lo_mb + 1.0)
    for digits in range(0, 7):
        for base in (1.0, 0.5, 0.25):
            q = base * 10.0 ** (-digits)
            mb = np.floor(hi_mb / q + 1e-9) * q
            if lo_mb < mb <= hi_mb + 1e-12:
                return float(round(mb, digits + 2))
    return float(hi_mb)
