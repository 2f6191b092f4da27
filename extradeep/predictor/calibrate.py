"""The cost of a gradient collective as a function of its size, calibrated on the run's own collectives.

In order of preference:
1. the gradient collectives' pure times against their bytes, where sizes vary (alpha-beta by
   non-negative least squares, as `collectives.fit_alpha_beta`);
2. all sized collectives of the run together, each with the ring model's latency steps and volume
   factor of its kind at the run's ranks (`collectives.model_time`), so a broadcast and an
   all-gather of other sizes pin down the latency that equal buckets cannot;
3. the default per-step latency (`whatif.DEFAULT_STEP_LATENCY`) times the ring model's steps, and
   the rest of the measured time as volume.
Where sizes are unknown altogether, a unit's "bytes" are seconds of volume time (beta = 1).
The relative spread of the measured pure times around the model gives the interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from extradeep.columns import BYTES, NAME, PURE
from extradeep.predictor.buckets import CollectiveCost
from extradeep.predictor.collectives import collective_kind, model_time
from extradeep.predictor.gradients import GradientSync
from extradeep.predictor.whatif import DEFAULT_STEP_LATENCY

MIN_REL_SD = 0.01  # the interval never claims the collective model better than 1 %
VARIED = 0.1  # sizes vary when their range exceeds this share of their mean


def calibrate(sync: GradientSync, table: pd.DataFrame, ranks: int) -> tuple[CollectiveCost, np.ndarray]:
    """(cost, unit sizes) for the bucket search. `table`: `collectives.collective_table` rows of the
    run (name, bytes, pure); `ranks`: ranks of the traced run."""
    kind = sync.kind
    steps = model_time(kind, ranks, 1.0, 0.0)
    vol = model_time(kind, ranks, 0.0, 1.0) or 1.0
    grad = table[table[NAME] == sync.name]
    if not sync.sized:
        alpha = min(DEFAULT_STEP_LATENCY * steps, float(np.min(sync.coll_pure)))
        volume = np.maximum(sync.coll_pure - alpha, 0.0)
        cost = CollectiveCost(alpha, 1.0, _spread(grad, alpha, 0.0, volume_from=True), "default latency, sizes unknown")
        return cost, sync.unit_bytes(volume)
    sized = grad[grad[BYTES] > 0]
    b, t = sized[BYTES].to_numpy(float), sized[PURE].to_numpy(float)
    fits = []
    pooled = _pooled(table, ranks)
    if pooled is not None:  # small collectives of other kinds pin down the latency
        alpha, bpb = pooled[0] * steps, pooled[1] * vol
        fits.append(CollectiveCost(alpha, bpb, _spread(sized, alpha, bpb), "ring model fitted on all collectives"))
    if len(b) >= 3 and np.ptp(b) > VARIED * np.mean(b):
        w = 1.0 / t
        coef, _ = nnls(np.column_stack([np.ones_like(b), b]) * w[:, None], t * w)
        if coef[1] > 0:
            fits.append(CollectiveCost(float(coef[0]), float(coef[1]), _spread(sized, *coef), "fit on its sizes"))
    if fits:
        # the pooled model unless the gradient collectives' own line is clearly closer to them
        best = min(fits, key=lambda f: f.rel_sd * (0.8 if f is fits[0] and pooled is not None else 1.0))
        return best, sync.unit_bytes()
    alpha = min(DEFAULT_STEP_LATENCY * steps, float(np.min(t)) if len(t) else 0.0)
    beta = float(np.median((t - alpha) / b)) if len(b) else 0.0
    return CollectiveCost(alpha, max(beta, 0.0), _spread(sized, alpha, beta), "default latency"), sync.unit_bytes()


def _pooled(table: pd.DataFrame, ranks: int) -> tuple[float, float] | None:
    """Per-step latency and inverse bandwidth shared by all sized collectives of the run."""
    sized = table[(table[BYTES] > 0) & (table[PURE] > 0)]
    if sized.empty:
        return None
    kinds = [collective_kind(str(n)) for n in sized[NAME]]
    lat = np.array([model_time(k, ranks, 1.0, 0.0) for k in kinds])
    vol = np.array([model_time(k, ranks, 0.0, 1.0) for k in kinds]) * sized[BYTES].to_numpy(float)
    if len({(round(x, 6), round(y, 0)) for x, y in zip(lat, vol)}) < 2:
        return None
    # each collective weighs by its own size: relative errors, so small ones count as much as large
    w = 1.0 / sized[PURE].to_numpy(float)
    coef, _ = nnls(np.column_stack([lat, vol]) * w[:, None], sized[PURE].to_numpy(float) * w)
    if coef[1] <= 0:
        return None
    return float(coef[0]), float(coef[1])


def _spread(frame: pd.DataFrame, alpha: float, beta: float, volume_from: bool = False) -> float:
    """Relative standard deviation of the measured pure times around the model."""
    t = frame[PURE].to_numpy(float)
    if len(t) < 2:
        return MIN_REL_SD
    model = np.full(len(t), np.median(t)) if volume_from else alpha + beta * frame[BYTES].to_numpy(float)
    rel = (t - model) / np.maximum(model, 1e-12)
    return max(float(np.std(rel)), MIN_REL_SD)
