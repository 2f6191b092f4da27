"""Models serialise losslessly (to_dict / from_dict through JSON) and print readable formulas."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from extradeep.modeling import Model, PMNFModeler, fit_models

P = np.array([2.0, 4, 6, 10, 12])


def _noisy_model(seed=1, params=1):
    rng = np.random.default_rng(seed)
    if params == 1:
        x = np.repeat(P, 5)
        y = (158.58 + 0.58 * x ** (2 / 3) * np.log2(x) ** 2) * (1 + 0.001 * rng.standard_normal(x.size))
        return PMNFModeler(param_names=["ranks"]).fit(x, y).model_
    X = np.array([[p, b] for p in P for b in (32.0, 64, 128, 256, 512)])
    y = (5 + 0.01 * X[:, 0] * X[:, 1]) * (1 + 0.01 * rng.standard_normal(len(X)))
    return PMNFModeler(param_names=["ranks", "batch_size"]).fit(X, y).model_


@pytest.mark.parametrize("params", [1, 2])
def test_round_trip_through_json_is_lossless(params):
    model = _noisy_model(params=params)
    back = Model.from_dict(json.loads(json.dumps(model.to_dict())))
    assert back.to_dict() == model.to_dict()
    X = np.array([16.0, 40, 64]) if params == 1 else np.array([[16.0, 64], [40, 1024]])
    assert np.array_equal(back.predict(X), model.predict(X))
    assert np.array_equal(back.interval(X)[0], model.interval(X)[0])
    assert back.formula() == model.formula() and back.growth() == model.growth()


def test_formula_uses_short_names_and_exact_exponents():
    model = _noisy_model()
    text = model.formula()
    assert text.startswith("158.") and "* p^(2/3) * log2(p)^2" in text
    assert model.growth() == "O(p^(2/3) log^2 p)"
    assert model.formula(names={"ranks": "x"}).endswith("x^(2/3) * log2(x)^2")
    assert str(model) == text


def test_growth_keys_sort_models_by_asymptotic_growth():
    x = np.array([4.0, 8, 16, 32, 64])
    shapes = {
        "O(1)": 0 * x + 3,
        "O(log p)": 3 + np.log2(x),
        "O(p^0.5)": 3 + x**0.5,
        "O(p log p)": 3 + x * np.log2(x),
        "O(p^2)": 3 + x**2,
    }
    models = {k: PMNFModeler().fit(x, y).model_ for k, y in shapes.items()}
    assert [m.growth() for m in models.values()] == list(shapes)
    keys = [m.growth_key() for m in models.values()]
    assert keys == sorted(keys)


def test_negative_coefficients_print_as_subtraction():
    x = np.array([4.0, 8, 16, 32, 64])
    model = PMNFModeler().fit(x, 100 - 12 * np.log2(x)).model_
    assert model.formula() == "100 - 12 * log2(p)"


def test_prediction_accepts_scalars_and_arrays():
    model = _noisy_model(params=2)
    assert isinstance(model.predict([16.0, 64.0]), float)
    assert model.predict(np.array([[16.0, 64.0], [8, 32]])).shape == (2,)
    with pytest.raises(ValueError, match="2 columns"):
        model.predict(np.ones((3, 3)))


def test_fit_models_table_columns():
    df = pd.DataFrame({"region": "k", "metric": "time", "ranks": P, "value": 1 + P})
    table = fit_models(df, ["ranks"])
    assert list(table.columns[:2]) == ["region", "metric"]
    for col in ["model", "formula", "smape", "ar2", "growth", "reason"]:
        assert col in table.columns
    assert table.loc[0, "formula"] == "1 + 1 * p" and table.loc[0, "ar2"] == pytest.approx(1.0)
    assert table.loc[0, "model"].terms == [((Fraction(1), Fraction(0)),)]


def test_zero_constant_is_left_out():
    x = np.array([4.0, 8, 16, 32, 64])
    model = PMNFModeler().fit(x, 2.5 * x).model_
    assert model.formula() == "2.5 * p" and model.coefficients[0] == 0.0
