"""Owners of the critical path: every second of it attributed to the ranges around it."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.predictor.critical_path import CLASSES
from extradeep.predictor.owners import hot_path


def _check_partition(pred):
    """Level-1 owners partition the path: per class and in all, they sum to the breakdown."""
    first = pred.owners[pred.owners["level"] == 1]
    b = pred.breakdown
    assert first["seconds"].sum() == pytest.approx(b["span"].sum(), rel=1e-9)
    for cls in CLASSES:
        assert first[cls].sum() == pytest.approx(b[cls].sum(), rel=1e-6, abs=1e-12)
    assert (pred.owners[list(CLASSES)] >= -1e-15).all().all()
    # an owner inside another never holds more than it
    by_owner = pred.owners.set_index("owner")["seconds"]
    inner = pred.owners[pred.owners["level"] > 1]
    assert (inner["seconds"].to_numpy() <= by_owner.reindex(inner["parent"]).to_numpy() * (1 + 1e-9)).all()


def test_owners_partition_the_simulated_path(ddp_prediction):
    _check_partition(ddp_prediction)


def test_owners_partition_the_real_2gpu_path(real_2gpu):
    _check_partition(real_2gpu[1])


def _json_events(plain_json, path):
    return [e for e in plain_json(path)["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]


def test_cpu_bound_step_names_its_owner(real_kineto, plain_json, predicted):
    """The two sampled ranks of the 128-rank job: the analysed step (ProfilerStep#552) is CPU-bound,
    so every instant of the slowest rank's main thread is on the path and each top-level annotation
    owns exactly its wall time in the JSON; the largest is the optimizer, and inside it
    Optimizer.step#Shampoo.step."""
    paths = [real_kineto(f"HTA__trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
    pred = predicted(*paths)
    assert pred.breakdown["cpu_overhead_share"].min() > 0.99
    slowest = int(pred.steps.sort_values("measured")["rank"].iloc[-1])
    events = _json_events(plain_json, paths[slowest])
    step = next(e for e in events if e["name"] == "ProfilerStep#552")
    lo, hi = step["ts"], step["ts"] + step["dur"]
    annotations = {}
    for e in events:  # the outermost "## ... ##" annotations of the step on its thread
        if e.get("cat") == "user_annotation" and e["tid"] == step["tid"] and lo <= e["ts"] < hi:
            annotations.setdefault(e["name"], []).append((e["ts"], e["ts"] + e["dur"]))
    outer = {
        name: float(sum(b - a for a, b in spans)) * 1e-6
        for name, spans in annotations.items()
        if name.startswith("## ")
        and not any(
            o != name and any(p <= a and b <= q for a, b in spans for p, q in others)
            for o, others in annotations.items()
        )
    }
    first = pred.owners[pred.owners["level"] == 1].set_index("owner")
    for name, seconds in outer.items():
        assert first.at[name, "seconds"] == pytest.approx(seconds, rel=0.01), name
    assert first.index[0] == "## optimizer ##"
    assert hot_path(pred.owners, "## optimizer ##")[0][0] == "Optimizer.step#Shampoo.step"
    # the backward ran on the autograd thread: its operators are owned inside the main thread's annotation
    inside = pred.owners[pred.owners["parent"] == "## backward ##"]["name"]
    assert inside.str.startswith("autograd::engine::evaluate_function").any()


def test_kernel_time_belongs_to_the_range_around_its_launch(real_kineto, plain_json, predicted):
    """trace_diff_test: each kernel's time on the path is owned by the outermost operator or
    annotation around the call that launched it, found here in the JSON by correlation id (on the
    launching thread, or on the main thread while the autograd thread runs the backward)."""
    path = real_kineto("HTA__trace_diff_test_test.json.gz")
    pred = predicted(path)
    events = _json_events(plain_json, path)
    main = next(e["tid"] for e in events if e["name"].startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: (e["ts"], e["tid"]) for e in events if e.get("cat") == "cuda_runtime"}
    ranges = sorted(
        (e["ts"], e["ts"] + e["dur"], e["tid"], e["name"])
        for e in events
        if e.get("cat") in ("cpu_op", "user_annotation") and not e["name"].startswith("ProfilerStep#") and e["dur"] > 0
    )
    lo, hi, tids = (np.array([float(r[k]) for r in ranges]) for k in range(3))

    def outermost(corr):
        t, tid = launch[corr]
        around = np.flatnonzero((lo <= float(t)) & (float(t) < hi) & np.isin(tids, [tid, main]))
        return ranges[around[0]][3] if len(around) else None  # sorted by start: the first is outermost

    cp = pred.critical_path[pred.critical_path["class"] == "compute"]
    corr = pred.graph.nodes["corr"].to_numpy()[cp["node"].to_numpy()]
    expected = {}
    for c, seconds, name in zip(corr, cp["contribution"], cp["name"]):
        owner = outermost(int(c)) or name
        expected[owner] = expected.get(owner, 0.0) + seconds
    first = pred.owners[pred.owners["level"] == 1].set_index("owner")["compute"]
    first = first[first > 0]
    assert sorted(first.index) == sorted(expected)
    for owner, seconds in expected.items():
        assert first[owner] == pytest.approx(seconds, rel=1e-6), owner
