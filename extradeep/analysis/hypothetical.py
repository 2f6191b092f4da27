"""What one more measurement would do to a model's prediction interval, before it is taken.

The advisor asks: if we profiled configuration x (n new repetitions), how wide would the 95%
interval at the target points become? A new measurement is assumed to land on the model's
prediction (at a measured point: on the measured mean) with the noise already observed, so:
the fitted coefficients stay, the coefficient covariance shrinks by the new row's weight, the
degrees of freedom grow, and each rival hypothesis is refitted with the hypothetical value,
which pulls it towards the chosen model at x and shrinks their disagreement at the targets.
The interval itself is then computed by the model's own :meth:`Model.interval`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from extradeep.modeling.model import Model
from extradeep.modeling.terms import design_matrix


@dataclass
class PointData:
    """The measurements behind a one-parameter model: per point its value, mean, count, spread."""

    x: np.ndarray  # (n,) distinct parameter values
    mean: np.ndarray  # (n,) mean over repetitions
    count: np.ndarray  # (n,) repetitions

    @classmethod
    def from_values(cls, x, values) -> PointData:
        x = np.asarray(x, float)
        values = np.asarray(values, float)
        points = np.unique(x)
        mean = np.array([values[x == p].mean() for p in points])
        count = np.array([(x == p).sum() for p in points], float)
        return cls(points, mean, count)

    def with_measurement(self, x: float, value: float, n: int) -> PointData:
        """These data plus `n` repetitions at x whose mean is `value` (x measured: mean kept)."""
        hit = np.isclose(self.x, x)
        if hit.any():
            count = self.count + n * hit
            return PointData(self.x, self.mean.copy(), count)
        order = np.argsort(np.append(self.x, x))
        return PointData(
            np.append(self.x, x)[order], np.append(self.mean, value)[order], np.append(self.count, float(n))[order]
        )


def _weights(model: Model, data: PointData) -> np.ndarray:
    """The modeler's least-squares weights: repetitions over the noise-variance shape."""
    if model.weighting == "relative":
        return data.count / np.maximum(np.abs(data.mean), model.var_floor) ** 2
    return data.count.copy()


def _wls(A: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares: (coefficients, unscaled covariance (A^T W A)^-1)."""
    normal = A.T @ (A * w[:, None])
    cov = np.linalg.pinv(normal)
    return cov @ (A.T @ (w * y)), cov


def updated_model(model: Model, data: PointData, x: float, n: int) -> tuple[Model, PointData]:
    """The model as it would be after `n` more repetitions at x, and the data including them."""
    value = float(model.predict(x))
    new = data.with_measurement(x, value, n)
    X = new.x.reshape(-1, 1)
    w = _weights(model, new)
    _, cov = _wls(design_matrix(X, model.terms), new.mean, w)
    rivals = []
    for rival in model.rivals:
        coef, _ = _wls(design_matrix(X, rival["terms"]), new.mean, w)
        rivals.append({"terms": rival["terms"], "coefficients": coef})
    return replace(model, cov_unscaled=cov, dof=model.dof + n, rivals=rivals), new


def interval_width(model: Model, targets: np.ndarray, level: float) -> np.ndarray:
    """Width (hi - lo) of the prediction interval at each target."""
    lo, hi = model.interval(np.asarray(targets, float), level=level)
    return np.asarray(hi) - np.asarray(lo)


def check_consistent(model: Model, data: PointData) -> bool:
    """Whether `data` reproduce the model's own coefficient covariance (same weights, same points)."""
    if len(data.x) != len(model.points):
        return False
    _, cov = _wls(design_matrix(data.x.reshape(-1, 1), model.terms), data.mean, _weights(model, data))
    return bool(np.allclose(cov, model.cov_unscaled, rtol=1e-6, atol=1e-12 * np.abs(cov).max()))
