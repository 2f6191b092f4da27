"""Forward differences with all trial points in one call: the Jacobian of a function with a known
derivative, and steps that never leave the bounds."""

from __future__ import annotations

import numpy as np

from extradeep.layouts.fit_steps import forward_differences, forward_steps


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
