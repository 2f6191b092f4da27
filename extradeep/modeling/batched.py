"""Batched weighted least squares with closed-form leave-one-out errors.

Every (region, hypothesis) pair is one small weighted least-squares problem. They are solved all at
once with a column-by-column Gram-Schmidt QR (re-orthogonalised, so it is as stable as Householder
for these few columns); the loops run over columns (at most a handful), never over regions,
hypotheses or folds. Leave-one-out predictions follow from the hat matrix diagonal:
``y_i - r_i / (1 - h_ii)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A column that keeps less than this share of its norm after projection is treated as collinear.
RANK_TOL = 1e-9
# Leverage this close to 1 means the point is interpolated; its leave-one-out error is undefined.
LEVERAGE_TOL = 1e-9


@dataclass
class BatchFit:
    """Results of a batched fit; leading axes are the broadcast batch axes (e.g. region, hypothesis)."""

    coef: np.ndarray  # (..., p)
    fitted: np.ndarray  # (..., n)
    loo_pred: np.ndarray  # (..., n) leave-one-out prediction at each point
    valid: np.ndarray  # (...,) full rank and leave-one-out defined everywhere
    r_inv: np.ndarray | None = None  # (..., p, p) inverse of R from sqrt(W) A = Q R


def fit_batched(A: np.ndarray, y: np.ndarray, w: np.ndarray, want_r_inv: bool = False) -> BatchFit:
    """Weighted least squares for broadcastable stacks: A (..., n, p), y (..., n), w (..., n) > 0."""
    sw = np.sqrt(w)
    B = A * sw[..., None]
    batch = np.broadcast_shapes(B.shape[:-2], y.shape[:-1])
    n, p = A.shape[-2:]
    Q = np.empty((p,) + batch + (n,))
    Rm = np.zeros(batch + (p, p))
    valid = np.ones(batch, dtype=bool)
    for k in range(p):
        v = np.broadcast_to(B[..., k], batch + (n,)).copy()
        norm0 = np.sqrt(np.einsum("...i,...i->...", v, v))
        for _ in range(2):  # second pass restores orthogonality lost to cancellation
            for j in range(k):
                r = np.einsum("...i,...i->...", Q[j], v)
                Rm[..., j, k] += r
                v -= r[..., None] * Q[j]
        nrm = np.sqrt(np.einsum("...i,...i->...", v, v))
        ok = nrm > RANK_TOL * np.maximum(norm0, np.finfo(float).tiny)
        valid &= ok
        Rm[..., k, k] = np.where(ok, nrm, 1.0)
        Q[k] = v / Rm[..., k, k][..., None]
    z = np.einsum("k...i,...i->k...", Q, np.broadcast_to(sw * y, batch + (n,)))
    coef = np.zeros((p,) + batch)
    for k in range(p - 1, -1, -1):
        acc = z[k] - sum(Rm[..., k, j] * coef[j] for j in range(k + 1, p))
        coef[k] = acc / Rm[..., k, k]
    coef = np.moveaxis(coef, 0, -1)
    fitted = np.einsum("...ip,...p->...i", A, coef)
    hat = np.einsum("k...i,k...i->...i", Q, Q)
    denom = 1.0 - hat
    loo_ok = denom > LEVERAGE_TOL
    valid &= fold(np.logical_and, loo_ok)
    resid = y - fitted
    loo_pred = y - resid / np.where(loo_ok, denom, 1.0)
    r_inv = _upper_inverse(Rm) if want_r_inv else None
    return BatchFit(coef=coef, fitted=fitted, loo_pred=loo_pred, valid=valid, r_inv=r_inv)


def fit_one_term(t: np.ndarray, y: np.ndarray, w: np.ndarray) -> BatchFit:
    """`fit_batched` for the common design [1, t] in closed form (weighted simple regression).

    t (H, n) shared by all rows or (R, H, n); y, w (R, 1, n). Sums become matrix products, so
    thousands of regions x hypotheses cost a few BLAS calls.
    """
    wy = w * y
    if t.ndim == 2:
        sx, sxx, sxy = w[:, 0] @ t.T, w[:, 0] @ (t * t).T, wy[:, 0] @ t.T
    else:
        sx = np.einsum("rhn,rn->rh", t, w[:, 0])
        sxx = np.einsum("rhn,rn->rh", t * t, w[:, 0])
        sxy = np.einsum("rhn,rn->rh", t, wy[:, 0])
    sw, sy = w.sum(axis=-1), wy.sum(axis=-1)  # (R, 1)
    tbar = sx / sw
    spread = sxx - sx * tbar  # sum of w (t - tbar)^2
    valid = spread > RANK_TOL * np.maximum(sxx, np.finfo(float).tiny)
    spread = np.where(valid, spread, 1.0)
    slope = (sxy - tbar * sy) / spread
    const = (sy - slope * sx) / sw
    fitted = const[..., None] + slope[..., None] * t
    hat = w * (1.0 / sw[..., None] + (t - tbar[..., None]) ** 2 / spread[..., None])
    denom = 1.0 - hat
    loo_ok = denom > LEVERAGE_TOL
    valid &= fold(np.logical_and, loo_ok)
    loo_pred = y - (y - fitted) / np.where(loo_ok, denom, 1.0)
    return BatchFit(coef=np.stack([const, slope], axis=-1), fitted=fitted, loo_pred=loo_pred, valid=valid)


def _upper_inverse(Rm: np.ndarray) -> np.ndarray:
    """Inverse of stacked upper-triangular matrices by back substitution."""
    p = Rm.shape[-1]
    eye = np.broadcast_to(np.eye(p), Rm.shape)
    out = np.zeros_like(Rm)
    for k in range(p - 1, -1, -1):
        acc = eye[..., k, :] - np.einsum("...j,...jc->...c", Rm[..., k, k + 1 :], out[..., k + 1 :, :])
        out[..., k, :] = acc / Rm[..., k, k][..., None]
    return out


def smape(actual: np.ndarray, predicted: np.ndarray, axis: int = -1) -> np.ndarray:
    """Symmetric mean absolute percentage error in percent; points where both are 0 count as 0."""
    num = 2.0 * np.abs(predicted - actual)
    den = np.abs(actual) + np.abs(predicted)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return 100.0 / ratio.shape[axis] * fold(np.add, ratio, axis)


def fold(ufunc, a: np.ndarray, axis: int = -1) -> np.ndarray:
    """`ufunc.reduce(a, axis)` as a loop over that (short) axis: numpy reduces a short inner axis of
    a large array several times slower than it combines whole slices (points are 5-25 long)."""
    a = np.moveaxis(a, axis, -1)
    out = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        ufunc(out, a[..., k], out=out)
    return out


def chunk_rows(n_rows: int, cells_per_row: int, budget: int = 200_000):
    """Slices over rows that keep each chunk below `budget` array cells."""
    step = max(1, budget // max(1, cells_per_row))
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))
