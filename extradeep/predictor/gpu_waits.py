"""Cross-stream waits that a trace does not spell out, inferred for GPU ops that start late.

A GPU op is late when it starts well after everything the graph knows it waits for (its stream's
previous op, its launch). Two signs name what it waited for instead:
- timing: an op on another stream of its rank (or a collective it is part of) ended just as it
  started (within `tolerance`): an event record on that stream and a stream wait on this one;
- a stream-wait call: the thread that launched it called `cudaStreamWaitEvent` since its previous
  launch (PyTorch records an event on one stream and makes the next stream wait for it before it
  launches NCCL kernels and copies). Traces without CUPTI/`cuda_sync` wait rows (PyTorch before
  2.1, nsys exports without the CUDA event table) show the call but not its event; the op that
  ended last on another stream of the rank before the late op started is then the one it waited
  for, and the time in between is the event's latency.
Each inferred edge keeps the measured start: replaying it reproduces the trace.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import IS_GPU, LAUNCH, NAME, NODE, QUEUE, RANK, ROLE, START, WAIT

STREAM_WAIT_CALLS = ("cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent")


def hidden_waits(
    nodes: pd.DataFrame,
    end: np.ndarray,
    dur: np.ndarray,
    gap: np.ndarray,
    late: float,
    tolerance: float,
    launcher: dict,
    coll_rank: dict,
) -> tuple[list, list, list]:
    """(src, dst, lag) of inferred waits; `end`: effective node ends (s), `launcher`: GPU op ->
    its launching call, `coll_rank`: collective node -> the ranks of its members."""
    start = nodes[START].to_numpy()
    role, rank, queue = nodes[ROLE].to_numpy(), nodes[RANK].to_numpy(), nodes[QUEUE].to_numpy()
    gpu = nodes[IS_GPU].to_numpy() & (role == "op")
    late_ops = np.flatnonzero(gpu & (gap > late))
    if len(late_ops) == 0:
        return [], [], []
    cand = np.flatnonzero((gpu & (dur > 0)) | (role == "sync"))
    cand = cand[np.argsort(end[cand], kind="stable")]
    cend = end[cand]
    waited_call = _after_stream_wait(nodes, launcher)
    src, dst, lag = [], [], []
    for v in late_ops:
        ready = start[v] - gap[v]  # when v could have started by what the graph knew
        hi = np.searchsorted(cend, start[v] + tolerance, side="right")
        lo = (
            np.searchsorted(cend, start[v] - tolerance)
            if not waited_call.get(v, False)
            else np.searchsorted(cend, ready)
        )
        for u in cand[lo:hi][::-1]:
            ok_rank = rank[u] == rank[v] if role[u] != "sync" else rank[v] in coll_rank.get(u, ())
            if ok_rank and queue[u] != queue[v]:
                src.append(int(u))
                dst.append(int(v))
                lag.append(min(0.0, start[v] - end[u]) if end[u] >= start[v] - tolerance else start[v] - end[u])
                break
    return src, dst, lag


def _after_stream_wait(nodes: pd.DataFrame, launcher: dict) -> dict:
    """GPU op -> True when its launching thread made a stream-wait call since its previous launch."""
    cpu = nodes[~nodes[IS_GPU].to_numpy() & (nodes[ROLE] == "op").to_numpy()]
    waits = cpu[NAME].astype(str).str.startswith(STREAM_WAIT_CALLS).to_numpy()
    if not waits.any():
        return {}
    calls = set(launcher.values())
    frame = pd.DataFrame(
        {
            NODE: cpu.index.to_numpy(),
            "key": cpu[RANK].astype(str).to_numpy() + "|" + cpu[QUEUE].astype(str).to_numpy(),
            START: cpu[START].to_numpy(),
            WAIT: waits,
            LAUNCH: cpu.index.isin(list(calls)),
        }
    ).sort_values(["key", START], kind="stable")
    key = frame["key"].to_numpy()
    wait = frame[WAIT].to_numpy()
    launch = np.flatnonzero(frame[LAUNCH].to_numpy())
    counted = np.cumsum(wait)  # stream-wait calls up to and including each row
    first = np.r_[True, key[1:] != key[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(key)), 0))
    before_group = np.where(group_start > 0, counted[group_start - 1], 0)
    prev = np.r_[-1, launch[:-1]]
    same = (prev >= 0) & (key[np.maximum(prev, 0)] == key[launch])
    base = np.where(same, counted[np.maximum(prev, 0)], before_group[launch])
    after_wait = (counted[launch] - wait[launch] - base) > 0
    by_call = dict(zip(frame[NODE].to_numpy()[launch].tolist(), after_wait.tolist()))
    return {v: by_call.get(int(call), False) for v, call in launcher.items()}
