import numpy as np
import pandas as pd
import pytest

from extradeep.analysis.budget import BudgetLimits, budget_search
from extradeep.analysis.cost import CostSettings
from extradeep.analysis.points import parse_fixed, parse_values, point_grid
from extradeep.errors import InputError

RANKS = pd.DataFrame({"ranks": np.arange(2, 65, 2, dtype=float)})
AMDAHL = lambda p: 100.0 + 6400.0 / p  # seconds per epoch


def _search(law, limits, scaling="strong", **cost):
    return budget_search(law(AMDAHL), RANKS, ["ranks"], limits, CostSettings(**cost), {"ranks": 2}, scaling)


def test_strong_scaling_valid_interval_and_best_configurations(law):
    # time/epoch = 100 + 6400/p  <= 300 s  <=>  p >= 32
    # core-hours/epoch = (100 p + 6400)/3600 <= 4  <=>  p <= 80, so everything from 32 up is valid
    result = _search(law, BudgetLimits(max_time=300.0, max_cost=4.0))
    assert result.found
    assert result.intervals[["from", "to"]].values.tolist() == [[32.0, 64.0]]
    best = result.best.set_index("criterion")
    assert best.loc["cost", "ranks"] == 32 and best.loc["efficiency", "ranks"] == 32
    assert best.loc["time", "ranks"] == 64
    T32 = 100 + 6400 / 32
    assert best.loc["efficiency", "efficiency"] == pytest.approx((100 + 3200) / T32 * 2 / 32)


def test_limits_for_several_epochs_scale_time_and_cost(law):
    # 10 epochs in 3000 s -> same as 300 s per epoch; cost limit 40 for 10 epochs -> p <= 80.
    one = _search(law, BudgetLimits(max_time=300.0, max_cost=4.0))
    ten = _search(law, BudgetLimits(max_time=3000.0, max_cost=40.0, epochs=10))
    assert one.intervals[["from", "to"]].values.tolist() == ten.intervals[["from", "to"]].values.tolist()
    np.testing.assert_allclose(ten.table["total_cost"], one.table["total_cost"] * 10)


def test_cost_limit_alone_gives_upper_interval(law):
    # core-hours = (100 p + 6400)/3600 <= 2.5 <=> p <= 26
    result = _search(law, BudgetLimits(max_cost=2.5))
    assert result.intervals[["from", "to"]].values.tolist() == [[2.0, 26.0]]


def test_nothing_valid_says_which_limit_fails_and_by_how_much(law):
    result = _search(law, BudgetLimits(max_time=150.0))
    assert not result.found and result.best.empty and result.intervals.empty
    # fastest: p=64 -> 200 s, 33.3% over 150 s
    assert "time limit" in result.failure and "ranks=64" in result.failure and "33.3%" in result.failure
    assert "cost limit" not in result.failure


def test_both_limits_met_separately_but_never_together(law):
    # time <= 300 needs p >= 32; cost <= 2.5 needs p <= 26
    result = _search(law, BudgetLimits(max_time=300.0, max_cost=2.5))
    assert not result.found
    assert "never both" in result.failure and "ranks=32" in result.failure and "ranks=26" in result.failure


def test_cost_limit_fails_with_money(law):
    result = _search(law, BudgetLimits(max_cost=0.01), price_per_gpu_hour=2.0)
    # cheapest: p=2 -> 3300 s * 2 GPUs = 1.833 GPU-h -> 3.667 money
    assert "cost limit" in result.failure and "ranks=2" in result.failure and "3.667" in result.failure


def test_weak_scaling_prefers_the_smallest_allocation(law):
    result = budget_search(
        law(lambda p: 50.0 + np.log2(p)),
        RANKS,
        ["ranks"],
        BudgetLimits(max_time=60.0),
        CostSettings(),
        {"ranks": 2},
        "weak",
    )
    best = result.best.set_index("criterion")
    assert best.loc["efficiency", "ranks"] == 2 and best.loc["cost", "ranks"] == 2
    assert result.table.loc[0, "efficiency"] == pytest.approx(1.0)


def test_upper_bound_validity_is_reported(law):
    result = budget_search(
        law(AMDAHL, width=0.6), RANKS, ["ranks"], BudgetLimits(max_time=300.0), CostSettings(), {"ranks": 2}
    )
    assert result.found and not result.table["valid_upper"].any()
    assert result.notes and "prediction interval" in result.notes[0]


def test_bad_limits_and_empty_candidates():
    with pytest.raises(InputError, match="max_time.*and/or a cost limit") as info:
        BudgetLimits()
    assert info.value.field == "max_time"  # the CLI asks for --max-time and/or --max-cost before this
    with pytest.raises(InputError, match="positive"):
        BudgetLimits(max_time=-1)
    with pytest.raises(InputError, match="candidate"):
        budget_search(None, RANKS.iloc[:0], ["ranks"], BudgetLimits(max_time=1), CostSettings(), {"ranks": 2})


def test_two_parameters_give_intervals_per_fixed_value(law):
    grid = pd.concat([point_grid(parse_values("2:8:2"), ["ranks", "batch"], "ranks", {"batch": b}) for b in (32, 64)])
    model = law(lambda X: X[:, 1] * 10.0 / X[:, 0])
    result = budget_search(
        model, grid, ["ranks", "batch"], BudgetLimits(max_time=200.0), CostSettings(), {"ranks": 2, "batch": 32}
    )
    spans = result.intervals.set_index("batch")[["from", "to"]]
    assert spans.loc[32.0].tolist() == [2.0, 8.0] and spans.loc[64.0].tolist() == [4.0, 8.0]


def test_parse_values_lists_ranges_and_errors():
    assert parse_values("16, 32,64") == [16, 32, 64]
    assert parse_values("2:10:4,3") == [2, 3, 6, 10]
    assert parse_values("1:3") == [1, 2, 3]
    for bad in ("", "a", "4:2", "2:10:0", "-1", "1:2:3:4", "1:1e9:1e-3"):
        with pytest.raises(InputError):
            parse_values(bad)
    assert parse_fixed(["batch=64"], ["ranks", "batch"]) == {"batch": 64.0}
    with pytest.raises(InputError):
        parse_fixed(["gpus=4"], ["ranks"])
    with pytest.raises(InputError, match="--at batch"):
        point_grid([2, 4], ["ranks", "batch"], "ranks", {})


def test_two_parameter_search_says_what_stays_fixed_and_names_the_unit_once(law):
    """The search varies ranks only; the result says batch stays at its value. A failing cost limit
    reads "5 (currency units)", not "5 cost (currency units)"."""
    grid = pd.DataFrame({"ranks": [2.0, 4.0, 8.0], "batch": [64.0] * 3})
    model = law(lambda X: 100.0 + 6400.0 / np.atleast_2d(X)[:, 0])
    result = budget_search(
        model,
        grid,
        ["ranks", "batch"],
        BudgetLimits(max_cost=0.001),
        CostSettings(price_per_gpu_hour=2.5),
        {"ranks": 2.0, "batch": 64.0},
    )
    assert any("varies ranks only" in n and "batch=64 stays fixed" in n for n in result.notes)
    assert "(currency units)" in result.failure and "cost (currency units)" not in result.failure
