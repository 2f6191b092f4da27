"""The trace analyses on every real trace: no traceback, figures equal to a direct computation over
the JSON (or the SQLite export), and close to HolisticTraceAnalysis's where HTA is installed."""

from __future__ import annotations

import collections
import gzip
import importlib.util
import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from extradeep.errors import InputError
from extradeep.predictor import analyses as an

# tests/conftest.py (the real data's folders), loaded by path: "conftest" here is tests/predictor's
_spec = importlib.util.spec_from_file_location(
    "extradeep_tests_root_conftest", Path(__file__).parents[1] / "conftest.py"
)
ROOT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ROOT)
real_exports, real_kineto_traces = ROOT.real_exports, ROOT.real_kineto_traces
require_real, require_real_kineto = ROOT.require_real, ROOT.require_real_kineto

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# the two runs the diff test compares, as the module's fixture `real` read them (not read twice)
DIFF_PAIR = ("HTA__trace_diff_control_control.json.gz", "HTA__trace_diff_test_test.json.gz")
_PAIR_READ: dict = {}
HTA_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")


def _run_trace(path: Path):
    """an.run_trace(path), kept for the two runs of DIFF_PAIR."""
    if path.name not in DIFF_PAIR:
        return an.run_trace(path)
    if path.name not in _PAIR_READ:
        _PAIR_READ[path.name] = an.run_trace(path)
    return _PAIR_READ[path.name]


def _events(path) -> list[dict]:
    # exact decimals: microsecond timestamps of 1e15 and more lose nanoseconds as floats
    doc = json.load(gzip.open(path), parse_float=Decimal)
    return [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]


def _ns(x) -> int:
    return int((Decimal(x) * 1000).to_integral_value())


def _direct(path) -> dict:
    """Idle time per category, launches and comm/comp overlap computed straight from the JSON."""
    ev = _events(path)
    calls = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            calls.setdefault(e["args"]["correlation"], e)
    gpu = [e for e in ev if e.get("cat") in GPU_CATS]
    idle = collections.Counter()
    by_stream = collections.defaultdict(list)
    for e in gpu:
        a = e.get("args", {})
        by_stream[(a.get("device", e.get("pid")), a.get("stream", e.get("tid")))].append(e)
    for stream in by_stream.values():
        stream.sort(key=lambda e: (_ns(e["ts"]), _ns(e["dur"])))
        reach = None
        for e in stream:
            start = _ns(e["ts"])
            if reach is not None:
                gap = max(start - reach, 0.0) * 1e-9
                call = calls.get(e.get("args", {}).get("correlation"))
                host = call is not None and _ns(call["ts"]) > reach
                idle["host_wait" if host else "kernel_wait" if gap < an.CONSECUTIVE_KERNEL_DELAY else "other"] += gap
            reach = max(reach if reach is not None else start, start + _ns(e["dur"]))
    launches = []
    for e in gpu:
        call = calls.get(e.get("args", {}).get("correlation"))
        if call is not None:
            end = _ns(call["ts"]) + _ns(call["dur"])
            launches.append(
                (call["name"], _ns(call["dur"]) * 1e-9, _ns(e["dur"]) * 1e-9, max(_ns(e["ts"]) - end, 0) * 1e-9)
            )
    kern = [e for e in gpu if e["cat"] == "kernel"]
    t0 = min((_ns(e["ts"]) for e in kern), default=0)
    comm = _merged([e for e in kern if e["name"].lower().startswith("nccl")], t0)
    comp = _merged([e for e in kern if not e["name"].lower().startswith("nccl")], t0)
    return {"idle": idle, "launches": launches, "comm": comm, "overlap": an.intersection_length(comm, comp)}


def _merged(events, t0: int):
    """Merged kernel intervals, in integer ns since t0 (exact as floats)."""
    import pandas as pd

    starts = [_ns(e["ts"]) - t0 for e in events]
    frame = pd.DataFrame({"start": starts, "end": [s + _ns(e["dur"]) for s, e in zip(starts, events)]})
    return an.merge_intervals(frame)


@pytest.fixture(scope="module", params=[p.name for p in real_kineto_traces()] or [None])
def real(request):
    require_real_kineto()
    path = require_real_kineto(request.param)
    try:
        trace = _run_trace(path)
    except InputError as exc:  # a CPU-only trace: one line naming the file, no traceback
        assert "no GPU activity" in str(exc) and path.name in str(exc)
        return None
    return path, trace, _direct(path)


def test_idle_time_equals_a_direct_computation(real):
    if real is None:  # the CPU-only trace: nothing to analyse, and it said so in one line
        return
    path, trace, direct = real
    ours = an.idle_time(trace).groupby("idle_category")["idle_time_s"].sum()
    for cat in an.IDLE_CATEGORIES:
        assert ours.get(cat, 0.0) == pytest.approx(direct["idle"][cat], rel=1e-6, abs=1e-9), cat
    assert (an.idle_time(trace)["idle_time_s"] >= 0).all()


def test_launch_statistics_equal_a_direct_computation(real):
    if real is None:  # the CPU-only trace: nothing to analyse, and it said so in one line
        return
    path, trace, direct = real
    stats = an.kernel_launch_stats(trace)
    d = np.array([x[1:] for x in direct["launches"]]).reshape(-1, 3)
    assert len(stats) == len(d)
    tol = 2e-9 * len(d)  # the reader rounds microseconds to whole nanoseconds
    assert stats["cpu_duration_s"].sum() == pytest.approx(d[:, 0].sum(), rel=1e-6, abs=tol)
    assert stats["gpu_duration_s"].sum() == pytest.approx(d[:, 1].sum(), rel=1e-6, abs=tol)
    assert stats["launch_delay_s"].sum() == pytest.approx(d[:, 2].sum(), rel=1e-6, abs=tol)
    assert stats["short"].sum() == int((d[:, 1] < d[:, 0]).sum())
    summary = an.launch_summary(stats)
    assert summary["launches"].sum() == len(stats)


def test_overlap_equals_a_direct_computation(real):
    if real is None:  # the CPU-only trace: nothing to analyse, and it said so in one line
        return
    path, trace, direct = real
    ours = an.comm_overlap(trace)
    comm = float((direct["comm"][1] - direct["comm"][0]).sum()) * 1e-9
    assert ours["comm_time_s"].sum() == pytest.approx(comm, rel=1e-6, abs=1e-9)
    assert ours["overlap_s"].sum() == pytest.approx(direct["overlap"] * 1e-9, rel=1e-6, abs=1e-9)
    share = ours["overlap_share"].dropna()
    assert ((share >= 0) & (share <= 1)).all()


def test_kernel_sequences_are_counted_as_they_occur(real):
    if real is None:  # the CPU-only trace: nothing to analyse, and it said so in one line
        return
    path, trace, _ = real
    seq = an.kernel_sequences(trace, min_len=3, max_len=5, top=5)
    g = an.gpu_activities(trace)
    g = g[g["kind"] == "kernel"]
    for row in seq.itertuples(index=False):
        names = row.pattern.split(" | ")
        count = 0
        for _, s in g.groupby(["rank", "stream"]):
            arr = s["name"].astype(str).tolist()
            count += sum(arr[i : i + len(names)] == names for i in range(len(arr) - len(names) + 1))
        assert count == row.count and row.length == len(names)
        assert row.gpu_time_s > 0 and 0 <= row.host_wait_share <= 1


def test_diff_of_a_run_with_itself_changes_nothing(real):
    if real is None:  # the CPU-only trace: nothing to analyse, and it said so in one line
        return
    path, trace, _ = real
    diff = an.compare_runs(trace, trace)
    assert (diff["change"] == "same").all() and (diff["diff_s"] == 0).all()


def test_diff_of_the_two_hta_runs_names_what_got_slower():
    control, test = (require_real_kineto(name) for name in DIFF_PAIR)
    traces = {"control": _run_trace(control), "test": _run_trace(test)}
    diff = an.compare_runs(traces["control"], traces["test"])
    assert set(diff["change"]) <= {"slower", "faster", "new", "gone", "same"}
    # per step: the kernels' time in each run over its steps equals the JSON's sum
    for path, side in ((control, "control"), (test, "test")):
        trace = traces[side]
        steps = trace.steps[["epoch", "phase", "step"]].drop_duplicates().shape[0]
        total = diff.loc[diff["kind"] == "kernel", f"{side}_s"].sum() * steps
        direct = sum(_ns(e["dur"]) for e in _events(path) if e.get("cat") in GPU_CATS) * 1e-9
        assert total == pytest.approx(direct, rel=1e-6)
    slower = diff[diff["change"] == "slower"]
    assert len(slower) and (slower["test_s"] > slower["control_s"]).all()


@pytest.mark.parametrize("name", [p.name for p in real_exports()] or [None])
def test_every_analysis_runs_on_every_real_export(name):
    require_real()
    path = require_real(name)
    try:
        trace = an.run_trace(path)
    except InputError as exc:
        assert str(exc)  # one line naming the file, no traceback
        return
    for table in (
        an.idle_time(trace),
        an.kernel_launch_stats(trace),
        an.kernel_sequences(trace),
        an.comm_overlap(trace),
    ):
        assert not table.select_dtypes("number").lt(0).any().any()


def test_overlap_on_a_simulated_export_equals_sql(tmp_path):
    from extradeep.simulate import simulate

    simulate(tmp_path, params={"ranks": [2]}, repetitions=1, epochs=1, train_steps=2, val_steps=0, ddp=True)
    export = sorted(tmp_path.glob("*.sqlite"))[0]
    conn = sqlite3.connect(f"file:{export}?mode=ro&immutable=1", uri=True)
    rows = conn.execute(
        "SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
    ).fetchall()
    conn.close()
    import pandas as pd

    frame = pd.DataFrame(rows, columns=["start", "end", "name"])
    nccl = frame["name"].str.startswith("nccl")
    comm, comp = an.merge_intervals(frame[nccl]), an.merge_intervals(frame[~nccl])
    ours = an.comm_overlap(export).iloc[0]
    assert ours["comm_time_s"] == pytest.approx(float((comm[1] - comm[0]).sum()) * 1e-9, rel=1e-9)
    assert ours["overlap_s"] == pytest.approx(an.intersection_length(comm, comp) * 1e-9, rel=1e-9)


@pytest.fixture(scope="module")
def hta():
    return pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed (optional)")


def test_idle_launch_and_overlap_agree_with_hta(real, hta, tmp_path):
    if real is None:  # the CPU-only trace: nothing to analyse, and it said so in one line
        return
    import logging
    import shutil
    import warnings

    path, trace, _ = real
    shutil.copy(path, tmp_path)
    logging.disable(logging.CRITICAL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = hta.TraceAnalysis(trace_dir=str(tmp_path), include_last_profiler_step=True)
        rank = next(iter(ta.t.traces))
        hidle = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)[0]
        hlaunch = ta.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
        hover = ta.get_comm_comp_overlap(visualize=False)
    logging.disable(logging.NOTSET)
    ours = an.idle_time(trace).groupby("idle_category")["idle_time_s"].sum()
    theirs = hidle.groupby("idle_category")["idle_time"].sum() / 1e6  # HTA keeps the trace's microseconds
    assert ours.get("host_wait", 0) == pytest.approx(theirs.get("host_wait", 0), rel=0.02, abs=1e-3)
    stats = an.kernel_launch_stats(trace)
    stats = stats[stats["launch_call"].isin(HTA_LAUNCHES)]
    assert len(stats) == len(hlaunch)
    # HTA keeps whole microseconds: up to 1 us per launch apart
    assert stats["launch_delay_s"].sum() == pytest.approx(hlaunch["launch_delay"].sum() / 1e6, abs=1e-6 * len(stats))
    share = an.comm_overlap(trace)["overlap_share"].iloc[0]
    if np.isfinite(share):
        assert 100 * share == pytest.approx(float(hover["comp_comm_overlap_pctg"].iloc[0]), abs=2.5)
