"""Exact recovery of noise-free PMNF truths for every (i, j) of the search space, 1 to 3 parameters."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from extradeep.modeling import PMNFModeler, fit_models
from extradeep.modeling.terms import factor_pairs, factor_values

P = np.array([4.0, 8, 16, 32, 64])
N = np.array([10.0, 20, 40, 80, 160])
ZERO = (Fraction(0), Fraction(0))


def _grid(*axes):
    return np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(axes), -1).T


def _coef(X, cols_factors, c0):
    """A term coefficient that makes the term 1x..3x the constant at the largest point."""
    top = np.prod([factor_values(np.array([X[:, c].max()]), f)[0] for c, f in cols_factors])
    return 2.0 * c0 / top


def _table(X, names, truths):
    frames = []
    for r, (c0, terms) in enumerate(truths):
        y = np.full(len(X), c0)
        for coef, factors in terms:
            y = y + coef * np.prod([factor_values(X[:, c], f) for c, f in enumerate(factors)], axis=0)
        frames.append(pd.DataFrame(X, columns=names).assign(region=f"r{r:03d}", metric="time", value=y))
    return pd.concat(frames, ignore_index=True)


def _check(table, truths, X_far):
    for model, (c0, terms) in zip(table["model"], truths):
        assert model is not None
        assert sorted(model.terms) == sorted(f for _, f in terms), model.formula()
        want = c0 + sum(
            coef * np.prod([factor_values(np.array([X_far[c]]), f)[0] for c, f in enumerate(fs)]) for coef, fs in terms
        )
        assert model.predict(X_far if len(X_far) > 1 else X_far[0]) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("pairs", ["extrap", "all"])
def test_one_parameter_every_pair_recovered(pairs):
    X = P[:, None]
    factors = factor_pairs(pairs=pairs)
    truths = [(50.0 + k, [(_coef(X, [(0, f)], 50.0 + k), (f,))]) for k, f in enumerate(factors)]
    truths.append((42.0, []))
    table = fit_models(_table(X, ["p"], truths), ["p"], options={"pairs": pairs})
    _check(table, truths, np.array([256.0]))
    assert (table["cv_smape"] < 1e-6).all()


@pytest.mark.parametrize("pairs", ["extrap", "all"])
def test_two_parameters_every_pair_recovered(pairs):
    X = _grid(P, N)
    factors = factor_pairs(pairs=pairs)
    truths = []
    for k, f in enumerate(factors):
        g = factors[(len(factors) - 1 - k * 7) % len(factors)]  # pair each factor with a different one
        c0 = 10.0 + k
        if k % 2:
            truths.append((c0, [(_coef(X, [(0, f), (1, g)], c0), (f, g))]))
        else:
            truths.append((c0, [(_coef(X, [(0, f)], c0), (f, ZERO)), (_coef(X, [(1, g)], c0), (ZERO, g))]))
    table = fit_models(_table(X, ["p", "n"], truths), ["p", "n"], options={"pairs": pairs})
    _check(table, truths, np.array([256.0, 640.0]))


def test_three_parameters_product_and_sum():
    X = _grid(P, N, np.array([2.0, 3, 4, 5, 6]))
    half, one, log = (Fraction(1, 2), Fraction(0)), (Fraction(1), Fraction(0)), (Fraction(0), Fraction(1))
    truths = [
        (5.0, [(0.01, (one, log, half))]),
        (7.0, [(0.2, (one, ZERO, ZERO)), (0.5, (ZERO, log, ZERO)), (1.5, (ZERO, ZERO, half))]),
    ]
    table = fit_models(_table(X, ["p", "n", "m"], truths), ["p", "n", "m"])
    _check(table, truths, np.array([256.0, 640.0, 24.0]))


def test_two_terms_per_parameter():
    x = np.array([2.0, 4, 8, 16, 32, 64, 128])
    y = 3.0 + 0.5 * x + 0.01 * x**2 * np.log2(x)
    model = PMNFModeler(n_terms=2).fit(x, y).model_
    assert sorted(model.terms) == [((Fraction(1), Fraction(0)),), ((Fraction(2), Fraction(1)),)]
    assert model.predict(512.0) == pytest.approx(3.0 + 0.5 * 512 + 0.01 * 512**2 * 9, rel=1e-8)


def test_falling_data_strong_scaling_recovered():
    x = P
    y = 100.0 - 12.0 * np.log2(x)
    model = PMNFModeler().fit(x, y).model_
    assert model.terms == [((Fraction(0), Fraction(1)),)]
    assert model.coefficients[1] == pytest.approx(-12.0)


def test_custom_exponent_sets_limit_the_search():
    y = 2.0 + 0.3 * P**2
    model = PMNFModeler(exponents_i=[0, 1], exponents_j=[0, 1]).fit(P, y).model_
    assert all(f[0] <= 1 for term in model.terms for f in term)
    assert PMNFModeler(exponents_i=[0, 1, 2], exponents_j=[0]).fit(P, y).model_.terms == [((Fraction(2), Fraction(0)),)]


def test_negligible_terms_are_rejected():
    y = 100.0 + 1e-5 * P  # the term adds at most 6.4e-6 of the value: below the 0.05% threshold
    model = PMNFModeler().fit(P, y).model_
    assert model.terms == []
    kept = PMNFModeler(min_term_contribution=0.0).fit(P, y).model_
    assert kept.terms == [((Fraction(1), Fraction(0)),)]


def test_nonnegative_option_controls_falling_terms():
    y = 100.0 - 12.0 * np.log2(P)
    assert PMNFModeler(nonnegative=True).fit(P, y).model_.terms == []
    assert PMNFModeler(nonnegative=False).fit(P, y).model_.coefficients[1] == pytest.approx(-12.0)


def test_sparse_cross_design_is_enough_for_two_parameters():
    """Extra-P's sparse measurements: one line per parameter (plus one point off the lines)."""
    X = np.array([[p, 10.0] for p in P] + [[4.0, n] for n in N[1:]] + [[64.0, 160.0]])
    half, one, log = (Fraction(1, 2), Fraction(0)), (Fraction(1), Fraction(0)), (Fraction(0), Fraction(1))
    truths = [(3.0, [(0.1, (one, log))]), (3.0, [(0.2, (one, ZERO)), (2.0, (ZERO, half))])]
    table = fit_models(_table(X, ["p", "n"], truths), ["p", "n"])
    _check(table, truths, np.array([256.0, 640.0]))
