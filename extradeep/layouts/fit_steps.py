"""The layout model's least squares: residuals over columns of coefficients, and forward-difference
Jacobians whose trial points are evaluated in one call.

scipy's least squares differentiates numerically one coefficient at a time: k + 1 calls of the
residuals per Jacobian. The layout model's residuals broadcast over several coefficient sets, so the
k + 1 points go in one call, at about the cost of one. The steps are scipy's own for '2-point'
(relative step sqrt(eps), at least sqrt(eps) in absolute terms, flipped where it would leave the
bounds), so the fit takes the same path as with scipy's default Jacobian.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import PART, PART_STEP, VALUE
from extradeep.layouts.parts import STEP_PARTS, compose

RELATIVE_STEP = np.finfo(float).eps ** 0.5


def forward_steps(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per coordinate, the signed step of a forward difference at ``x`` that stays within [low, high]."""
    sign = np.where(x >= 0, 1.0, -1.0)
    step = RELATIVE_STEP * sign * np.maximum(1.0, np.abs(x))
    below, above = x - low, high - x
    trial = x + step
    fits = np.abs(step) <= np.maximum(below, above)
    step = np.where(((trial < low) | (trial > high)) & fits, -step, step)
    step = np.where(~fits & (above >= below), above, step)
    return np.where(~fits & (above < below), -below, step)


def forward_differences(columns, x: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """(m, k) Jacobian at ``x`` (k,) of ``columns``: (k, q) points -> (m, q) values, called once."""
    trial = (np.arange(len(x)), np.arange(1, len(x) + 1))  # coordinate i moves in column i + 1
    points = np.repeat(x[:, None], len(x) + 1, axis=1)
    points[trial] += forward_steps(x, low, high)
    values = columns(points)
    return (values[:, 1:] - values[:, :1]) / (points[trial] - x)  # the step as represented


def as_columns(features: dict | None) -> dict | None:
    """Nominal features as (n, 1) columns, so that compose broadcasts them against (k, q) coefficients."""
    return None if features is None else {name: values[:, None] for name, values in features.items()}


def part_residuals(part_rows: pd.DataFrame):
    """f(feature columns, coef (k, q), overlap) -> (n, q): (predicted - measured part) / predicted
    step, per per-part observation; the rows' parts and values are read once, as least squares calls
    f thousands of times."""
    names = part_rows[PART].to_numpy()
    which = np.array([STEP_PARTS.index(n) if n in STEP_PARTS else len(STEP_PARTS) for n in names], dtype=int)
    rows = np.arange(len(names))
    measured = part_rows[VALUE].to_numpy(float)[:, None]

    def residuals(features, coef, overlap) -> np.ndarray:
        parts = compose(features, coef, overlap)
        unknown = np.full(parts[PART_STEP].shape, np.nan)
        predicted = np.array([*(parts[p] for p in STEP_PARTS), unknown])[which, rows]
        return (predicted - measured) / parts[PART_STEP]

    return residuals
