"""The strategy search against simulator truth: the bucket layout it proposes, simulated, is within
2 % of the best of an exhaustive sweep of layouts, and its predicted gain within 3 percentage points
of the simulated gain; a compute-bound run gets nothing; kernel fusion and memory limits."""

from __future__ import annotations

import re

import pytest

from extradeep import columns as C
from extradeep.errors import InputError
from extradeep.predictor.optimize import StrategySearch, optimize
from extradeep.simulate import simulate
from extradeep.simulate.sweep import all_layouts, bucket_sweep

GRADIENTS = 8
RUN = dict(params={"ranks": [4]}, repetitions=1, epochs=2, train_steps=4, val_steps=1, ddp=True, seed=5)
# DDP runs whose default buckets (bucket_cap_mb=25) leave communication exposed
EXPOSED = {
    "uniform-bw0.3": dict(gradient_profile="uniform", nccl_bandwidth_scale=0.3),
    "resnet-bw0.3": dict(gradient_profile="resnet", nccl_bandwidth_scale=0.3),
    "uniform-bw0.5-kineto": dict(gradient_profile="uniform", nccl_bandwidth_scale=0.5, formats=("kineto",)),
}


def _truth_kwargs(changes: dict) -> dict:
    return {k: v for k, v in changes.items() if k in ("gradient_profile", "nccl_bandwidth_scale", "kernel_scale")}


def _layout_of(row) -> list[int]:
    """The bucket layout a strategy row describes (its detail: 'N bucket(s) of [..] gradients')."""
    return [int(x) for x in re.search(r"of \[([^\]]*)\]", row[C.DETAIL]).group(1).split(",")]


@pytest.fixture(scope="module", params=list(EXPOSED))
def exposed(request, tmp_path_factory):
    changes = EXPOSED[request.param]
    out = tmp_path_factory.mktemp(request.param)
    sim = simulate(out, gradients=GRADIENTS, **RUN, **changes)
    search = StrategySearch().fit(out)
    sweep = bucket_sweep(list(all_layouts(GRADIENTS)), gradients=GRADIENTS, **_truth_kwargs(changes))
    return sim, search, sweep


def test_the_best_layout_simulated_is_within_2_percent_of_the_exhaustive_best(exposed):
    sim, search, sweep = exposed
    table = search.strategies_
    buckets = table[table[C.STRATEGY_TYPE] == "buckets"]
    assert len(buckets), search.verdict_
    best = buckets.iloc[0]
    truth = sweep.set_index("layout")["step_s"]
    simulated = truth[tuple(_layout_of(best))]
    assert simulated <= 1.02 * truth.min()
    # the measured default layout (DDP's 25 MB rule) is in the sweep: the predicted gain is the simulated one
    default = truth[tuple(sim.truth["points"][0]["gradients"]["layout"])]
    simulated_gain = 1 - simulated / default
    assert best[C.GAIN] == pytest.approx(simulated_gain, abs=0.03)
    # the interval holds the prediction, and the setting names DDP's knob where a cap builds the layout
    assert best[C.LOWER_S] <= best[C.PREDICTED_S] <= best[C.UPPER_S]
    assert "bucket_cap_mb" in best[C.SETTING]


def test_a_proposed_bucket_cap_rebuilds_its_layout_in_ddp(exposed):
    from extradeep.predictor.buckets import MIB, cap_layout
    from extradeep.simulate.gradients import resolve_layout

    sim, search, _ = exposed
    sizes = sim.truth["points"][0]["gradients"]["sizes"]
    for row in search.strategies_.itertuples(index=False):
        m = re.fullmatch(r"DDP\(model, \.\.\., bucket_cap_mb=([\d.]+)\)", getattr(row, C.SETTING))
        if m:  # what the user sets gives the layout the row predicts
            layout = _layout_of(row._asdict())
            assert cap_layout(sizes, float(m.group(1)) * MIB) == layout
            assert resolve_layout(sizes, bucket_cap_mb=float(m.group(1))) == layout


def test_the_table_is_ranked_and_says_what_moved_on_the_critical_path(exposed):
    _, search, _ = exposed
    table = search.strategies_
    assert list(table.columns) == C.STRATEGY_COLUMNS
    proposed = table[table[C.PROPOSED]]
    assert proposed[C.PREDICTED_S].is_monotonic_increasing
    assert (table[C.PREDICTED_S] > 0).all() and (table[C.LOWER_S] >= 0).all()
    assert (proposed[C.GAIN] >= 0.01).all()
    # before/after bars: one row per strategy plus the measured run, classes that add up to the step
    bars = search.breakdowns_.set_index("strategy")
    total = bars.loc["measured"].sum()
    assert total == pytest.approx(search.measured_step_, rel=0.05)
    if len(proposed):
        assert "communication" in proposed[C.CRITICAL_PATH].iloc[0]


@pytest.fixture(scope="module")
def compute_bound(tmp_path_factory):
    out = tmp_path_factory.mktemp("compute_bound")
    simulate(out, gradients=GRADIENTS, nccl_bandwidth_scale=10.0, foreach=True, **RUN)
    return out


def test_a_compute_bound_run_gets_nothing_and_the_reason(compute_bound):
    table = optimize(compute_bound)
    verdict = table.attrs["verdict"]
    assert verdict.startswith("nothing to gain above 1 %")
    assert "compute-bound" in verdict
    assert not table[C.PROPOSED].any()


def test_fusing_a_launch_bound_optimizer_predicts_the_foreach_run(tmp_path):
    """The optimizer's 120 tiny kernels, launch-bound behind a host sync, against the same run with
    foreach=True (one launch for the same GPU time) as truth."""
    knobs = dict(gradients=GRADIENTS, host_sync=True, kernel_scale={"multi_tensor*": 0.01})
    simulate(tmp_path, **RUN, **knobs)
    table = optimize(tmp_path)
    fusion = table[table[C.STRATEGY_TYPE] == "fusion"]
    assert len(fusion) and fusion.iloc[0][C.PROPOSED]
    assert "foreach=True" in fusion.iloc[0][C.SETTING]
    truth = {
        f: bucket_sweep(
            [_default_layout()], gradients=GRADIENTS, host_sync=True, foreach=f, kernel_scale=knobs["kernel_scale"]
        )["step_s"][0]
        for f in (False, True)
    }
    assert fusion.iloc[0][C.GAIN] == pytest.approx(1 - truth[True] / truth[False], abs=0.01)


def _default_layout():
    from extradeep.simulate.catalogue import PARAM_BYTES
    from extradeep.simulate.gradients import gradient_sizes, resolve_layout

    return resolve_layout(gradient_sizes(GRADIENTS, PARAM_BYTES))


@pytest.fixture(scope="module")
def exposed_small(tmp_path_factory):
    """One DDP run with exposed communication, for the memory checks."""
    out = tmp_path_factory.mktemp("exposed_small")
    simulate(out, gradients=6, **{**RUN, "train_steps": 3}, **EXPOSED["uniform-bw0.3"])
    return out


def test_memory_short_offers_recomputation_and_accumulation_and_refuses_the_rest(exposed_small):
    folder = exposed_small
    short = {"parameters": 23.5e6, "bytes_per_parameter": 16, "activation_gb": 40.0, "gpu_memory_gb": 24}
    search = StrategySearch(memory=short).fit(folder)
    table = search.strategies_
    memory = table[table[C.STRATEGY_TYPE] == "memory"]
    assert set(memory[C.STRATEGY].str.split().str[0]) == {"recompute", "gradient"}
    assert memory[C.FITS].astype(bool).all() and (memory[C.MEMORY_GB] <= 24).all()
    assert memory[C.PROPOSED].all()  # the run needs one of them, whatever it costs
    assert search.verdict_.startswith("memory is short") and memory.iloc[0][C.SETTING] in search.verdict_
    others = table[table[C.STRATEGY_TYPE] != "memory"]
    assert (~others[C.FITS].astype(bool)).all() and not others[C.PROPOSED].any()
    assert any("gradient_accumulation_steps=" in s for s in memory[C.SETTING])
    # the peak the description implies, and the least recomputation and accumulation that fit
    peak = 23.5e6 * 16 / 1e9 + 40.0
    assert search.memory_.peak / 1e9 == pytest.approx(peak)
    acc = memory[memory[C.STRATEGY].str.startswith("gradient")].iloc[0]
    k = int(re.search(r"over (\d+)", acc[C.STRATEGY]).group(1))
    assert 23.5e6 * 16 / 1e9 + 40.0 / k <= 24 < 23.5e6 * 16 / 1e9 + 40.0 / (k // 2)


def test_memory_that_fits_changes_nothing_and_bad_descriptions_are_one_line(exposed_small, tmp_path):
    roomy = {"parameters": 23.5e6, "activation_gb": 5.0, "gpu_memory_gb": 80}
    table = StrategySearch(memory=roomy).fit(exposed_small).strategies_
    assert not (table[C.STRATEGY_TYPE] == "memory").any()
    assert table[C.FITS].astype(bool).all()
    bad = tmp_path / "model.toml"
    bad.write_text("parameters = 1e6\nlayers = 12\n")
    with pytest.raises(InputError, match="unknown key"):  # before any profile is read
        StrategySearch(memory=bad)
    bad.write_text("parameters = [1")
    with pytest.raises(InputError, match="TOML"):
        StrategySearch(memory=bad)
    with pytest.raises(InputError, match="gpu_memory"):
        StrategySearch(gpu_memory_gb=0)


def test_bad_options_are_refused_before_any_reading():
    with pytest.raises(InputError, match="strategy kind"):
        StrategySearch(kinds=("buckets", "quantum"))
    with pytest.raises(InputError, match="min_gain"):
        StrategySearch(min_gain=1.5)


def test_memory_recorded_in_the_profile_is_read_and_checked(tmp_path):
    """Kineto traces with PyTorch's [memory] events (the simulator writes 16 B per parameter plus
    30 GB of activations): the budget is read from them; on a 24 GB GPU it is short."""
    from extradeep.predictor.memory import memory_budget
    from extradeep.simulate.catalogue import PARAM_BYTES

    simulate(tmp_path, gradients=6, activation_gb=30.0, formats=("kineto",), **{**RUN, "train_steps": 2})
    traces = sorted(tmp_path.glob("*.pt.trace.json.gz"))
    budget = memory_budget(traces)
    assert budget.source == "profile"
    assert budget.peak == pytest.approx(4 * PARAM_BYTES + 30e9) and budget.activations == pytest.approx(30e9)
    assert budget.capacity == pytest.approx(42505273344)  # the A100-40GB of deviceProperties
    assert not budget.short
    search = StrategySearch(gpu_memory_gb=24).fit(tmp_path)
    memory = search.strategies_[search.strategies_[C.STRATEGY_TYPE] == "memory"]
    assert len(memory) == 2 and memory[C.FITS].astype(bool).all()
    # the least recomputation that fits: a quarter of 30 GB is not enough to free, 25 % steps are
    share = int(re.search(r"recompute (\d+) %", memory[C.STRATEGY].iloc[0] + " " + memory[C.STRATEGY].iloc[1]).group(1))
    assert 4 * PARAM_BYTES + 30e9 * (1 - share / 100) <= 24e9 < 4 * PARAM_BYTES + 30e9 * (1 - (share - 25) / 100)
