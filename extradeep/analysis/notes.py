"""The notes an analysis gives the user about its models: measured parts longer than their whole,
models that miss their own points, predictions far beyond the measured range or with wide
intervals, and parts whose own models disagree with the whole there."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from extradeep.analysis.epoch import BREAKDOWN, EPOCH_TIME, quantity_label, skipped_data_note
from extradeep.analysis.points import format_point
from extradeep.analysis.primary import require_primary
from extradeep.analysis.scaling import design
from extradeep.columns import PART_IDLE, VALUE
from extradeep.errors import InputError

if TYPE_CHECKING:
    from extradeep.analysis.core import Analysis

# a part may exceed its whole by rounding and noise, not by more; all parts plus idle may exceed it by
# the communication that overlapped computation (DDP hides much of it), but not by a quarter
PART_TOLERANCE = 1.02
PARTS_TOLERANCE = 1.25


def contradiction_notes(app_points: pd.DataFrame, params: list[str]) -> list[str]:
    """Say where measured parts exceed their whole (computation longer than the epoch, or the parts
    plus idle longer than it), and why, instead of printing the numbers silently: the parts are sums
    of kernel times, which count kernels that ran at the same time (several streams, or several GPUs
    of one process) once each, while idle is measured against the union of GPU activity."""
    if app_points.empty or EPOCH_TIME not in set(app_points["quantity"]):
        return []
    wide = app_points.pivot_table(index=params, columns="quantity", values=VALUE)
    parts = [c for c in BREAKDOWN if c in wide.columns]
    if not parts:
        return []
    total = wide[EPOCH_TIME]
    summed = wide[parts].sum(axis=1) + (wide[PART_IDLE] if PART_IDLE in wide.columns else 0.0)
    largest = wide[parts].max(axis=1)
    bad = ((largest > PART_TOLERANCE * total) | (summed > PARTS_TOLERANCE * total)) & (total > 0)
    if not bad.any():
        return []
    key = bad[bad].index[0]
    point = ", ".join(f"{p}={v:g}" for p, v in zip(params, key if isinstance(key, tuple) else (key,)))
    which = wide.loc[key, parts].idxmax()
    over = "is longer than" if largest[key] > PART_TOLERANCE * total[key] else "plus the other parts and idle exceed"
    return [
        f"at {int(bad.sum())} measured point(s), e.g. {point}, {which} ({wide.loc[key, which]:.4g} s) {over} "
        f"the {EPOCH_TIME} ({total[key]:.4g} s): the parts are sums of kernel times and count kernels that ran "
        "at the same time (on several streams, or several GPUs of one process) once each, while idle is the "
        f"time no GPU work ran; read the parts as GPU time, not as shares of the {EPOCH_TIME}"
    ]


UNRELIABLE_SMAPE = 10.0  # % error of a model at its own measured points beyond which predictions are not trusted
UNRELIABLE_WIDTH = 0.25  # half-width of a prediction interval, relative to the prediction


def reliability_notes(app_models: pd.DataFrame, per: str) -> list[str]:
    """Warnings for application models that miss their own measured points by more than
    UNRELIABLE_SMAPE: everything derived from them (speedup, efficiency, cost, budgets) inherits it."""
    poor = app_models[app_models["model"].notna() & (app_models["smape"] > UNRELIABLE_SMAPE)]
    if poor.empty:
        return []
    main = next((q for q in (EPOCH_TIME, "gpu total") if (app_models["quantity"] == q).any()), None)
    notes, others = [], []
    for row in poor.itertuples(index=False):
        if row.quantity == main:
            notes.append(
                f"WARNING: the {quantity_label(main, per)} model misses its own measured points by "
                f"{row.smape:.1f}% (SMAPE > {UNRELIABLE_SMAPE:g}%): its predictions and the speedup, "
                "efficiency, cost and budgets made from it are not reliable. Compare the model with the "
                "measured points; a parameter the model ignores, too few points or very noisy steps are "
                "the usual causes"
            )
        else:
            others.append(f"{quantity_label(row.quantity, per)} ({row.smape:.1f}%)")
    if others:
        notes.append(
            f"WARNING: the models of {', '.join(others)} miss their measured points by more than "
            f"{UNRELIABLE_SMAPE:g}% (SMAPE): do not rely on their predictions"
        )
    return notes


def extrapolation_notes(analysis: Analysis, grid: pd.DataFrame) -> list[str]:
    """Warnings about predictions at ``grid``: epochs that skip part of the data (floor in n_t)
    and predictions far beyond the measured configurations."""
    notes = []
    if analysis.dataset is not None and analysis.per == "epoch":
        points = grid[analysis.params].drop_duplicates().reset_index(drop=True)
        counts = pd.concat([points, analysis.dataset.samples_per_epoch(points, analysis.fixed)], axis=1)
        notes += skipped_data_note(counts, analysis.params)
    notes += _wide_interval_note(analysis, grid) + parts_notes(analysis, grid)
    ranks = analysis.ranks_param
    largest = float(analysis.points[ranks].max())
    far = sorted(v for v in grid[ranks].unique() if v > 2 * largest)
    if not far:
        return notes
    head = (
        f"predictions at {ranks} = {', '.join(f'{v:g}' for v in far)} extrapolate more than 2x beyond the "
        f"largest measured configuration ({largest:g}); "
    )
    step = step_time_model(analysis)
    if getattr(step, "choice", None) == "replayed":
        return notes + [
            head + "the step time takes the communication it can hide from the replayed trace at "
            f"{step.exposure.x_ref:g}, but waits for the slowest of more ranks are not measured "
            "(docs/performance.md: up to 2.3% error at 4x on simulated training)"
        ]
    return notes + [
        head + "a change of regime there (e.g. communication no longer hidden behind computation) "
        "is not measured: the epoch-time interval spans the regimes the measured points allow, and "
        "the point prediction can be far off (docs/performance.md: 1-14% error at 4x on simulated "
        "training without the replayed trace, the truth inside the interval)"
    ]


PARTS_EXCESS = 0.02  # share of the whole by which the parts' own models may overshoot it before a warning


def parts_notes(analysis: Analysis, grid: pd.DataFrame) -> list[str]:
    """A warning where the parts' own models would exceed the time per epoch by more than PARTS_EXCESS
    at ``grid``: the parts are kept within it (analysis/parts.py), but their models and the whole
    disagree there, so the breakdown is the less certain of the two."""
    from extradeep.analysis.parts import PartModel

    model = next((m for m in analysis.application_models["model"] if isinstance(m, PartModel)), None)
    if model is None or grid.empty:
        return []
    points = grid[analysis.params].drop_duplicates().reset_index(drop=True)
    excess = model.breakdown.excess(design(points, analysis.params))
    bad = np.flatnonzero(excess > PARTS_EXCESS)
    if not len(bad):
        return []
    shown = ", ".join(f"{format_point(points.iloc[i], analysis.params)} ({excess[i]:.0%})" for i in bad[:6])
    label = quantity_label(EPOCH_TIME, analysis.per)
    return [
        f"WARNING: the models of the parts (computation, communication, memory, idle) would exceed the {label} at "
        f"{shown}: they are scaled down to fit within it there, so read the breakdown as rough"
    ]


def step_time_model(analysis: Analysis):
    """The training-step model inside the epoch-time model (the model itself without a dataset);
    a StepComposition has a ``choice`` of overlap rule."""
    model = analysis.model(EPOCH_TIME)
    return getattr(model, "train", model)


def _wide_interval_note(analysis: Analysis, grid: pd.DataFrame, level: float = 0.95) -> list[str]:
    """A warning naming the grid points where the primary time's interval is wider than
    +-UNRELIABLE_WIDTH of the prediction."""
    try:
        quantity = require_primary(analysis.primary, analysis.per, analysis.application_models).quantity
    except InputError:
        return []
    model = analysis.model(quantity)
    points = grid[analysis.params].drop_duplicates().reset_index(drop=True)
    X = design(points, analysis.params)
    T = np.asarray(model.predict(X), float).reshape(-1)
    lo, hi = (np.asarray(v, float).reshape(-1) for v in model.interval(X, level=level))
    width = np.divide(np.maximum(T - lo, hi - T), np.abs(T), out=np.full(len(T), np.inf), where=T != 0)
    wide = width > UNRELIABLE_WIDTH
    if not wide.any():
        return []
    shown = ", ".join(
        f"{format_point(points.iloc[i], analysis.params)} (+-{width[i]:.0%})" for i in np.flatnonzero(wide)[:6]
    )
    return [
        f"WARNING: the {level:.0%} interval of the {quantity_label(quantity, analysis.per)} is wider than "
        f"+-{UNRELIABLE_WIDTH:.0%} of the prediction at {shown}: treat these predictions as rough"
    ]
