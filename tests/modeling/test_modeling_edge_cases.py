"""Edge cases: too few points, constant data, zeros, NaN/inf, one repetition, parameter values <= 1."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from extradeep.errors import InputError
from extradeep.modeling import PMNFModeler, fit_models

P = np.array([4.0, 8, 16, 32, 64])


def _frame(x, y, region="k"):
    return pd.DataFrame({"region": region, "metric": "time", "p": x, "value": y})


def test_too_few_points_gives_reason_and_no_model():
    table = fit_models(_frame(P[:4], [1.0, 2, 3, 4]), ["p"])
    assert table.loc[0, "model"] is None
    assert "only 4 measurement point(s) (need at least 5)" in table.loc[0, "reason"]
    with pytest.raises(InputError, match="need at least 5"):
        PMNFModeler().fit(P[:4], [1.0, 2, 3, 4])


def test_min_points_is_configurable():
    model = PMNFModeler(min_points=4).fit(P[:4], 2.0 + P[:4]).model_
    assert model.predict(128.0) == pytest.approx(130.0)


def test_constant_data_gives_constant_model():
    model = PMNFModeler().fit(np.repeat(P, 3), np.full(15, 7.5)).model_
    assert model.terms == [] and model.coefficients[0] == pytest.approx(7.5)
    assert model.smape == pytest.approx(0, abs=1e-9) and model.growth() == "O(1)" and model.growth_key() == (0.0, 0.0)
    assert model.interval(1000.0) == pytest.approx((7.5, 7.5))


def test_all_zeros_and_some_zeros():
    zero = PMNFModeler().fit(P, np.zeros(5)).model_
    assert zero.predict(100.0) == 0.0 and zero.smape == 0.0 and zero.terms == []
    assert np.all(np.isfinite(zero.interval(np.array([10.0, 100.0]))))
    mixed = PMNFModeler().fit(P, np.array([0.0, 4, 8, 12, 16]) * 1.0).model_  # 4 * log2(p) - 8
    assert mixed.predict(256.0) == pytest.approx(24.0)
    assert np.isfinite(mixed.smape)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_refused(bad):
    y = np.array([1.0, 2, bad, 4, 5])
    with pytest.raises(InputError, match="NaN/inf"):
        PMNFModeler().fit(P, y)
    table = fit_models(pd.concat([_frame(P, y, "bad"), _frame(P, 1.0 + P, "good")]), ["p"])
    assert table.set_index("region").loc["bad", "model"] is None
    assert "NaN/inf" in table.set_index("region").loc["bad", "reason"]
    assert table.set_index("region").loc["good", "model"].predict(100.0) == pytest.approx(101.0)


def test_single_repetition_gives_finite_interval():
    rng = np.random.default_rng(0)
    y = (3 + 0.5 * P) * (1 + 0.02 * rng.standard_normal(5))
    model = PMNFModeler().fit(P, y).model_
    assert model.n_measurements == 5 and model.dof == 5 - len(model.coefficients)
    lo, hi = model.interval(48.0)
    assert lo < model.predict(48.0) < hi and np.isfinite(hi)


def test_parameter_values_at_most_zero_are_dropped_with_warning_and_one_is_kept():
    # log2(1) = 0 is defined (Extra-P models these points); only x <= 0 is not
    x = np.array([-1.0, 0.0, 1.0, *P])
    y = 2.0 + 3.0 * np.log2(np.maximum(x, 1.0)) ** 2
    with pytest.warns(UserWarning, match="parameter value <= 0"):
        model = PMNFModeler().fit(x, y).model_
    assert len(model.points) == 6 and any("dropped 2" in w for w in model.warnings)
    assert model.predict(256.0) == pytest.approx(2.0 + 3.0 * 64)
    assert model.predict(1.0) == pytest.approx(2.0)


def test_values_between_zero_and_one_are_modeled_with_whole_log_exponents():
    x = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 8.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = PMNFModeler().fit(x, 5.0 + 2.0 * x).model_
    assert len(model.points) == 6 and model.predict(16.0) == pytest.approx(37.0)


def test_a_fractional_log_exponent_drops_values_below_one():
    x = np.array([0.5, 1.0, *P])
    with pytest.warns(UserWarning, match="below 1"):
        model = PMNFModeler(exponents_j=("0", "1/2", "1")).fit(x, 1.0 + x).model_
    assert len(model.points) == 6 and any("dropped 1" in w for w in model.warnings)


def test_a_study_from_one_rank_keeps_its_baseline():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = PMNFModeler().fit(x, 10.0 / x + 0.1).model_
    assert len(model.points) == 5


def test_too_few_values_per_parameter_in_two_parameters():
    X = np.array([[p, n] for p in P for n in (8.0, 16.0, 32.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = fit_models(
            pd.DataFrame(X, columns=["p", "n"]).assign(region="k", metric="t", value=1.0 + X[:, 0]), ["p", "n"]
        )
    assert table.loc[0, "model"] is None and "fewer than 5 values of n" in table.loc[0, "reason"]


def test_bad_options_and_columns_are_input_errors():
    with pytest.raises(InputError, match="missing column"):
        fit_models(_frame(P, P), ["ranks"])
    with pytest.raises(InputError, match="n_terms"):
        PMNFModeler(n_terms=5).fit(P, P)
    with pytest.raises(InputError, match="exponent"):
        PMNFModeler(pairs="nonsense").fit(P, P)
    with pytest.raises(InputError, match="criterion"):
        PMNFModeler(criterion="aic").fit(P, P)


def test_regions_with_different_points_in_one_table():
    full = _frame(np.repeat(P, 2), 1.0 + 2 * np.repeat(P, 2), "full")
    more = _frame(np.append(P, 128.0), 3.0 + np.log2(np.append(P, 128.0)), "more")
    short = _frame(P[:3], [1.0, 2, 3], "short")
    table = fit_models(pd.concat([short, full, more]), ["p"]).set_index("region")
    assert table.loc["full", "formula"] == "1 + 2 * p"
    assert table.loc["more", "formula"] == "3 + 1 * log2(p)" and table.loc["more", "n_points"] == 6
    assert table.loc["short", "model"] is None and "only 3" in table.loc["short", "reason"]


def test_duplicate_repetition_labels_are_refused():
    with pytest.raises(InputError, match="same repetition"):
        PMNFModeler().fit(np.repeat(P, 2), np.repeat(1.0 + P, 2), reps=np.zeros(10))
