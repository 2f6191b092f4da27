"""Critical path, its breakdown, T1-T5 overheads and the kernel-sum baseline."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.predictor.critical_path import CLASSES
from extradeep.predictor.overheads import top_level


def test_breakdown_partitions_each_steps_time(ddp_prediction):
    b = ddp_prediction.breakdown
    total = b[list(CLASSES)].sum(axis=1)
    assert np.allclose(total, b["span"], rtol=1e-6, atol=1e-9)
    assert np.allclose(b[[c + "_share" for c in CLASSES]].sum(axis=1), 1.0)
    # the slowest rank's replayed step time is the span of the critical path
    steps = ddp_prediction.steps[~ddp_prediction.steps["warmup"]]
    slowest = steps.groupby("step_id")["replayed"].max()
    assert b["span"].max() == pytest.approx(slowest.max(), rel=1e-6)


def test_critical_path_is_a_chain_in_time(ddp_prediction):
    cp = ddp_prediction.critical_path
    for _, path in cp.groupby("step_id"):
        ends = path["end"].to_numpy()  # latest first
        starts = path["start"].to_numpy()
        assert np.all(np.diff(ends) <= 1e-12)
        assert np.all(starts[:-1] + 1e-12 >= ends[1:] + np.minimum(0, starts[:-1] - ends[1:]))


def test_gpu_bound_ddp_steps_are_mostly_compute(ddp_prediction):
    b = ddp_prediction.breakdown
    assert (b["compute_share"] > 0.5).all()
    # the data-loading wait (pthread_cond_wait on the main thread) is idle, not CPU overhead
    train = b[b["step_id"].isin(ddp_prediction.steps.query("phase == 'train'")["step_id"])]
    assert (train["os_wait"] > 0).all() and (train["os_wait"] <= train["idle"] + 1e-12).all()
    # the ops on the path that take time are kernels launched by the framework
    cp = ddp_prediction.critical_path
    assert cp.loc[cp["class"] == "compute", "contribution"].sum() > 0


def test_launch_bound_what_if_moves_time_to_cpu(ddp_prediction):
    from extradeep.predictor.critical_path import breakdown, critical_path

    g = ddp_prediction.graph
    res = ddp_prediction.results["cpu=0.5"]
    sink = int(np.argmax(res.end))
    path = critical_path(g, res, sink, 0.0)
    shares = breakdown(path)
    assert sum(shares[c] for c in CLASSES) == pytest.approx(res.end[sink], rel=1e-6)
    assert 0 <= shares["os_wait"] <= shares["idle"] + 1e-12


def test_kernel_sum_baseline_underestimates_the_step_time(ddp_prediction):
    s = ddp_prediction.summary
    base = s[s["scenario"] == "measured durations"]
    assert (base["kernel_sum_baseline"] < base["measured"]).all()
    assert (base["kernel_sum_baseline"] > 0.5 * base["measured"]).all()


def test_t4_is_the_runtime_call_duration(ddp_prediction, ddp_run):
    from extradeep.predictor.trace import load_trace

    ops = load_trace(sorted(ddp_run.glob("*.sqlite"))).ops
    calls = ops[ops["kind"] == "runtime"]
    want = ((calls["end"] - calls["start"]) * 1e-9).groupby(calls["name"]).mean()
    t4 = ddp_prediction.overheads.query("type == 'T4'").set_index("name")["mean"]
    assert np.allclose(t4.reindex(want.index), want)


def test_t1_to_t5_from_framework_op_ranges(real_2gpu):
    _, pred = real_2gpu
    ov = pred.overheads
    assert {"T1", "T2", "T3", "T4", "T5"} <= set(ov["type"])
    assert not ov["name"].str.contains("op_id = ").any()
    t = ov[ov["type"].isin(["T2", "T3", "T5"])]
    assert (t["mean"] >= -2e-5).all()  # CPU-side gaps: non-negative up to clock jitter


def test_top_level_ranges_are_not_nested():
    import pandas as pd

    r = pd.DataFrame(
        {"rank": 0, "queue": "t", "name": list("abcde"), "start": [0, 1, 2, 10, 11], "end": [9, 3, 2, 20, 12]}
    )
    assert list(top_level(r)["name"]) == ["a", "d"]


def _assert_non_negative_partition(pred):
    b = pred.breakdown
    assert (b[list(CLASSES)] >= 0).all().all()
    assert np.allclose(b[[c + "_share" for c in CLASSES]].sum(axis=1), 1.0)
    cp = pred.critical_path
    assert (cp["contribution"] >= 0).all() and (cp["wait"] >= 0).all()
    per_step = cp.groupby("step_id")[["contribution", "wait"]].sum().sum(axis=1)
    assert np.allclose(per_step.reindex(b["step_id"]).to_numpy(), b["span"].to_numpy(), rtol=1e-9, atol=1e-12)


def test_shares_are_non_negative_when_ops_overlap_their_successor(real_2gpu):
    # the real slice has GPU ops that start a few ns before their predecessor's end (negative
    # lags): the overlap was counted twice and showed up as negative idle time
    _, pred = real_2gpu
    _assert_non_negative_partition(pred)


def test_shares_are_non_negative_on_the_simulated_run(ddp_prediction):
    _assert_non_negative_partition(ddp_prediction)


def test_t1_gaps_stay_inside_one_step(ddp_prediction):
    # a gap between the last op of one step and the first of the next is the loop's time between
    # steps (data loading, an epoch boundary), not the later op's overhead
    longest_step = ddp_prediction.steps["measured"].max()
    t1 = ddp_prediction.overheads.query("type == 'T1'")
    assert len(t1) and (t1["p95"] < longest_step).all()


def test_t1_skips_gaps_across_step_boundaries():
    import pandas as pd

    from extradeep.predictor.overheads import overhead_table

    ranges = pd.DataFrame(
        {
            "rank": 0,
            "queue": "cpu/t1",
            "name": ["a", "b", "c", "d"],
            "start": [0, 10, 100, 130],
            "end": [5, 20, 110, 140],
        }
    )
    steps = pd.DataFrame({"rank": [0, 0], "start": [0, 100], "end": [50, 150]})
    ops = pd.DataFrame(columns=["rank", "queue", "is_gpu", "kind", "name", "start", "end"]).astype(
        {"is_gpu": bool, "start": np.int64, "end": np.int64}
    )
    t1 = overhead_table(ops, ranges, {}, steps).query("type == 'T1'").set_index("name")["total"]
    assert t1.to_dict() == pytest.approx({"b": 5e-9, "d": 20e-9})  # not c: its gap spans the boundary
    no_steps = overhead_table(ops, ranges, {}).query("type == 'T1'").set_index("name")["total"]
    assert no_steps["c"] == pytest.approx(80e-9)
