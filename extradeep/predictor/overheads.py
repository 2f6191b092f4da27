"""Host-side overheads T1-T5 (Lin et al., DLRM performance model, section III-C) and the
sum-of-kernel-times baseline that ignores dependencies.

With framework op ranges (NVTX ranges other than step marks, e.g. PyTorch's `aten::*`), per
top-level op on a CPU thread:
  T1 gap between two consecutive top-level ops of one step (attributed to the later op; a gap
     across a step or epoch boundary is the loop's time between steps, not the op's overhead),
  T2 op start -> its first CUDA runtime call,
  T3 its last runtime call end -> op end,
  T4 duration of each CUDA runtime call (per API name),
  T5 gap between two consecutive runtime calls inside one op.
Without op ranges only T4 and T5 exist; T5 is then the gap before each launch, attributed to the
name of the GPU op it launched.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from extradeep.columns import (
    COUNT,
    END,
    IS_GPU,
    KIND,
    MEAN,
    MEDIAN,
    NAME,
    OVERHEAD_TYPE,
    P95,
    QUEUE,
    RANK,
    START,
    STAT_TOTAL,
    STD,
    STEP_ID,
)

STAT_COLUMNS = [OVERHEAD_TYPE, NAME, COUNT, MEAN, MEDIAN, STD, P95, STAT_TOTAL]
# PyTorch's NVTX op names carry per-call counters ("aten::mm, seq = 12, op_id = 345"); statistics
# are per op, so the counters are dropped.
_COUNTERS = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+")


def _stats(kind: str, names, values) -> pd.DataFrame:
    names = [_COUNTERS.sub("", str(n)) for n in names]
    f = pd.DataFrame({NAME: np.asarray(names, dtype=object), "v": np.asarray(values, dtype=float)})
    if f.empty:
        return pd.DataFrame(columns=STAT_COLUMNS)
    g = f.groupby(NAME)["v"]
    out = pd.DataFrame(
        {
            COUNT: g.size(),
            MEAN: g.mean(),
            MEDIAN: g.median(),
            STD: g.std(ddof=0),
            P95: g.quantile(0.95),
            STAT_TOTAL: g.sum(),
        }
    ).reset_index()
    return out.assign(type=kind)[STAT_COLUMNS]


def top_level(ranges: pd.DataFrame) -> pd.DataFrame:
    """Outermost ranges per (rank, thread): those not inside an earlier range."""
    if ranges.empty:
        return ranges
    r = ranges.sort_values([RANK, QUEUE, START, END], ascending=[True, True, True, False])
    key = r[RANK].astype(str) + "|" + r[QUEUE]
    prev_max = r.groupby(key.to_numpy())[END].transform(lambda s: s.cummax().shift(fill_value=np.iinfo(np.int64).min))
    return r[(r[END] > prev_max).to_numpy()]


def overhead_table(
    ops: pd.DataFrame, ranges: pd.DataFrame, launched_name: dict, steps: pd.DataFrame | None = None
) -> pd.DataFrame:
    """T1-T5 statistics (seconds) per op or API name: type, name, count, mean, median, std, p95, total.

    `ops` are the trace's ops (ns), `ranges` its NVTX op ranges, `launched_name` maps a runtime
    call's row label to the name of the GPU op it launched, `steps` the trace's step windows
    (rank, start, end): T1 gaps count only between two ops of the same step when given.
    """
    calls = ops[(~ops[IS_GPU]) & (ops[KIND] == "runtime")].sort_values([RANK, QUEUE, START])
    ns = 1e-9
    parts = [_stats("T4", calls[NAME], (calls[END] - calls[START]) * ns)]
    launches = calls[calls.index.isin(list(launched_name))]
    tops = top_level(ranges)
    if tops.empty:
        same = (launches[RANK].shift() == launches[RANK]) & (launches[QUEUE].shift() == launches[QUEUE])
        gap = (launches[START] - launches[END].shift())[same]
        parts.append(_stats("T5", [launched_name[i] for i in gap.index], gap * ns))
        return pd.concat(parts, ignore_index=True)
    parts += _op_overheads(tops, launches, ns, steps)
    return pd.concat([p for p in parts if len(p)], ignore_index=True)


def _step_index(steps: pd.DataFrame | None, rank, starts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """Index of the rank's step window holding each op (-1: none); None when the rank has no steps."""
    if steps is None or steps.empty:
        return None
    st = steps[steps[RANK] == rank].sort_values(START)
    if st.empty:
        return None
    k = np.searchsorted(st[START].to_numpy(), starts, side="right") - 1
    inside = (k >= 0) & (ends <= st[END].to_numpy()[np.maximum(k, 0)])
    return np.where(inside, k, -1)


def _op_overheads(tops: pd.DataFrame, launches: pd.DataFrame, ns: float, steps=None) -> list[pd.DataFrame]:
    t1n, t1v, t2n, t2v, t3n, t3v, t5n, t5v = ([] for _ in range(8))
    for (rank, queue), ops in tops.groupby([RANK, QUEUE], sort=False):
        starts, ends, names = ops[START].to_numpy(), ops[END].to_numpy(), ops[NAME].to_numpy()
        step = _step_index(steps, rank, starts, ends)
        same = np.ones(max(len(ops) - 1, 0), dtype=bool) if step is None else (step[1:] == step[:-1]) & (step[1:] >= 0)
        t1n += list(names[1:][same])
        t1v += list(((starts[1:] - ends[:-1]) * ns)[same])
        mine = launches[(launches[RANK] == rank) & (launches[QUEUE] == queue)]
        cs, ce = mine[START].to_numpy(), mine[END].to_numpy()
        op = np.searchsorted(starts, cs, side="right") - 1
        inside = (op >= 0) & (ce <= ends[np.maximum(op, 0)])
        cs, ce, op = cs[inside], ce[inside], op[inside]
        if len(op) == 0:
            continue
        first = np.r_[True, op[1:] != op[:-1]]
        last = np.r_[op[1:] != op[:-1], True]
        t2n += list(names[op[first]])
        t2v += list((cs[first] - starts[op[first]]) * ns)
        t3n += list(names[op[last]])
        t3v += list((ends[op[last]] - ce[last]) * ns)
        t5n += list(names[op[~first]])
        t5v += list((cs[~first] - ce[np.flatnonzero(~first) - 1]) * ns)
    return [_stats("T1", t1n, t1v), _stats("T2", t2n, t2v), _stats("T3", t3n, t3v), _stats("T5", t5n, t5v)]


def kernel_sum_baseline(ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per rank, step and GPU queue: the sum of GPU op times in the step (s). The baseline step
    time is the largest of these per step; it ignores every dependency and wait."""
    gpu = ops[ops[IS_GPU]]
    dur = (gpu[END] - gpu[START]).to_numpy() * 1e-9
    if steps.empty:
        step_id = np.full(len(gpu), -1)
    else:
        step_id = np.full(len(gpu), -2)
        for rank, st in steps.sort_values(START).groupby(RANK):
            mine = np.flatnonzero(gpu[RANK].to_numpy() == rank)
            t = gpu[START].to_numpy()[mine]
            k = np.searchsorted(st[START].to_numpy(), t, side="right") - 1
            inside = (k >= 0) & (t < st[END].to_numpy()[np.maximum(k, 0)])
            step_id[mine[inside]] = st[STEP_ID].to_numpy()[k[inside]]
    frame = pd.DataFrame(
        {RANK: gpu[RANK].to_numpy(), STEP_ID: step_id, QUEUE: gpu[QUEUE].to_numpy(), "kernel_time": dur}
    )
    frame = frame[frame[STEP_ID] != -2]
    return frame.groupby([RANK, STEP_ID, QUEUE], as_index=False)["kernel_time"].sum()
