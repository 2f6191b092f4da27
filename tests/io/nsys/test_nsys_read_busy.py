"""read_export's "gpu busy" region (union of GPU activity per step) against an independent oracle:
plain Python interval merging over the SQL rows, and the simulator's known data-loading gap."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.columns import BUSY_REGION
from extradeep.io.nsys.read import read_export
from extradeep.io.sums import covered_time

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def naive_covered(intervals, lo, hi) -> float:
    """Oracle: clip every interval to [lo, hi), merge them in a Python loop, add the lengths."""
    clipped = sorted((max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo))
    total, cur_s, cur_e = 0, None, None
    for s, e in clipped:
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return (total + (0 if cur_e is None else cur_e - cur_s)) * 1e-9


def test_covered_time_equals_loop_oracle():
    rng = np.random.default_rng(3)
    start = rng.integers(0, 10_000, 400)
    end = start + rng.integers(1, 300, 400)
    lo = np.array([0, 500, 2_000, 7_000, 9_900, 20_000])
    hi = np.array([500, 1_700, 6_500, 9_000, 12_000, 30_000])
    got = covered_time(start, end, lo, hi) * 1e-9
    for k in range(len(lo)):
        assert got[k] == pytest.approx(naive_covered(zip(start, end), lo[k], hi[k]), abs=1e-15)


def test_busy_time_per_step_matches_sql_oracle(sim_profiler, sql):
    """DDP-like schedule: NCCL kernels overlap the backward pass on another stream, so the sum of
    GPU durations exceeds the union; the reader's busy time equals the oracle's union per step,
    and step - busy includes the simulator's 3 ms data-loading gap (the sum-based idle is 0)."""
    from extradeep.io.nsys import events
    from extradeep.io.sqlite import open_readonly
    from extradeep.io.steps import find_steps

    path = sorted(sim_profiler.glob("*.sqlite"))[-1]
    steps = find_steps(events.nvtx(open_readonly(path)), None, path).steps
    intervals = [row for table in GPU_TABLES for row in sql(path, f"SELECT start, end FROM {table}")]
    df = read_export(path)
    busy = df[(df["region"] == BUSY_REGION) & (df["metric"] == "time")].set_index(["epoch", "phase", "step"])["value"]
    step_time = df[(df["region"] == "step") & (df["metric"] == "time")].set_index(["epoch", "phase", "step"])["value"]
    gpu = df[df["kind"].isin(["kernel", "memcpy", "memset"]) & (df["metric"] == "time") & (df["phase"] != "between")]
    summed = gpu.groupby(["epoch", "phase", "step"])["value"].sum()
    assert len(busy) == len(steps) > 0
    for s in steps.itertuples(index=False):
        key = (s.epoch, s.phase, s.step)
        assert busy[key] == pytest.approx(naive_covered(intervals, s.start, s.end), rel=1e-12)
        assert busy[key] <= step_time[key] + 1e-12
    train = [k for k in busy.index if k[1] == "train"]
    overlapped = [k for k in train if summed[k] > busy[k] * 1.01]
    assert overlapped, "the DDP schedule should overlap streams"
    # the main thread waits ~3 ms for data per training step with no GPU work running
    idle = np.array([step_time[k] - busy[k] for k in train])
    assert np.median(idle) > 2.5e-3
    assert np.median([max(step_time[k] - summed[k], 0.0) for k in train]) < np.median(idle)
