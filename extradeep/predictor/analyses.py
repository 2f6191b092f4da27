"""The everyday trace analyses of a PyTorch user, as HolisticTraceAnalysis (HTA) offers them, on one run.

Each takes a run (a folder, files, or a RunTrace) and returns a DataFrame; times in seconds.

- `idle_time`: per rank and GPU stream, the gaps between consecutive GPU activities split into
  *host wait* (the launch call started after the previous activity ended: the CPU did not enqueue
  work fast enough), *kernel wait* (a gap shorter than `consecutive_kernel_delay`: the cost of
  launching back-to-back kernels) and *other* (waiting for an event, a collective, ...), as HTA's
  idle time breakdown defines them;
- `kernel_launch_stats`: per GPU activity with a launch call, the call's duration, the activity's
  duration and the launch delay (activity start - call end, clipped at 0), flagged as *short*
  (the activity is shorter than its launch call), *runtime outlier* and *delay outlier*;
- `kernel_sequences`: the most frequent sequences of kernels on a stream, with their GPU time and
  whether they are launch-bound fusion candidates (the strategy search fuses those);
- `comm_overlap`: per rank, the share of communication-kernel time during which a computation
  kernel also runs (merged intervals, as HTA's comm/comp overlap);
- `compare_runs`: which operators and kernels got slower or faster between two runs, per step.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from extradeep.columns import (
    CATEGORY,
    CORR,
    COUNT,
    END,
    EPOCH,
    IS_GPU,
    KIND,
    NAME,
    PHASE,
    QUEUE,
    RANK,
    START,
    STEP,
    STREAM,
    TIME,
)
from extradeep.predictor.trace import RunTrace

NS = 1e-9
CONSECUTIVE_KERNEL_DELAY = 30e-6  # HTA 0.5 on Kineto traces: 30 (us, the traces' unit) = launch overhead
RUNTIME_CUTOFF = 50e-6  # HTA's default outlier thresholds for launch calls and launch delays
LAUNCH_DELAY_CUTOFF = 100e-6
SHORT_KERNEL = 20e-6  # a kernel sequence whose kernels take less than this each can be host-bound
CHANGE = 0.05  # relative change per step below which an operator or kernel counts as the same
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
_COUNTERS = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+|,\s*(?:sizes|input_op_ids)\s*=\s*\[.*$")


def run_trace(run, select=None, settings=None) -> RunTrace:
    """The RunTrace of a run given as a folder, files or a RunTrace."""
    if isinstance(run, RunTrace):
        return run
    from extradeep.predictor.api import resolve_run
    from extradeep.predictor.trace import load_trace

    paths, _, _ = resolve_run(run, select)
    return load_trace(paths, settings=settings)


def gpu_activities(trace: RunTrace) -> pd.DataFrame:
    """GPU kernels, copies and sets with their launch call's start and end (NaN where none):
    rank, stream, kind, name, category, start, end, launch_start, launch_end, launch_name. Times are
    ns since the run's first op, as floats (exact: epoch nanoseconds as floats would lose hundreds)."""
    ops = trace.ops
    t0 = int(ops[START].min()) if len(ops) else 0
    gpu = ops[ops[IS_GPU]].copy()
    gpu[START] = (gpu[START] - t0).astype(float)
    gpu[END] = (gpu[END] - t0).astype(float)
    cpu = ops[~ops[IS_GPU] & (ops[CORR] >= 0)].drop_duplicates([RANK, CORR])
    calls = pd.DataFrame(
        {START: (cpu[START] - t0).astype(float).to_numpy(), END: (cpu[END] - t0).astype(float).to_numpy()},
        index=pd.MultiIndex.from_arrays([cpu[RANK], cpu[CORR]]),
    ).assign(name=cpu[NAME].to_numpy())
    found = calls.reindex(pd.MultiIndex.from_arrays([gpu[RANK], gpu[CORR]]))
    gpu["launch_start"] = found[START].to_numpy(dtype=float)
    gpu["launch_end"] = found[END].to_numpy(dtype=float)
    gpu["launch_name"] = found[NAME].to_numpy()
    gpu.loc[gpu[CORR] < 0, ["launch_start", "launch_end"]] = np.nan
    gpu[STREAM] = gpu[QUEUE]
    return gpu.sort_values([RANK, STREAM, START, END], kind="stable").reset_index(drop=True)


def idle_time(run, consecutive_kernel_delay: float = CONSECUTIVE_KERNEL_DELAY, **kw) -> pd.DataFrame:
    """Idle time per rank, GPU stream and category (host_wait, kernel_wait, other): columns rank,
    stream, idle_category, idle_time_s, intervals, idle_share (of that stream's idle time)."""
    g = gpu_activities(run_trace(run, **kw))
    rows = []
    for (rank, stream), s in g.groupby([RANK, STREAM], sort=True):
        start, end = s[START].to_numpy(float), s[END].to_numpy(float)
        prev_end = np.r_[np.nan, np.maximum.accumulate(end)[:-1]]
        # activities that overlap on one stream leave no idle time (HTA would count it negative)
        gap = np.maximum((start - prev_end) * NS, 0.0)
        host = s["launch_start"].to_numpy(float) > prev_end
        kernel = ~host & (gap < consecutive_kernel_delay)
        category = np.where(host, "host_wait", np.where(kernel, "kernel_wait", "other"))
        valid = ~np.isnan(gap)
        total = float(np.nansum(gap[valid]))
        for cat in IDLE_CATEGORIES:
            mine = valid & (category == cat)
            value = float(gap[mine].sum())
            rows.append(
                {
                    "rank": rank,
                    "stream": stream,
                    "idle_category": cat,
                    "idle_time_s": value,
                    "intervals": int(mine.sum()),
                    "idle_share": value / total if total else 0.0,
                }
            )
    return pd.DataFrame(rows, columns=[RANK, STREAM, "idle_category", "idle_time_s", "intervals", "idle_share"])


def kernel_launch_stats(
    run, runtime_cutoff: float = RUNTIME_CUTOFF, launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF, **kw
) -> pd.DataFrame:
    """One row per GPU activity launched by a CPU call: rank, stream, name, launch_call,
    correlation, cpu_duration_s, gpu_duration_s, launch_delay_s, short, runtime_outlier,
    delay_outlier. `launch_summary` counts them per rank."""
    g = gpu_activities(run_trace(run, **kw))
    g = g[g["launch_start"].notna()]
    cpu = (g["launch_end"] - g["launch_start"]).to_numpy(float) * NS
    gpu = (g[END] - g[START]).to_numpy(float) * NS
    delay = np.maximum((g[START].to_numpy(float) - g["launch_end"].to_numpy(float)) * NS, 0.0)
    return pd.DataFrame(
        {
            RANK: g[RANK].to_numpy(),
            STREAM: g[STREAM].to_numpy(),
            NAME: g[NAME].to_numpy(),
            "launch_call": g["launch_name"].to_numpy(),
            "correlation": g[CORR].to_numpy(),
            "cpu_duration_s": cpu,
            "gpu_duration_s": gpu,
            "launch_delay_s": delay,
            "short": gpu < cpu,
            "runtime_outlier": cpu > runtime_cutoff,
            "delay_outlier": delay > launch_delay_cutoff,
        }
    )


def launch_summary(stats: pd.DataFrame) -> pd.DataFrame:
    """Per rank: launches, short ones, outliers, and median/p95 of the launch delay."""
    if stats.empty:
        return pd.DataFrame(
            columns=[RANK, "launches", "short", "runtime_outliers", "delay_outliers", "median_delay_s", "p95_delay_s"]
        )
    g = stats.groupby(RANK)
    return pd.DataFrame(
        {
            "launches": g.size(),
            "short": g["short"].sum(),
            "runtime_outliers": g["runtime_outlier"].sum(),
            "delay_outliers": g["delay_outlier"].sum(),
            "median_delay_s": g["launch_delay_s"].median(),
            "p95_delay_s": g["launch_delay_s"].quantile(0.95),
        }
    ).reset_index()


def kernel_sequences(run, min_len: int = 3, max_len: int = 8, top: int = 20, **kw) -> pd.DataFrame:
    """The `top` most frequent kernel sequences (length min_len..max_len, consecutive on one GPU
    stream, counted with overlaps), longest first among equally frequent: pattern, length, count,
    gpu_time_s (all occurrences), mean_kernel_s, host_wait_share (gaps inside the occurrences
    caused by the host), fusion_candidate (short kernels, mostly waiting for the host)."""
    if min_len < 2 or max_len < min_len:
        raise ValueError("kernel_sequences needs 2 <= min_len <= max_len")
    g = gpu_activities(run_trace(run, **kw))
    g = g[g[KIND] == "kernel"]
    codes, names = pd.factorize(g[NAME].astype(str))
    found = []
    for _, s in g.assign(code=codes).groupby([RANK, STREAM], sort=False):
        c = s["code"].to_numpy()
        dur = (s[END] - s[START]).to_numpy(float) * NS
        prev_end = np.r_[np.nan, s[END].to_numpy(float)[:-1]]
        host = s["launch_start"].to_numpy(float) > prev_end
        gap = np.maximum((s[START].to_numpy(float) - prev_end) * NS, 0.0)
        for n in range(min_len, min(max_len, len(c)) + 1):
            win = np.lib.stride_tricks.sliding_window_view(c, n)
            dsum = np.lib.stride_tricks.sliding_window_view(dur, n).sum(axis=1)
            inner_gap = np.lib.stride_tricks.sliding_window_view(np.nan_to_num(gap), n)[:, 1:]
            inner_host = np.lib.stride_tricks.sliding_window_view(host, n)[:, 1:]
            found.append(
                pd.DataFrame(
                    {
                        "key": [tuple(w) for w in win],
                        "length": n,
                        "gpu": dsum,
                        "gap": inner_gap.sum(axis=1),
                        "host_gap": (inner_gap * inner_host).sum(axis=1),
                    }
                )
            )
    if not found:
        return pd.DataFrame(
            columns=["pattern", "length", COUNT, "gpu_time_s", "mean_kernel_s", "host_wait_share", "fusion_candidate"]
        )
    allw = pd.concat(found, ignore_index=True)
    agg = allw.groupby("key", sort=False).agg(
        length=("length", "first"),
        count=("gpu", "size"),
        gpu_time_s=("gpu", "sum"),
        gap=("gap", "sum"),
        host=("host_gap", "sum"),
    )
    agg = agg[agg[COUNT] >= 2].sort_values([COUNT, "length", "gpu_time_s"], ascending=[False, False, False])
    agg = _distinct_patterns(agg.reset_index(), top)
    agg["pattern"] = [" | ".join(str(names[k]) for k in key) for key in agg["key"]]
    agg["mean_kernel_s"] = agg["gpu_time_s"] / (agg[COUNT] * agg["length"])
    agg["host_wait_share"] = np.where(agg["gap"] > 0, agg["host"] / agg["gap"].where(agg["gap"] > 0, 1.0), 0.0)
    agg["fusion_candidate"] = (agg["mean_kernel_s"] < SHORT_KERNEL) & (agg["host_wait_share"] > 0.5)
    return agg[["pattern", "length", COUNT, "gpu_time_s", "mean_kernel_s", "host_wait_share", "fusion_candidate"]]


def _distinct_patterns(agg: pd.DataFrame, top: int) -> pd.DataFrame:
    """The `top` patterns, leaving out the ones a listed pattern already explains: a run of one
    kernel is listed once (shortest), and a pattern inside a longer listed one that occurs at
    least 90 % as often is dropped."""
    keep, uniform_seen = [], set()
    for row in agg.itertuples(index=False):
        key = row.key
        if len(set(key)) == 1:
            if key[0] in uniform_seen:
                continue
            uniform_seen.add(key[0])
        elif any(_contains(k.key, key) and k.count >= 0.9 * row.count for k in keep):
            continue
        keep.append(row)
        if len(keep) >= top:
            break
    return pd.DataFrame(keep, columns=agg.columns)


def _contains(longer: tuple, shorter: tuple) -> bool:
    n = len(shorter)
    return len(longer) > n and any(longer[i : i + n] == shorter for i in range(len(longer) - n + 1))


def comm_overlap(run, **kw) -> pd.DataFrame:
    """Per rank: communication time (merged NCCL kernel intervals), computation time (merged
    compute kernels), their overlap and overlap_share = overlap / communication."""
    g = gpu_activities(run_trace(run, **kw))
    rows = []
    for rank, r in g.groupby(RANK, sort=True):
        kern = r[r[KIND] == "kernel"]
        comm = merge_intervals(kern[kern[CATEGORY] == "communication"])
        comp = merge_intervals(kern[kern[CATEGORY] != "communication"])
        overlap = intersection_length(comm, comp)
        comm_t = float((comm[1] - comm[0]).sum()) * NS
        rows.append(
            {
                "rank": rank,
                "comm_time_s": comm_t,
                "comp_time_s": float((comp[1] - comp[0]).sum()) * NS,
                "overlap_s": overlap * NS,
                "overlap_share": overlap * NS / comm_t if comm_t > 0 else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=[RANK, "comm_time_s", "comp_time_s", "overlap_s", "overlap_share"])


def merge_intervals(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted (starts, ends) covering the intervals [start, end) of a frame."""
    if frame.empty:
        return np.zeros(0), np.zeros(0)
    lo, hi = frame[START].to_numpy(float), frame[END].to_numpy(float)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    new = np.r_[True, lo[1:] > hi[:-1]]
    return lo[new], hi[np.r_[np.flatnonzero(new)[1:] - 1, len(lo) - 1]]


def intersection_length(a: tuple, b: tuple) -> float:
    """Total length of the intersection of two disjoint sorted interval sets."""
    total, i, j = 0.0, 0, 0
    (alo, ahi), (blo, bhi) = a, b
    while i < len(alo) and j < len(blo):
        lo, hi = max(alo[i], blo[j]), min(ahi[i], bhi[j])
        if hi > lo:
            total += hi - lo
        if ahi[i] < bhi[j]:
            i += 1
        else:
            j += 1
    return total


def compare_runs(control, test, **kw) -> pd.DataFrame:
    """Operators (CPU ranges: framework ops, annotations) and GPU activities of two runs, per step
    (per run when a run has no steps): kind, name, control_count, test_count, control_s, test_s,
    diff_s (test - control), ratio (test / control), change (slower, faster, new, gone, same)."""
    a, b = _per_step_totals(run_trace(control, **kw)), _per_step_totals(run_trace(test, **kw))
    m = a.merge(b, on=[KIND, NAME], how="outer", suffixes=("_control", "_test")).fillna(0.0)
    out = pd.DataFrame(
        {
            KIND: m[KIND],
            NAME: m[NAME],
            "control_count": m["count_control"],
            "test_count": m["count_test"],
            "control_s": m["time_control"],
            "test_s": m["time_test"],
        }
    )
    out["diff_s"] = out["test_s"] - out["control_s"]
    out["ratio"] = np.where(
        out["control_s"] > 0, out["test_s"] / out["control_s"].where(out["control_s"] > 0, 1.0), np.inf
    )
    change = np.where(out["ratio"] > 1 + CHANGE, "slower", np.where(out["ratio"] < 1 - CHANGE, "faster", "same"))
    change = np.where(out["control_count"] == 0, "new", np.where(out["test_count"] == 0, "gone", change))
    out["change"] = change
    return out.reindex(out["diff_s"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def _per_step_totals(trace: RunTrace) -> pd.DataFrame:
    """Count and time per (kind, name), divided by the run's number of steps (1 without steps)."""
    steps = trace.steps
    n = max(steps[[EPOCH, PHASE, STEP]].drop_duplicates().shape[0], 1) if len(steps) else 1
    ranks = max(trace.files[RANK].nunique(), 1) if len(trace.files) else 1
    gpu = trace.ops[trace.ops[IS_GPU]]
    parts = [
        pd.DataFrame({KIND: "kernel", NAME: gpu[NAME].astype(str), "t": (gpu[END] - gpu[START]) * NS}),
    ]
    if len(trace.ranges):
        names = trace.ranges[NAME].astype(str).str.replace(_COUNTERS, "", regex=True)
        parts.append(pd.DataFrame({KIND: "operator", NAME: names, "t": (trace.ranges[END] - trace.ranges[START]) * NS}))
    frame = pd.concat(parts, ignore_index=True)
    agg = frame.groupby([KIND, NAME]).agg(count=("t", "size"), time=("t", "sum")).reset_index()
    agg[[COUNT, TIME]] = agg[[COUNT, TIME]] / (n * ranks)
    return agg
