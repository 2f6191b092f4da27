"""Forward differences with all trial points in one call: the Jacobian of a function with a known
derivative, and steps that never leave the bounds; per-part residuals over columns of coefficients."""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import PART, VALUE
from extradeep.layouts.fit_steps import as_columns, forward_differences, forward_steps, part_residuals
from extradeep.layouts.hardware import load_hardware
from extradeep.layouts.parts import PRIOR, STEP_PARTS, compose, nominal_features
from extradeep.layouts.space import enumerate_layouts, layout_frame
from extradeep.layouts.workload import TransformerShape


def _columns(points: np.ndarray) -> np.ndarray:
    """f(x) = (exp(x0) x1, sin(x1), x0^2 x2) at each column of ``points`` (3, q)."""
    x0, x1, x2 = points
    return np.array([np.exp(x0) * x1, np.sin(x1), x0**2 * x2])


def _jacobian(x: np.ndarray) -> np.ndarray:
    x0, x1, x2 = x
    return np.array(
        [
            [np.exp(x0) * x1, np.exp(x0), 0.0],
            [0.0, np.cos(x1), 0.0],
            [2 * x0 * x2, 0.0, x0**2],
        ]
    )


def test_the_jacobian_of_a_known_function():
    calls = []

    def counted(points):
        calls.append(points.shape)
        return _columns(points)

    x = np.array([0.3, -1.2, 2.0])
    got = forward_differences(counted, x, np.full(3, -10.0), np.full(3, 10.0))
    np.testing.assert_allclose(got, _jacobian(x), rtol=1e-6, atol=1e-7)
    assert calls == [(3, 4)]  # the base point and one trial point per coordinate, in one call


def test_steps_stay_within_the_bounds():
    low, high = np.array([0.0, -1.0, -5.0]), np.array([1.0, 1.0, 5.0])
    for x in (high - 1e-12, low + 1e-12, np.array([0.5, 0.0, -4.999999999])):
        step = forward_steps(x, low, high)
        assert np.all(step != 0)
        assert np.all((x + step >= low) & (x + step <= high)), (x, step)
    x = np.array([0.999999999999, 0.0, 4.9])
    got = forward_differences(_columns, x, low, high)
    np.testing.assert_allclose(got, _jacobian(x), rtol=1e-5, atol=1e-6)


def test_a_box_narrower_than_the_step_steps_to_its_far_edge():
    low, high = np.array([0.0]), np.array([1e-10])
    step = forward_steps(np.array([2e-11]), low, high)
    assert 0 < 2e-11 + step[0] <= 1e-10


def test_part_residuals_vanish_at_the_parts_they_came_from_and_columns_match_single_calls():
    """Per-part observations made by compose at known coefficients leave no residual there; each column
    of a (k, q) batch equals the residuals of its coefficient set alone; an unknown part is NaN."""
    shape = TransformerShape(layers=8, hidden=1024, heads=16, seq_len=1024, vocab=51200)
    frame = layout_frame(enumerate_layouts(shape, [8, 16], 64, 8, zero=(0, 1, 3)), source="layouts")
    hardware = load_hardware(None)
    features = nominal_features(frame, hardware)
    truth = np.array(PRIOR) * np.linspace(0.8, 1.2, len(PRIOR))
    parts = compose(features, truth)
    rows = pd.concat(
        [frame.assign(**{PART: name, VALUE: parts.get(name, 1.0)}) for name in (*STEP_PARTS, "not a part")],
        ignore_index=True,
    )
    residuals = part_residuals(rows)
    columns = as_columns(nominal_features(rows, hardware))
    other = truth * np.exp(np.linspace(-0.2, 0.2, len(truth)))
    both = residuals(columns, np.column_stack([truth, other]), 0.0)
    known = rows[PART].to_numpy() != "not a part"
    np.testing.assert_allclose(both[known, 0], 0.0, atol=1e-12)
    assert np.isnan(both[~known]).all()
    alone = residuals(columns, other[:, None], 0.0)[:, 0]
    np.testing.assert_allclose(both[known, 1], alone[known], rtol=1e-12)
    assert np.abs(alone[known]).max() > 1e-3  # other coefficients leave a residual
