"""Forward-difference Jacobians whose trial points are evaluated in one call.

scipy's least squares differentiates numerically one coefficient at a time: k + 1 calls of the
residuals per Jacobian. The layout model's residuals broadcast over several coefficient sets, so the
k + 1 points go in one call, at about the cost of one. The steps are scipy's own for '2-point'
(relative step sqrt(eps), at least sqrt(eps) in absolute terms, flipped where it would leave the
bounds), so the fit takes the same path as with scipy's default Jacobian.
"""

from __future__ import annotations

import numpy as np

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
    step = forward_steps(x, low, high)
    points = np.repeat(x[:, None], len(x) + 1, axis=1)
    points[np.arange(len(x)), np.arange(1, len(x) + 1)] += step
    values = columns(points)
    taken = points[np.arange(len(x)), np.arange(1, len(x) + 1)] - x  # the step as represented
    return (values[:, 1:] - values[:, :1]) / taken
