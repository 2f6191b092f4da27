import numpy as np
import pandas as pd
import pytest

from extradeep.analysis.cost import CostSettings, cost_table
from extradeep.errors import InputError


def _frame():
    return pd.DataFrame(
        {
            "ranks": [2, 4, 8],
            "batch": [32, 32, 64],
            "T": [3600.0, 1800.0, 7200.0],
            "T_lo": [3000.0, 1500.0, 7000.0],
            "T_hi": [4000.0, 2000.0, 8000.0],
        }
    )


def test_core_hours_follow_eq_14():
    out = cost_table(_frame(), CostSettings(cores_per_rank=8), ["ranks", "batch"])
    # C = T[h] * ranks * cores per rank
    np.testing.assert_allclose(out["core_hours"], [1 * 2 * 8, 0.5 * 4 * 8, 2 * 8 * 8])
    np.testing.assert_allclose(out["cost"], out["core_hours"])
    np.testing.assert_allclose(out["cost_lo"], [3000 / 3600 * 16, 1500 / 3600 * 32, 7000 / 3600 * 64])
    assert out.attrs["cost_unit"] == "core-hours"


def test_prices_per_core_and_per_gpu_hour():
    core = cost_table(_frame(), CostSettings(cores_per_rank=4, price_per_core_hour=0.5), ["ranks"])
    np.testing.assert_allclose(core["cost"], np.array([2, 4 * 0.5, 16]) * 4 * 0.5)
    gpu = cost_table(_frame(), CostSettings(gpus_per_rank=2, price_per_gpu_hour=3.0), ["ranks"])
    np.testing.assert_allclose(gpu["gpu_hours"], [4, 4, 32])
    np.testing.assert_allclose(gpu["cost"], [12, 12, 96])


def test_custom_formula_uses_nodes_and_parameters():
    settings = CostSettings(gpus_per_node=4, formula="T / 3600 * nodes * 10 + batch * 0")
    out = cost_table(_frame(), settings, ["ranks", "batch"])
    np.testing.assert_allclose(out["cost"], [1 * 1 * 10, 0.5 * 1 * 10, 2 * 2 * 10])
    assert (out["cost_lo"] <= out["cost_hi"]).all()


def test_formula_that_falls_with_time_keeps_bounds_ordered():
    out = cost_table(_frame(), CostSettings(formula="100000 - T"), ["ranks"])
    assert (out["cost_lo"] <= out["cost"]).all() and (out["cost"] <= out["cost_hi"]).all()


def test_user_errors():
    with pytest.raises(InputError, match="--gpus-per-node"):
        cost_table(_frame(), CostSettings(formula="nodes * T"), ["ranks"])
    with pytest.raises(InputError, match="only one"):
        CostSettings(price_per_core_hour=1, price_per_gpu_hour=1)
    with pytest.raises(InputError, match="positive"):
        CostSettings(cores_per_rank=0)
    with pytest.raises(InputError, match="--ranks-param"):
        cost_table(_frame().rename(columns={"ranks": "p"}), CostSettings(), ["p"])
