"""Simulated profiling campaigns: the advisor reaches a precise 4x prediction for fewer GPU-hours
than the default grid, and is at least as accurate against the simulator's truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from extradeep.simulate.campaign import (
    Scenario,
    SimulatedProfiler,
    _gp_hyperparameters,
    _gp_posterior_variance,
    compare,
    gp_next,
)


def test_gp_strategy_picks_the_least_known_candidate_per_cost():
    profiler = SimulatedProfiler(Scenario("gp", max_ranks=16, seed=4))
    try:
        frame = pd.DataFrame(
            [(r, k, profiler.measure(r, k)) for r in (2, 3, 4) for k in (1, 2)], columns=["ranks", "rep", "value"]
        )
    finally:
        profiler.close()
    z = np.log2(frame["ranks"].to_numpy(float))
    y = np.log(frame["value"].to_numpy(float))
    theta = _gp_hyperparameters(z, (y - y.mean()) / y.std())
    var = _gp_posterior_variance(z, np.log2([2.0, 3.0, 4.0, 16.0]), theta)
    assert var[3] > var[:3].max()  # far from every measurement: least known
    # ... and per cost: a run at 16 ranks priced like one at 2 ranks is the pick
    cheap_far = lambda ranks: (np.ones(len(ranks)), np.where(np.asarray(ranks) > 4, 0.01, 1.0))  # noqa: E731
    assert gp_next(frame, [2, 3, 4, 16], cheap_far) == 16


@pytest.mark.slow
def test_advisor_is_cheaper_than_the_grid_at_equal_or_better_accuracy():
    # the compute-bound scenario of benchmarks/bench_advisor.py (allocation up to 32 ranks, 8 per node)
    scenario = Scenario("compute-bound", max_ranks=32, kernel_scale={"*gemm*": 2.0}, bandwidth_scale=8.0, seed=1)
    table = compare(scenario, goal_pct=5.0, strategies=("grid", "advisor")).set_index("strategy")
    grid, advisor = table.loc["grid"], table.loc["advisor"]
    assert advisor["reached"] and advisor["largest"] <= 32
    assert advisor["gpu_hours"] < grid["gpu_hours"]
    # accuracy against the simulator's truth at 40 ranks: within the goal, and no worse than the grid's
    assert advisor["error_pct"] <= max(grid["error_pct"], 5.0)
