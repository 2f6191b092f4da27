"""The layout model's interval: held-out errors, and how wide they make the interval at a layout.

The model is refitted without each workload (or each of five folds when there are fewer than
three workloads; a held-out layout's measured parts leave with its step); the half width at a layout
is a Student prediction bound on the held-out |log errors| of layouts at a similar GPU count (beyond
the largest held-out one: of those nearest it), their spread pooled with a prior spread
(:data:`ERROR_PRIOR_SCALE`, worth :data:`ERROR_PRIOR_COUNT` errors) so that four or five held-out
errors neither make it vanish nor blow it up, and never below their ``level`` quantile once there
are enough of them to have one; it is widened by sqrt(1 + d / 4) for d doublings of GPU count or
model size beyond what was observed and, on other hardware, by the spread a transfer adds. Sizing
the interval is its own stage after calibration; :class:`extradeep.layouts.model.LayoutModel`
calls these functions from ``fit`` and ``predict``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from extradeep.columns import (
    CHUNKS,
    DP,
    GPUS,
    HIDDEN,
    LAYERS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PP,
    RECOMPUTE,
    SCHEDULE,
    SEQ_LEN,
    STEP_TIME,
    TP,
    VOCAB,
    WORKLOAD,
    ZERO,
)
from extradeep.layouts.workload import layer_parameters

TRANSFER_SPREAD = np.log(1.15)  # another GPU type: per-kernel-class rooflines add about 15% (Lin et al.)
UNCALIBRATED_SPREAD = np.log(1.5)  # half width without held-out errors to size it (physics alone)
# The prior of the held-out errors' spread: a 1-sigma log error of 4%, worth four held-out errors.
# A study profiles four to six layouts, so its own errors are four to six numbers, one of which may
# be the fold that lost the only run of its kind (16% on random draw 2, where the other three were
# under 1%). Alone, they made its half width 0.6-1.0 in log on some studies (the median over 35
# simulated ones 0.27, where the errors' median is 0.034) and 0.05 on another, which held 5 of 14
# truths. The prior is the typical error of the composed model on unprofiled layouts of simulated
# studies (docs/performance.md, "Intervals sized by pooled errors").
ERROR_PRIOR_SCALE = np.log(1.04)
ERROR_PRIOR_COUNT = 4
# the share of the held-out variance each doubling beyond the observed scale adds: the simulated
# studies' errors do not grow from 64 to 512 GPUs; a quarter keeps a margin for what they miss
DOUBLING_VARIANCE = 0.25

LAYOUT_KEY = (WORKLOAD, GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, ZERO, RECOMPUTE, SCHEDULE, CHUNKS)


def model_parameters(frame: pd.DataFrame) -> np.ndarray:
    """Parameters of each row's model: its layers and the word and position embeddings."""
    hidden = frame[HIDDEN].to_numpy(float)
    ffn = frame["ffn_hidden"].to_numpy(float) if "ffn_hidden" in frame else None
    layers = frame[LAYERS].to_numpy(float) * layer_parameters(hidden, ffn)
    return layers + (frame[VOCAB].to_numpy(float) + frame[SEQ_LEN].to_numpy(float)) * hidden


def layout_keys(frame: pd.DataFrame) -> np.ndarray:
    """One string per row naming its layout (and workload), to match step totals with their parts."""
    if not len(frame):
        return np.array([], dtype=object)
    columns = [c for c in LAYOUT_KEY if c in frame]
    return frame[columns].astype(str).agg("|".join, axis=1).to_numpy(object)


def folds(steps: pd.DataFrame, k: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """(label, held-out mask) per workload when there are three or more, else k random folds of
    layouts: repeated runs of one layout are held out together, or the fold would be judged on a
    layout its own calibration measured."""
    if WORKLOAD in steps and steps[WORKLOAD].nunique() >= 3:
        return [(str(w), (steps[WORKLOAD] == w).to_numpy()) for w in steps[WORKLOAD].unique()]
    configuration = steps.drop(columns=STEP_TIME, errors="ignore").astype(str).agg("|".join, axis=1)
    layout, distinct = pd.factorize(configuration)  # in order of appearance: without repeats, row folds
    count = min(k, len(distinct))
    order = np.random.default_rng(seed).permutation(len(distinct))
    fold = np.empty(len(distinct), int)
    fold[order] = np.arange(len(distinct)) % count
    return [(f"fold {i + 1}", fold[layout] == i) for i in range(count)]


def weighted_quantile(errors: pd.DataFrame, level: float) -> float:
    """The ``level`` quantile of |log error| with every workload (or fold) weighing the same."""
    size = errors[WORKLOAD].map(errors[WORKLOAD].value_counts()).to_numpy(float)
    values = np.abs(errors["log_error"].to_numpy(float))
    order = np.argsort(values)
    cumulative = np.cumsum(1.0 / size[order])
    cumulative /= cumulative[-1]
    return float(values[order][np.searchsorted(cumulative, level)])


def held_out_errors(steps: pd.DataFrame, part_rows: pd.DataFrame, splits, refit, predict_step):
    """(coefficients refitted without each fold, the held-out log errors per fold) over `splits`,
    the (label, held-out mask) pairs of `folds`: `refit(steps, parts)` calibrates on the rest,
    `predict_step(held steps, coefficients)` predicts the held-out steps. The held-out layouts'
    parts leave with their steps: nothing of them calibrates the fold."""
    coefs, errors = [], []
    step_keys, part_keys = layout_keys(steps), layout_keys(part_rows)
    for label, held in splits:
        rest = steps[~held]
        if not len(rest):
            continue
        kept_parts = part_rows[~np.isin(part_keys, step_keys[held])] if len(part_rows) else part_rows
        coef = refit(rest, kept_parts)
        coefs.append(coef)
        guess = predict_step(steps[held], coef)
        held_rows = steps[held]
        errors.append(
            pd.DataFrame({WORKLOAD: label, GPUS: held_rows[GPUS], "log_error": np.log(guess / held_rows[STEP_TIME])})
        )
    return coefs, errors


def half_widths(errors: pd.DataFrame, gpus, level: float) -> np.ndarray:
    """Per layout, the half width that the held-out |log errors| of layouts at a similar scale
    give: each held-out row weighs exp(-(log2 N - log2 N_row)^2 / 2) within its workload's equal
    share, so a 512-GPU prediction is judged by the errors at hundreds of GPUs, not by those of
    single-node runs. The width is :func:`pooled_bound`, and at least the errors' ``level``
    quantile once there are enough of them (1 / (1 - level): 20 at 95%) for it to be more than
    their largest."""
    gpus = np.asarray(gpus, float)
    if not len(errors):  # nothing held out: physics alone, about as far off as DFModel (25%)
        return np.full(len(gpus), UNCALIBRATED_SPREAD)
    size = errors[WORKLOAD].map(errors[WORKLOAD].value_counts()).to_numpy(float)
    values = np.abs(errors["log_error"].to_numpy(float))
    order = np.argsort(values)
    held = np.log2(errors[GPUS].to_numpy(float))
    enough = len(values) >= 1 / (1 - level)
    out = np.empty(len(gpus))
    for n in np.unique(gpus):
        # beyond the largest held-out scale, the errors nearest it judge (doublings_beyond widens
        # further): distance from a far target would weigh the largest scale's few errors alone
        # (their weight ratio to the next grows as exp of the target's distance)
        near = np.exp(-0.5 * (min(np.log2(n), held.max()) - held) ** 2) / size
        width = pooled_bound(values, near, level)
        if enough:
            cumulative = np.cumsum(near[order])
            width = max(width, values[order][np.searchsorted(cumulative, level * cumulative[-1])])
        out[gpus == n] = width
    return out


def pooled_bound(values: np.ndarray, weights: np.ndarray, level: float) -> float:
    """Student's prediction bound t(k + n) x s x sqrt(1 + 1 / (k + n)) on the next |log error|,
    with s^2 = (k s0^2 + n ms) / (k + n): the weighted mean square ms of the n held-out errors
    pooled with the prior spread s0 = :data:`ERROR_PRIOR_SCALE` worth k = :data:`ERROR_PRIOR_COUNT`
    errors (the conjugate prior of a normal error's variance). Few errors lean on the prior; many
    outweigh it, and the bound tends to their own."""
    count, prior = len(values), ERROR_PRIOR_COUNT
    mean_square = float((weights * values**2).sum() / weights.sum()) if count else 0.0
    spread = np.sqrt((prior * ERROR_PRIOR_SCALE**2 + count * mean_square) / (prior + count))
    dof = prior + count
    return float(student_t.ppf(0.5 + level / 2, dof) * spread * np.sqrt(1 + 1 / dof))


def doublings_beyond(scale, frame: pd.DataFrame) -> np.ndarray:
    """Per layout, how many doublings of GPU count or of model size (the larger) it lies beyond
    the largest observed (`scale`: the largest GPU count and model size seen): the interval's
    variance grows by :data:`DOUBLING_VARIANCE` of the held-out variance per doubling (its half
    width by sqrt(1 + doublings / 4)), since the held-out errors that size it were made at the
    observed scales."""
    if scale is None:
        return np.zeros(len(frame))
    gpus = np.log2(frame[GPUS].to_numpy(float) / scale[0])
    size = np.log2(model_parameters(frame) / scale[1])
    return np.maximum(np.maximum(gpus, size), 0.0)
