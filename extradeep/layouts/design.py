"""What to profile for the layout model: the small runs (layouts and GPU counts) that pin down its
parts best per GPU-hour.

Each candidate run (every valid layout of the model on 1 to ``max_gpus`` GPUs, several global
batches, the ZeRO stages and recomputations asked for, that fits in memory) would give a measured
step and its parts. Near the current coefficients (a fitted :class:`LayoutModel`'s, else the physical
priors) the log step time and each part's share of the step move linearly with the log
coefficients; those sensitivities are the run's rows of the design matrix, and ``noise`` (the
relative scatter of a measurement) weighs them. The runs are chosen greedily, Bayesian
D-optimally per cost: each time the run whose information most raises log det of the posterior
precision (prior precision 1 / prior_sd^2 per log coefficient, plus the runs already chosen or
measured) per GPU-hour, until the budget or the number of runs is reached. With ``targets`` (layouts
the predictions are for) the criterion is the mean posterior variance of the targets' log step
times instead (V-optimal), so coefficients that do not matter there earn no runs.

A run costs its GPUs x (``run_seconds`` + ``steps`` x its predicted step) in GPU-hours.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import FITS, GAIN, GLOBAL_BATCH, GPU_HOURS, GPUS, PART_STEP, PP, STEP_TIME, TP
from extradeep.errors import InputError
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.parts import NAMES, PRIOR, STEP_PARTS, compose, nominal_features
from extradeep.layouts.space import enumerate_layouts, layout_frame
from extradeep.layouts.workload import TransformerShape, load_transformer

DEFAULT_RUN_SECONDS = 300.0  # start-up, a few profiled steps, the export
STEP_DELTA = 0.01  # relative coefficient step of the finite differences


def sensitivities(frame: pd.DataFrame, model: LayoutModel, parts: bool = True) -> np.ndarray:
    """(n, rows per run, k): d log step / d log coefficient and, with ``parts``, d (part / step) /
    d log coefficient per part, at the model's coefficients (its priors when unfitted)."""
    coef = model.coef_.to_numpy() if hasattr(model, "coef_") else PRIOR.copy()
    hardware = model.hardware_ if hasattr(model, "hardware_") else _hardware(model)
    algorithm = getattr(model, "algorithm_", "hierarchical")  # how the fitted model crosses nodes
    overlap = getattr(model, "grad_overlap_", "none") == "buckets"
    features = nominal_features(layout_frame(frame, source="candidates"), hardware, algorithm, overlap)

    def rows(c):
        out = compose(features, c, model.dp_overlap)
        columns = [np.log(out[PART_STEP])]
        if parts:
            columns += [out[p] / out[PART_STEP] for p in STEP_PARTS]
        return np.stack(columns, axis=1)

    base = rows(coef)
    out = np.empty((*base.shape, len(NAMES)))
    for j in range(len(NAMES)):
        moved = coef.copy()
        moved[j] *= np.exp(STEP_DELTA)
        out[:, :, j] = (rows(moved) - base) / STEP_DELTA
    return out


def _hardware(model: LayoutModel):
    from extradeep.layouts.hardware import load_hardware

    return load_hardware(model.hardware)


def candidate_runs(
    shape,
    max_gpus: int,
    model: LayoutModel,
    global_batches=(8, 16, 32, 64),
    micro_batches=(1, 2, 4),
    zero=(0, 1),
    recompute=("none", "full"),
    schedules=("1f1b",),
    chunks=(2,),
) -> pd.DataFrame:
    """Every valid layout on 1, 2, 4, ... ``max_gpus`` GPUs with each global batch, that fits."""
    shape = load_transformer(shape) if not isinstance(shape, TransformerShape) else shape
    hardware = model.hardware_ if hasattr(model, "hardware_") else _hardware(model)
    counts = [g for g in 2 ** np.arange(0, int(np.log2(max_gpus)) + 1) if g <= max_gpus]
    frames = [
        enumerate_layouts(
            shape, counts, b, hardware.system.gpus_per_node, micro_batches, zero, recompute, schedules, chunks
        )
        for b in global_batches
    ]
    frame = pd.concat([f for f in frames if len(f)], ignore_index=True)
    if frame.empty:
        raise InputError(None, f"no valid layout of this model on up to {max_gpus} GPUs", field="max_gpus")
    return frame


def plan_layout_runs(
    shape,
    max_gpus: int,
    model: LayoutModel | None = None,
    budget_gpu_hours: float | None = None,
    runs: int | None = None,
    targets: pd.DataFrame | None = None,
    measured: pd.DataFrame | None = None,
    run_seconds: float = DEFAULT_RUN_SECONDS,
    steps: int = 10,
    noise: float = 0.03,
    prior_sd: float = 1.0,
    candidates: pd.DataFrame | None = None,
    **space,
) -> pd.DataFrame:
    """The runs to profile, in the order chosen: their layouts, ``gpu_hours`` (each run's cost),
    ``cumulative_gpu_hours``, ``gain`` (the criterion's improvement, nats for D-optimal, relative
    variance shrink for V-optimal) and ``gain_per_gpu_hour``. ``model``: a fitted layout model
    (its coefficients and memory; default: priors on the default hardware). ``measured``: runs
    already profiled (their information counts from the start). ``space``: global_batches,
    micro_batches, zero, recompute, schedules, chunks for :func:`candidate_runs`."""
    if budget_gpu_hours is None and runs is None:
        raise InputError(None, "give a budget in GPU-hours or a number of runs", field="budget_gpu_hours")
    for name, value in (("budget_gpu_hours", budget_gpu_hours), ("runs", runs), ("max_gpus", max_gpus)):
        if value is not None and not value > 0:
            raise InputError(None, f"must be > 0, got {value!r}", field=name)
    model = model if model is not None else LayoutModel(interval=None).fit(None)
    pool = candidate_runs(shape, max_gpus, model, **space) if candidates is None else layout_frame(candidates)
    predicted = model.predict(pool)
    pool = pool[predicted[FITS].to_numpy()].reset_index(drop=True)
    predicted = predicted[predicted[FITS].to_numpy()].reset_index(drop=True)
    if pool.empty:
        raise InputError(None, f"no candidate layout fits in GPU memory on up to {max_gpus} GPUs", field="max_gpus")
    cost = run_cost(pool, predicted, run_seconds, steps)
    info = np.einsum("nrk,nrl->nkl", *(2 * [sensitivities(pool, model)])) / noise**2
    precision = np.eye(len(NAMES)) / prior_sd**2
    if measured is not None and len(measured):
        precision += np.einsum("nrk,nrl->kl", *(2 * [sensitivities(layout_frame(measured), model)])) / noise**2
    target_rows = sensitivities(layout_frame(targets), model, parts=False)[:, 0, :] if targets is not None else None
    if budget_gpu_hours is not None and cost.min() > budget_gpu_hours + 1e-12:
        raise InputError(
            None,
            f"{budget_gpu_hours:g} GPU-hours cannot pay for one run: the cheapest candidate needs "
            f"{cost.min():.3g} GPU-hours",
            field="budget_gpu_hours",
        )
    chosen, spent = [], 0.0
    left = np.ones(len(pool), bool)
    while (runs is None or len(chosen) < runs) and left.any():
        affordable = left & ((spent + cost <= budget_gpu_hours + 1e-12) if budget_gpu_hours is not None else True)
        if not affordable.any():
            break
        gains = _gains(precision, info, affordable, target_rows)
        score = np.where(affordable, gains / cost, -np.inf)
        best = int(np.argmax(score))
        if not gains[best] > 1e-9:
            break
        precision = precision + info[best]
        spent += cost[best]
        left[best] = False
        chosen.append((best, gains[best]))
    rows = pool.iloc[[i for i, _ in chosen]].reset_index(drop=True)
    rows[GPU_HOURS] = cost[[i for i, _ in chosen]]
    rows["cumulative_gpu_hours"] = rows[GPU_HOURS].cumsum()
    rows[GAIN] = [g for _, g in chosen]
    rows["gain_per_gpu_hour"] = rows[GAIN] / rows[GPU_HOURS]
    rows.attrs["criterion"] = "V-optimal at the targets" if targets is not None else "D-optimal"
    rows.attrs["candidates"] = len(pool)
    return rows


def _gains(precision, info, mask, target_rows) -> np.ndarray:
    """Per candidate (where mask): log det gain (D), or the relative drop of the targets' mean
    posterior variance (V)."""
    gains = np.zeros(len(info))
    covariance = np.linalg.inv(precision)
    if target_rows is None:
        base = np.linalg.slogdet(precision)[1]
        for i in np.flatnonzero(mask):
            gains[i] = np.linalg.slogdet(precision + info[i])[1] - base
        return gains
    before = np.einsum("tk,kl,tl->", target_rows, covariance, target_rows)
    for i in np.flatnonzero(mask):
        after = np.linalg.inv(precision + info[i])
        gains[i] = 1 - np.einsum("tk,kl,tl->", target_rows, after, target_rows) / before
    return gains


def run_cost(frame: pd.DataFrame, predicted: pd.DataFrame, run_seconds: float, steps: int) -> np.ndarray:
    """GPU-hours of profiling each run: its GPUs x (start-up and export + the profiled steps)."""
    return frame[GPUS].to_numpy(float) * (run_seconds + steps * predicted[STEP_TIME].to_numpy(float)) / 3600


def naive_runs(
    shape,
    max_gpus: int,
    budget_gpu_hours: float,
    model: LayoutModel | None = None,
    run_seconds: float = DEFAULT_RUN_SECONDS,
    steps: int = 10,
    **space,
) -> pd.DataFrame:
    """The one-parameter habit, for comparison: data-parallel runs (t = p = 1, the largest global
    batch that fits) on 1, 2, 4, ... GPUs, while the budget lasts; costs as in :func:`plan_layout_runs`."""
    model = model if model is not None else LayoutModel(interval=None).fit(None)
    pool = candidate_runs(shape, max_gpus, model, **space)
    pool = pool[(pool[TP] == 1) & (pool[PP] == 1)].reset_index(drop=True)
    predicted = model.predict(pool)
    pool = pool.assign(gpu_hours=run_cost(pool, predicted, run_seconds, steps))[predicted[FITS].to_numpy()]
    pool = pool.sort_values([GPUS, GLOBAL_BATCH]).drop_duplicates(GPUS, keep="last")
    chosen = pool[pool[GPU_HOURS].cumsum() <= budget_gpu_hours + 1e-12]
    return chosen.assign(cumulative_gpu_hours=chosen[GPU_HOURS].cumsum()).reset_index(drop=True)
