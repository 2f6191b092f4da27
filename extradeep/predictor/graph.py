"""Dependency graph of one run: the ops of every rank as arrays, predecessors with lags.

Nodes are CPU runtime calls, GPU activities (kernels, memcpy, memset), the wake-up half of blocking
calls, step markers and one virtual node per matched collective. An edge says "the successor cannot
start before the predecessor's end plus a lag". Each node also carries a `gap`: measured time before
its start that no edge explains. On CPU threads the gap is CPU work between calls (the CPU overhead);
on GPU queues it is unexplained idle time, dropped by default so that the replay has to be explained
by dependencies alone (`gpu_gaps="keep"` replays it too), except the few microseconds a GPU takes
between two ops of a busy stream (`_device_gaps`), which belong to the device, not to a dependency.
Which GPU ops a blocking call or a stream wait waits for (the wake and event edges) is found in
`predictor.blocking`; this module assembles the graph and derives its durations, lags and gaps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    CATEGORY,
    COLL,
    CORR,
    DST,
    END,
    GROUP,
    IS_GPU,
    KIND,
    LAG,
    NAME,
    NODE,
    QUEUE,
    RANK,
    ROLE,
    SRC,
    START,
    STEP,
    STEP_ID,
    SYNC_TYPE,
)
from extradeep.predictor.blocking import EventIndex, QueueIndex, add_wakes, event_waits
from extradeep.predictor.collectives import collective_groups
from extradeep.predictor.gpu_waits import hidden_waits
from extradeep.predictor.threads import merged_threads, queue_groups
from extradeep.predictor.trace import RunTrace

# Why an edge exists; kept per edge for critical-path attribution.
EDGE_KINDS = ("queue", "launch", "event", "inferred", "blocking", "collective")
NS = 1e-9
# Two timestamps closer than this (seconds) count as one instant when inferring dependencies.
TOLERANCE = 2e-6
# A GPU op starting this much later than its dependencies explain is looked at for a hidden wait.
LATE = 5e-6
LATENCY_QUANTILE = 0.1
# A GPU's own pause between two ops of a busy stream is at most this long (s); longer is a wait
DEVICE_GAP = 50e-6


@dataclass
class OpGraph:
    """The replayable graph: a node table plus edge arrays sorted by destination (CSR order)."""

    nodes: pd.DataFrame  # rank, queue, is_gpu, kind, name, category, start, end (s), role, coll, step
    src: np.ndarray  # edge source node
    dst: np.ndarray  # edge destination node, sorted
    lag: np.ndarray  # seconds added to the source's end
    edge_kind: np.ndarray  # index into EDGE_KINDS
    dur: np.ndarray  # node durations (s)
    gap: np.ndarray  # delay after the latest predecessor that no edge explains (s)
    release: np.ndarray  # start of nodes without predecessors (s), -inf elsewhere
    coll_offset: np.ndarray  # collective members: own measured end minus the group's end (s)
    info: dict = field(default_factory=dict)
    os_wait: np.ndarray | None = None  # part of each CPU gap spent inside OS runtime calls (s)

    @property
    def n(self) -> int:
        return len(self.nodes)

    def pred_ptr(self) -> np.ndarray:
        return np.searchsorted(self.dst, np.arange(self.n + 1))


def build_graph(trace: RunTrace, gpu_gaps: str = "drop") -> OpGraph:
    """Dependency graph of a RunTrace (see the module docstring for what each part means)."""
    if gpu_gaps not in ("drop", "keep"):
        raise ValueError("gpu_gaps must be 'drop' or 'keep'")
    nodes = _node_table(trace)
    launch = _launch_edges(nodes)
    index = QueueIndex(nodes, launch)
    nodes, blocking, event = _wait_edges(nodes, trace, index)
    merged = merged_threads(trace)
    edges = pd.concat([_queue_edges(nodes, merged), launch, blocking, event], ignore_index=True)
    nodes, edges, coll_offset = _add_collectives(nodes, edges)
    graph = _finish(nodes, edges, coll_offset)
    graph = _infer_gpu_waits(graph)
    graph.os_wait = _os_wait(graph, trace)
    if gpu_gaps == "drop":
        gpu = graph.nodes[IS_GPU].to_numpy() & (graph.nodes[ROLE].to_numpy() == "op")
        graph.gap[gpu & ~_device_gaps(graph)] = 0.0
    graph.info["gpu_gaps"] = gpu_gaps
    graph.info["merged_threads"] = merged
    return graph


def _node_table(trace: RunTrace) -> pd.DataFrame:
    ops = trace.ops.assign(role="op", step=-1)
    nodes = pd.concat([ops, _step_markers(trace)], ignore_index=True)
    t0 = int(nodes[START].min()) if len(nodes) else 0
    nodes[START] = (nodes[START] - t0) * NS
    nodes[END] = (nodes[END] - t0) * NS
    nodes[COLL] = -1
    order = np.lexsort((nodes[END].to_numpy(), nodes[START].to_numpy()))
    nodes = nodes.iloc[order].reset_index(drop=True)
    nodes.attrs["t0_ns"] = t0
    return nodes


def _step_markers(trace: RunTrace) -> pd.DataFrame:
    """Zero-length marker nodes at each NVTX step start and end, on the thread that marked it."""
    st = trace.steps
    parts = [
        pd.DataFrame(
            {
                RANK: st[RANK],
                QUEUE: st[QUEUE],
                IS_GPU: False,
                KIND: "marker",
                NAME: f"step_{edge}",
                CATEGORY: "step",
                START: st[edge],
                END: st[edge],
                CORR: -1,
                BYTES: 0.0,
                ROLE: "marker",
                STEP: st[STEP_ID],
            }
        )
        for edge in ("start", "end")
    ]
    return pd.concat(parts, ignore_index=True)


def _edges(src, dst, kind: str, lag=0.0) -> pd.DataFrame:
    src = np.asarray(src, dtype=np.int64)
    return pd.DataFrame(
        {
            SRC: src,
            DST: np.asarray(dst, dtype=np.int64),
            LAG: np.broadcast_to(np.asarray(lag, dtype=float), src.shape).copy(),
            KIND: EDGE_KINDS.index(kind),
        }
    )


def _queue_edges(nodes: pd.DataFrame, merged: dict) -> pd.DataFrame:
    """FIFO order on every GPU stream and call order on every CPU thread (wake right after its call);
    an autograd engine thread continues its main thread's order (`threads.merged_threads`)."""
    frame = pd.DataFrame({RANK: nodes[RANK], QUEUE: queue_groups(nodes, merged)})
    key = frame.groupby([RANK, QUEUE], sort=False).ngroup().to_numpy()
    sub = (nodes[ROLE] == "wake").to_numpy().astype(int)
    order = np.lexsort((sub, nodes[START].to_numpy(), key))
    same = key[order][1:] == key[order][:-1]
    return _edges(order[:-1][same], order[1:][same], "queue")


def _launch_edges(nodes: pd.DataFrame) -> pd.DataFrame:
    """Runtime call -> the GPU activity it launched, joined on (rank, correlationId)."""
    has = (nodes[CORR] >= 0) & (nodes[ROLE] == "op")
    cpu = nodes[has & ~nodes[IS_GPU]][[RANK, CORR]].reset_index(names=SRC)
    gpu = nodes[has & nodes[IS_GPU]][[RANK, CORR]].reset_index(names=DST)
    m = cpu.drop_duplicates([RANK, CORR]).merge(gpu, on=[RANK, CORR])
    return _edges(m[SRC], m[DST], "launch")


def _seconds(frame: pd.DataFrame, t0: int, col: str = "call_start") -> pd.DataFrame:
    return frame.assign(**{col: (frame[col] - t0) * NS}) if len(frame) else frame


def _wait_edges(nodes: pd.DataFrame, trace: RunTrace, index: QueueIndex):
    """The wake nodes of blocking calls and the blocking and event edges (`predictor.blocking`)."""
    t0 = nodes.attrs["t0_ns"]
    events = EventIndex(_seconds(trace.records, t0))
    nodes, src, dst = add_wakes(nodes, trace.syncs, events, index)
    waits = _seconds(trace.syncs[trace.syncs[SYNC_TYPE] == 2], t0)
    return nodes, _edges(src, dst, "blocking"), _edges(*event_waits(waits, events, index), "event")


def _add_collectives(nodes: pd.DataFrame, edges: pd.DataFrame):
    """One virtual node per matched collective, holding its pure duration.

    Members "arrive" (duration 0) and the virtual node waits for all of them; whatever followed a
    member now follows the virtual node, so a collective ends at the latest arrival plus its pure
    duration on every rank (inter-rank synchronisation).
    """
    groups = collective_groups(nodes)
    n_virtual = groups[GROUP].nunique() if len(groups) else 0
    coll_offset = np.zeros(len(nodes) + n_virtual)
    if not n_virtual:
        return nodes, edges, coll_offset
    attrs = dict(nodes.attrs)
    members, gid = groups[NODE].to_numpy(), groups[GROUP].to_numpy()
    nodes.loc[members, COLL] = gid
    start, end = nodes[START].to_numpy(), nodes[END].to_numpy()
    g = pd.DataFrame(
        {
            GROUP: gid,
            START: start[members],
            END: end[members],
            NAME: nodes[NAME].to_numpy()[members],
            BYTES: nodes[BYTES].to_numpy()[members],
        }
    )
    agg = g.groupby(GROUP).agg(start=(START, "max"), end=(END, "max"), name=(NAME, "first"), bytes=(BYTES, "max"))
    base = len(nodes)
    virtual = pd.DataFrame(
        {
            RANK: -1,
            QUEUE: "collective",
            IS_GPU: True,
            KIND: "collective",
            NAME: agg[NAME].to_numpy(),
            CATEGORY: "communication",
            START: agg[START].to_numpy(),
            END: agg[END].to_numpy(),
            CORR: -1,
            BYTES: agg[BYTES].to_numpy(),
            ROLE: "sync",
            STEP: -1,
            COLL: agg.index.to_numpy(),
        }
    )
    nodes = pd.concat([nodes, virtual], ignore_index=True)
    nodes.attrs.update(attrs)
    sync_of = base + np.searchsorted(agg.index.to_numpy(), gid)
    coll_offset[members] = end[members] - agg[END].to_numpy()[sync_of - base]
    redirect = np.full(len(nodes), -1)
    redirect[members] = sync_of
    src = edges[SRC].to_numpy()
    moved = redirect[src] >= 0
    edges = edges.assign(src=np.where(moved, redirect[src], src))
    return nodes, pd.concat([edges, _edges(members, sync_of, "collective")], ignore_index=True), coll_offset


def _finish(nodes: pd.DataFrame, edges: pd.DataFrame, coll_offset: np.ndarray) -> OpGraph:
    """Durations, lags and gaps from the measured times, so that replaying them reproduces them."""
    edges = edges[edges[SRC] != edges[DST]]
    # a call -> wake pair is both a queue and a blocking edge: keep the blocking one, which marks
    # the call whose time moves to its wake
    not_blocking = (edges[KIND] != EDGE_KINDS.index("blocking")).to_numpy()
    edges = edges.assign(_rank=not_blocking).sort_values([DST, SRC, "_rank"], kind="stable")
    edges = edges.drop_duplicates([SRC, DST]).drop(columns="_rank")
    src, dst, kind = edges[SRC].to_numpy(), edges[DST].to_numpy(), edges[KIND].to_numpy()
    start, end, role = nodes[START].to_numpy(), nodes[END].to_numpy(), nodes[ROLE].to_numpy()
    dur = end - start
    is_member = (nodes[COLL].to_numpy() >= 0) & (role == "op")
    has_wake = np.zeros(len(nodes), dtype=bool)
    has_wake[
        src[
            (kind == EDGE_KINDS.index("blocking"))
            & (role[src] == "op")
            & (role[dst] == "wake")
            & ~nodes[IS_GPU].to_numpy()[src]
        ]
    ] = True
    dur[is_member | has_wake] = 0.0  # members arrive; a blocking call's time sits on its wake
    eff_end = start + dur
    eff_end[role == "wake"] = end[role == "wake"]
    lag = _edge_lags(nodes, src, dst, kind, eff_end, start)
    ready = np.full(len(nodes), -np.inf)
    np.maximum.at(ready, dst, eff_end[src] + lag)
    has_pred = np.isfinite(ready)
    wake = role == "wake"
    wake_start = np.maximum(start, np.where(has_pred, ready, start))
    dur[wake] = np.maximum(end - wake_start, 0.0)[wake]
    gap = np.where(has_pred & ~wake, np.maximum(start - ready, 0.0), 0.0)
    release = np.where(has_pred, -np.inf, start)
    return OpGraph(
        nodes=nodes,
        src=src,
        dst=dst,
        lag=lag,
        edge_kind=kind,
        dur=dur,
        gap=gap,
        release=release,
        coll_offset=np.resize(coll_offset, len(nodes)),
        info={"t0_ns": nodes.attrs.get("t0_ns", 0)},
    )


def _edge_lags(nodes, src, dst, kind, src_end, start) -> np.ndarray:
    """Lags that keep every measured start feasible; launches get the rank's typical latency."""
    lag = np.zeros(len(src))
    launch = kind == EDGE_KINDS.index("launch")
    if launch.any():
        measured = start[dst[launch]] - src_end[src[launch]]
        lag[launch] = np.minimum(measured, _typical_launch_latency(nodes, src, dst, kind, launch, measured))
    hard = kind != EDGE_KINDS.index("blocking")
    lag[hard] = np.minimum(lag[hard], start[dst[hard]] - src_end[src[hard]])
    return lag


def _typical_launch_latency(nodes, src, dst, kind, launch, measured) -> np.ndarray:
    """Launch-call-end -> GPU-start delay per rank: a low quantile over ops launched onto an empty
    stream (its previous op had ended when the launching call returned, as HolisticTraceAnalysis
    counts a launch delay only without outstanding kernels).

    Ops that start later than that were held up by something else (an event, a collective), which
    the graph models separately, so the typical latency is the quick end of the distribution. An op
    that found its stream busy says nothing about the latency: where the CPU runs far ahead of the
    GPU, its launch-to-start delay is the queue's length (19 ms on a real trace), not a latency.
    """
    queue = kind == EDGE_KINDS.index("queue")
    prev_end = np.full(len(nodes), -np.inf)
    np.maximum.at(prev_end, dst[queue], nodes[END].to_numpy()[src[queue]])
    gpu_ids = dst[launch]
    start = nodes[START].to_numpy()[gpu_ids]
    idle = (prev_end[gpu_ids] + TOLERANCE < start) & (prev_end[gpu_ids] <= start - measured)
    rank = nodes[RANK].to_numpy()[gpu_ids]
    frame = pd.DataFrame({RANK: rank, "lat": np.where(idle, measured, np.nan)})
    low = frame.groupby(RANK)["lat"].quantile(LATENCY_QUANTILE)
    fallback = frame.assign(lat=measured).groupby(RANK)["lat"].quantile(LATENCY_QUANTILE)
    return low.fillna(fallback).reindex(rank).to_numpy()


def _infer_gpu_waits(graph: OpGraph) -> OpGraph:
    """Cross-stream waits the trace does not spell out (`gpu_waits.hidden_waits`), as inferred edges."""
    nodes = graph.nodes
    start = nodes[START].to_numpy()
    end = start + graph.dur
    end[nodes[ROLE].to_numpy() == "sync"] = nodes[END].to_numpy()[nodes[ROLE].to_numpy() == "sync"]
    launch = graph.edge_kind == EDGE_KINDS.index("launch")
    launcher = dict(zip(graph.dst[launch].tolist(), graph.src[launch].tolist()))
    src, dst, lags = hidden_waits(nodes, end, graph.dur, graph.gap, LATE, TOLERANCE, launcher, _collective_ranks(graph))
    if not src:
        return graph
    extra = _edges(src, dst, "inferred")
    edges = pd.DataFrame({SRC: graph.src, DST: graph.dst, LAG: graph.lag, KIND: graph.edge_kind})
    edges = pd.concat([edges, extra], ignore_index=True).sort_values([DST, SRC], kind="stable")
    inferred = (edges[KIND] == EDGE_KINDS.index("inferred")).to_numpy()
    lag = edges[LAG].to_numpy().copy()
    e_src, e_dst = edges[SRC].to_numpy(), edges[DST].to_numpy()
    lag[inferred] = (
        extra.set_index([SRC, DST])
        .assign(lag=lags)[LAG]
        .reindex(pd.MultiIndex.from_arrays([e_src[inferred], e_dst[inferred]]))
        .to_numpy()
    )
    gap = graph.gap.copy()
    ready = np.full(graph.n, -np.inf)
    np.maximum.at(ready, e_dst, end[e_src] + lag)
    fix = np.asarray(dst)
    gap[fix] = np.maximum(start[fix] - ready[fix], 0.0)
    return OpGraph(
        nodes=nodes,
        src=e_src,
        dst=e_dst,
        lag=lag,
        edge_kind=edges[KIND].to_numpy(),
        dur=graph.dur,
        gap=gap,
        release=graph.release,
        coll_offset=graph.coll_offset,
        info=graph.info,
        os_wait=graph.os_wait,
    )


def _device_gaps(graph: OpGraph) -> np.ndarray:
    """GPU ops whose gap is the device's own pause between two ops of a busy stream: the op waited
    for its stream's previous op (that edge binds) and started at most DEVICE_GAP after it.

    Such pauses (median 1-4 us on the real traces, 2-7 % of a step) add up over thousands of
    kernels; dropping them makes a GPU-bound chain finish early wherever the CPU waits for it.
    Longer pauses on a busy stream are waits the graph cannot see and are dropped.
    """
    start = graph.nodes[START].to_numpy()
    end = start + graph.dur
    role = graph.nodes[ROLE].to_numpy()
    end[role == "sync"] = graph.nodes[END].to_numpy()[role == "sync"]
    ready = np.full(graph.n, -np.inf)
    np.maximum.at(ready, graph.dst, end[graph.src] + graph.lag)
    queue = graph.edge_kind == EDGE_KINDS.index("queue")
    by_queue = np.full(graph.n, -np.inf)
    np.maximum.at(by_queue, graph.dst[queue], end[graph.src[queue]] + graph.lag[queue])
    return (by_queue >= ready) & np.isfinite(ready) & (graph.gap <= DEVICE_GAP)


def _collective_ranks(graph: OpGraph) -> dict[int, set]:
    """Virtual collective node -> the ranks of its members."""
    coll = graph.edge_kind == EDGE_KINDS.index("collective")
    rank = graph.nodes[RANK].to_numpy()
    out: dict[int, set] = {}
    for s, d in zip(graph.src[coll], graph.dst[coll]):
        out.setdefault(int(d), set()).add(rank[s])
    return out


def _os_wait(graph: OpGraph, trace: RunTrace) -> np.ndarray:
    """Seconds of each CPU node's gap spent inside OS runtime calls on its thread.

    Those are waits (a data loader's queue, I/O, a barrier), not CPU overhead: the `cpu=F` what-if
    leaves them alone and the critical path counts them as idle.
    """
    out = np.zeros(graph.n)
    calls = trace.os_calls
    if calls.empty:
        return out
    t0 = graph.info["t0_ns"]
    nodes = graph.nodes
    cpu = np.flatnonzero(~nodes[IS_GPU].to_numpy() & (graph.gap > 0))
    frame = pd.DataFrame({NODE: cpu, RANK: nodes[RANK].to_numpy()[cpu], QUEUE: nodes[QUEUE].to_numpy()[cpu]})
    starts = nodes[START].to_numpy()
    for (rank, queue), grp in frame.groupby([RANK, QUEUE]):
        mine = calls[(calls[RANK] == rank) & (calls[QUEUE] == queue)]
        if mine.empty:
            continue
        lo, hi = _union((mine[START].to_numpy() - t0) * NS, (mine[END].to_numpy() - t0) * NS)
        ids = grp[NODE].to_numpy()
        out[ids] = _covered(lo, hi, starts[ids]) - _covered(lo, hi, starts[ids] - graph.gap[ids])
    return out


def _union(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge (possibly nested) intervals into disjoint sorted ones."""
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    new = np.r_[True, lo[1:] > hi[:-1]]
    starts = lo[new]
    ends = hi[np.r_[np.flatnonzero(new)[1:] - 1, len(lo) - 1]]
    return starts, ends


def _covered(lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total length of the disjoint intervals [lo, hi) before each time t."""
    full = np.r_[0.0, np.cumsum(hi - lo)]
    k = np.searchsorted(lo, t, side="right")
    partial = np.where(k > 0, np.clip(t - lo[np.maximum(k - 1, 0)], 0, (hi - lo)[np.maximum(k - 1, 0)]), 0.0)
    return full[np.maximum(k - 1, 0)] * (k > 0) + partial
