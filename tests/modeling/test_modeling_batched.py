"""The batched solver matches per-problem least squares and brute-force leave-one-out."""

from __future__ import annotations

import numpy as np

from extradeep.modeling.batched import fit_batched, fit_one_term, smape


def test_matches_lstsq_and_brute_force_loo():
    rng = np.random.default_rng(5)
    x = np.array([4.0, 8, 16, 32, 64, 128])
    A = np.stack([np.column_stack([np.ones(6), x**e, np.log2(x) ** 2]) for e in (0.5, 1, 2)])
    y = rng.uniform(1, 10, (4, 1, 6)) + x
    w = rng.uniform(0.5, 2, (4, 1, 6))
    fit = fit_batched(A, y, w, want_r_inv=True)
    assert fit.valid.all()
    for r in range(4):
        for h in range(3):
            W = np.diag(w[r, 0])
            normal = A[h].T @ W @ A[h]
            np.testing.assert_allclose(fit.coef[r, h], np.linalg.solve(normal, A[h].T @ W @ y[r, 0]), rtol=1e-8)
            r_inv = fit.r_inv[r, h]
            np.testing.assert_allclose(r_inv @ r_inv.T, np.linalg.inv(normal), rtol=1e-7)
            for i in range(6):
                keep = np.arange(6) != i
                sw = np.sqrt(w[r, 0, keep])
                c = np.linalg.lstsq(A[h][keep] * sw[:, None], sw * y[r, 0, keep], rcond=None)[0]
                assert np.isclose(A[h][i] @ c, fit.loo_pred[r, h, i], rtol=1e-8)


def test_collinear_and_interpolating_hypotheses_are_invalid():
    x = np.array([4.0, 8, 16, 32, 64])
    collinear = np.column_stack([np.ones(5), x, 2 * x])[None]
    interpolating = np.column_stack([x**k for k in range(5)])[None]
    y = (1 + x)[None, None, :]
    w = np.ones_like(y)
    assert not fit_batched(collinear, y, w).valid.any()
    assert not fit_batched(interpolating, y, w).valid.any()


def test_smape_in_percent_with_zero_pairs():
    assert smape(np.array([1.0, 0.0]), np.array([1.0, 0.0])) == 0.0
    assert smape(np.array([1.0, 0.0]), np.array([3.0, 0.0])) == 50.0


def test_closed_form_one_term_matches_general_solver():
    rng = np.random.default_rng(9)
    x = np.array([4.0, 8, 16, 32, 64])
    t = np.stack([x**0.5, x * np.log2(x), np.log2(x) ** 2])  # (H, n)
    A = np.stack([np.column_stack([np.ones(5), row]) for row in t])
    y = rng.uniform(1, 100, (7, 1, 5))
    w = rng.uniform(0.1, 3, (7, 1, 5))
    general = fit_batched(A, y, w)
    for fast in (fit_one_term(t, y, w), fit_one_term(np.broadcast_to(t, (7, 3, 5)), y, w)):
        np.testing.assert_allclose(fast.coef, general.coef, rtol=1e-9)
        np.testing.assert_allclose(fast.loo_pred, general.loo_pred, rtol=1e-9)
        assert np.array_equal(fast.valid, general.valid)
