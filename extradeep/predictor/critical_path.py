"""Critical path of a replay and its breakdown into compute, communication, memory, CPU overhead, idle.

Walking back from a sink (a step's end marker, or the last op) along the edge that bound each
start gives the chain of ops and waits that set the time (dPRO section 4.3). Every second of the
window is attributed: an op's duration to its class, the gap before it to CPU overhead (CPU
threads, except time inside OS runtime calls such as a data loader's queue wait: idle) or idle
(GPU queues), a launch latency to CPU overhead and any other lag to idle.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import CATEGORY, END, IS_GPU, KIND, NAME, NODE, PART_IDLE, QUEUE, RANK, ROLE, START, WAIT
from extradeep.predictor.graph import EDGE_KINDS, OpGraph
from extradeep.predictor.replay import ReplayResult

CLASSES = ("compute", "communication", "memory", "cpu_overhead", "idle")


def node_classes(nodes: pd.DataFrame) -> np.ndarray:
    """Breakdown class of each node's own duration."""
    kind, category = nodes[KIND].to_numpy(), nodes[CATEGORY].to_numpy()
    out = np.full(len(nodes), "cpu_overhead", dtype=object)
    out[(kind == "kernel") & (category == "computation")] = "compute"
    out[(category == "communication") | (nodes[ROLE].to_numpy() == "sync")] = "communication"
    out[(kind == "memcpy") | (kind == "memset")] = "memory"
    return out


def critical_path(graph: OpGraph, result: ReplayResult, sink: int, lo: float) -> pd.DataFrame:
    """Ops on the critical path from time `lo` to the end of node `sink`, latest first.

    Columns: node, rank, queue, name, class, start, end, contribution (s), wait_class, wait, os_wait
    (s): `contribution` is the op's own time inside the window, `wait` the gap/lag before it and
    `os_wait` the part of that wait a CPU thread spent inside OS runtime calls.
    """
    classes = node_classes(graph.nodes)
    is_gpu = graph.nodes[IS_GPU].to_numpy()
    os_wait = np.zeros(graph.n) if graph.os_wait is None else graph.os_wait
    launch = EDGE_KINDS.index("launch")
    rows, v = [], int(sink)
    # `cursor` walks back from the sink's end: each op and wait gets only the time not yet
    # attributed, so an op that overlaps its successor (measured starts can precede a
    # predecessor's end by a few ns; lags are then negative) is not counted twice
    cursor = float(result.end[v])
    while True:
        top = min(float(result.end[v]), cursor)
        own_from = max(min(float(result.start[v]), top), lo)
        edge = result.binding[v]
        prev_end = result.end[graph.src[edge]] if edge >= 0 else lo
        wait_from = max(min(prev_end, own_from), lo)
        wait = own_from - wait_from
        wait_class = "cpu_overhead" if (edge >= 0 and graph.edge_kind[edge] == launch) or not is_gpu[v] else "idle"
        rows.append((v, top - own_from, wait_class, wait, min(os_wait[v], wait) if not is_gpu[v] else 0.0))
        cursor = wait_from
        if edge < 0 or cursor <= lo:
            break
        v = int(graph.src[edge])
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    n = graph.nodes
    return pd.DataFrame(
        {
            NODE: ids,
            RANK: n[RANK].to_numpy()[ids],
            QUEUE: n[QUEUE].to_numpy()[ids],
            NAME: n[NAME].to_numpy()[ids],
            "class": classes[ids],
            START: result.start[ids],
            END: result.end[ids],
            "contribution": [r[1] for r in rows],
            "wait_class": [r[2] for r in rows],
            WAIT: [r[3] for r in rows],
            "os_wait": [r[4] for r in rows],
        }
    )


def step_sinks(graph: OpGraph, result: ReplayResult):
    """A function (ends, windows) -> the node where one step's critical path ends: the last of its
    ranks' step-end markers or, where the GPU lags behind the CPU, the last GPU op launched inside
    the step, as HolisticTraceAnalysis ends a window's path at its last kernel.

    `ends`: the step's end markers (index = node id); `windows`: rank, lo, hi (measured seconds) of
    the step on each rank. A GPU op belongs to the step when its launching call starts in [lo, hi);
    a collective member stands for its virtual node, which holds the collective's end.
    """
    n = graph.nodes
    gpu = np.flatnonzero(n[IS_GPU].to_numpy() & (n[ROLE].to_numpy() == "op"))
    launch = graph.edge_kind == EDGE_KINDS.index("launch")
    launched_at = n[START].to_numpy().copy()
    launched_at[graph.dst[launch]] = n[START].to_numpy()[graph.src[launch]]
    stands_for = np.arange(graph.n)
    coll = graph.edge_kind == EDGE_KINDS.index("collective")
    stands_for[graph.src[coll]] = graph.dst[coll]
    by_rank = {}
    for r, ids in pd.Series(gpu).groupby(n[RANK].to_numpy()[gpu]):
        ids = ids.to_numpy()[np.argsort(launched_at[ids.to_numpy()], kind="stable")]
        by_rank[r] = (ids, launched_at[ids])

    def sink_of(ends: pd.DataFrame, windows: pd.DataFrame) -> int:
        sink = int(ends.index[np.argmax(result.start[ends.index.to_numpy()])])
        for w in windows.itertuples(index=False):
            ids, at = by_rank.get(w.rank, (np.zeros(0, dtype=np.int64), np.zeros(0)))
            mine = stands_for[ids[np.searchsorted(at, w.lo) : np.searchsorted(at, w.hi)]]
            if len(mine) and result.end[mine].max() > result.end[sink]:
                sink = int(mine[np.argmax(result.end[mine])])
        return sink

    return sink_of


def breakdown(path: pd.DataFrame) -> dict[str, float]:
    """Seconds per class along a critical path (the classes sum to the window length), plus
    `os_wait`: how much of the idle time a CPU thread spent inside OS runtime calls."""
    out = dict.fromkeys(CLASSES, 0.0)
    for cls, val in path.groupby("class")["contribution"].sum().items():
        out[cls] += float(val)
    for cls, val in path.groupby("wait_class")[WAIT].sum().items():
        out[cls] += float(val)
    # time a CPU thread spent waiting inside OS calls (data loading, I/O) is idle, not overhead
    moved = float(path["os_wait"].sum())
    out["cpu_overhead"] -= moved
    out[PART_IDLE] += moved
    out["os_wait"] = moved  # the part of idle spent in OS calls (not a class of its own)
    return out
