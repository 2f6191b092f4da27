"""Scaling and bottleneck analysis against analytic runtime laws with known answers."""

import numpy as np
import pandas as pd
import pytest

from extradeep.analysis.bottlenecks import bottleneck_table
from extradeep.analysis.scaling import default_baseline, predict_table, scaling_table
from extradeep.errors import InputError

GRID = pd.DataFrame({"ranks": [2, 4, 8, 16, 64]})


def _models(**laws):
    return pd.DataFrame({"region": list(laws), "model": list(laws.values())})


def test_perfect_strong_scaling_has_efficiency_one_and_linear_speedup(law):
    table = scaling_table(
        _models(total=law(lambda p: 1000.0 / p)), GRID, ["ranks"], ["region"], baseline={"ranks": 2}, mode="strong"
    )
    np.testing.assert_allclose(table["efficiency"], 1.0)
    np.testing.assert_allclose(table["speedup"], GRID["ranks"] / 2)
    np.testing.assert_allclose(table["runtime_change_pct"], (1 - 2 / GRID["ranks"]) * 100)


def test_perfect_weak_scaling_has_efficiency_one_and_zero_runtime_change(law):
    table = scaling_table(
        _models(total=law(lambda p: 0 * p + 42.0)), GRID, ["ranks"], ["region"], baseline={"ranks": 2}, mode="weak"
    )
    np.testing.assert_allclose(table["efficiency"], 1.0)
    np.testing.assert_allclose(table["speedup"], GRID["ranks"] / 2)  # scaled speedup
    np.testing.assert_allclose(table["runtime_change_pct"], 0.0)


def test_amdahl_strong_scaling_matches_closed_form(law):
    serial, parallel = 10.0, 990.0
    table = scaling_table(
        _models(total=law(lambda p: serial + parallel / p)),
        GRID,
        ["ranks"],
        ["region"],
        baseline={"ranks": 2},
        mode="strong",
    )
    T = serial + parallel / GRID["ranks"]
    T1 = serial + parallel / 2
    np.testing.assert_allclose(table["speedup"], T1 / T)
    np.testing.assert_allclose(table["efficiency"], T1 / T * 2 / GRID["ranks"])
    assert table["efficiency"].is_monotonic_decreasing


def test_baseline_outside_the_grid_and_several_models(law):
    models = _models(a=law(lambda p: 8.0 / p), b=law(lambda p: 3.0 + 0 * p))
    table = scaling_table(models, GRID, ["ranks"], ["region"], baseline={"ranks": 1}, mode="strong")
    a = table[table.region == "a"]
    np.testing.assert_allclose(a["speedup"], GRID["ranks"])
    b = table[table.region == "b"]
    np.testing.assert_allclose(b["efficiency"], 1 / GRID["ranks"])


def test_non_positive_prediction_gives_nan_not_a_number_that_looks_valid(law):
    table = scaling_table(
        _models(x=law(lambda p: 10.0 - p)), GRID, ["ranks"], ["region"], baseline={"ranks": 2}, mode="strong"
    )
    assert table.loc[table.ranks >= 16, "speedup"].isna().all()
    assert table.loc[table.ranks == 4, "speedup"].iloc[0] == pytest.approx(8 / 6)


def test_two_parameters_use_ranks_for_resources(law):
    grid = pd.DataFrame({"ranks": [2, 4, 8], "batch": [32, 32, 64]})
    model = law(lambda X: X[:, 1] * 10.0 / X[:, 0])
    table = scaling_table(
        _models(t=model), grid, ["ranks", "batch"], ["region"], baseline={"ranks": 2, "batch": 32}, mode="strong"
    )
    np.testing.assert_allclose(table["efficiency"], [1.0, 1.0, 0.5])


def test_default_baseline_is_smallest_point_and_errors_are_input_errors(law):
    points = pd.DataFrame({"ranks": [8, 2, 4, 2], "batch": [1, 64, 1, 32]})
    assert default_baseline(points, ["ranks", "batch"], "ranks") == {"ranks": 2.0, "batch": 32.0}
    with pytest.raises(InputError):
        scaling_table(_models(t=law(lambda p: p)), GRID, ["ranks"], ["region"], {"ranks": 2}, mode="diagonal")
    with pytest.raises(InputError):
        scaling_table(_models(t=law(lambda p: p)), GRID, ["ranks"], ["region"], {}, mode="strong")


def test_predict_table_skips_missing_models_and_gives_intervals(law):
    models = pd.DataFrame({"region": ["a", "b"], "model": [law(lambda p: 2 * p), None]})
    table = predict_table(models, GRID, ["ranks"], ["region"])
    assert list(table.region.unique()) == ["a"]
    np.testing.assert_allclose(table["T"], 2 * GRID["ranks"])
    assert (table["T_lo"] < table["T"]).all() and (table["T"] < table["T_hi"]).all()


def test_bottlenecks_rank_by_growth_then_share(law):
    models = pd.DataFrame(
        {
            "region": ["allreduce", "gemm", "relu", "copy", "cpu"],
            "kind": ["kernel", "kernel", "kernel", "memcpy", "os"],
            "category": ["communication", "computation", "computation", "memory", "os"],
            "metric": ["time"] * 5,
            "model": [
                law(lambda p: 0.1 * p * np.log2(p), "O(p log p)", 2.0),
                law(lambda p: 0 * p + 50.0, "O(1)", 0.0),
                law(lambda p: 0 * p + 10.0, "O(1)", 0.0),
                law(lambda p: 0.5 * np.sqrt(p), "O(p^0.5)", 0.5),
                law(lambda p: p**3, "O(p^3)", 3.0),
            ],
        }
    )
    table = bottleneck_table(models, {"ranks": 64}, ["ranks"])
    assert list(table.region) == ["allreduce", "copy", "gemm", "relu"]  # os is not GPU work
    gemm = table.set_index("region").loc["gemm"]
    assert gemm["share_of_category"] == pytest.approx(50 / 60)
    assert table.set_index("region").loc["copy", "share_of_category"] == pytest.approx(1.0)
    assert table["share_of_total"].sum() == pytest.approx(1.0)
    assert list(table["rank"]) == [1, 2, 3, 4]
