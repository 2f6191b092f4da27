"""Strategies as changes to the replay graph: a new bucket layout, fused kernel chains, a copy moved
to its own stream. Each returns a graph (or new durations) that `replay` runs as it runs the
measured one, so a strategy's step time comes from the same dependencies as the baseline's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import NAME
from extradeep.predictor.buckets import CollectiveCost, bucket_sums
from extradeep.predictor.gradients import COLLECTIVE_EDGE, QUEUE_EDGE, GradientSync, member_lists
from extradeep.predictor.graph import EDGE_KINDS, OpGraph

EVENT = EDGE_KINDS.index("event")


def rewrite_buckets(
    graph: OpGraph, sync: GradientSync, layout, unit_bytes, cost: CollectiveCost, parts=None
) -> tuple[OpGraph, np.ndarray]:
    """The graph with every step's gradient collectives replaced by one collective per bucket of
    `layout` (contiguous units in ready order). A new collective waits for the anchors of all its
    units (so for its last gradient), for the previous one on the stream, and for what preceded
    the first measured collective; whatever waited for a measured collective now waits for the new
    one that holds that collective's last unit. Its pure time is `cost` at the bucket's bytes; the
    measured collectives stay as isolated zero-length nodes, so node ids do not change.
    `parts`: pieces per bucket (tensor partitioning: a bucket sent as k collectives of 1/k of its
    bytes, one after another). Returns (graph, ids of the new collective nodes)."""
    layout = [int(c) for c in layout]
    parts = [1] * len(layout) if parts is None else [int(k) for k in parts]
    bucket_of_unit = np.repeat(np.arange(len(layout)), layout)
    nbytes = bucket_sums(unit_bytes, layout)
    piece_bytes = np.repeat(nbytes / np.asarray(parts), parts)
    first_piece = np.cumsum([0, *parts])[:-1]
    n_pieces = int(sum(parts))
    members = member_lists(graph)
    old_all = np.concatenate([s.colls for s in sync.steps])
    entry = {int(c): members.get(int(c), [int(c)]) for c in old_all}
    entry_nodes = np.array(sorted({m for ms in entry.values() for m in ms} | set(old_all.tolist())), dtype=np.int64)
    keep = ~np.isin(graph.dst, old_all) & ~np.isin(graph.src, old_all)
    # members keep their launch/queue in-edges (they still arrive), but no longer feed a collective
    keep &= ~((graph.edge_kind == COLLECTIVE_EDGE) & np.isin(graph.dst, old_all))
    new_rows, src, dst, lag, kind = [], [], [], [], []
    base = graph.n
    for s in sync.steps:
        ids = base + len(new_rows) + np.arange(n_pieces)
        last_unit = np.array([np.flatnonzero(s.unit_bucket == k).max() for k in range(len(s.colls))])
        for j in range(len(layout)):
            for u in np.flatnonzero(bucket_of_unit == j):
                a_src, a_lag = s.anchors[u]
                src += a_src.tolist()
                lag += np.asarray(a_lag, dtype=float).tolist()
                kind += [EVENT] * len(a_src)
                dst += [ids[first_piece[j]]] * len(a_src)
        for k in range(1, n_pieces):
            src.append(ids[k - 1])
            dst.append(ids[k])
            lag.append(0.0)
            kind.append(QUEUE_EDGE)
        f_src, f_lag = s.fifo
        src += f_src.tolist()
        lag += np.asarray(f_lag, dtype=float).tolist()
        dst += [ids[0]] * len(f_src)
        kind += [QUEUE_EDGE] * len(f_src)
        # out-edges of the measured collectives, from the new bucket holding their last unit
        outs = np.flatnonzero(np.isin(graph.src, s.colls) & ~np.isin(graph.dst, entry_nodes))
        pos = {int(c): k for k, c in enumerate(s.colls)}
        last_piece = first_piece + np.asarray(parts) - 1
        for e in outs:
            src.append(ids[last_piece[bucket_of_unit[last_unit[pos[int(graph.src[e])]]]]])
            dst.append(int(graph.dst[e]))
            lag.append(float(graph.lag[e]))
            kind.append(int(graph.edge_kind[e]))
        new_rows += [_bucket_row(graph, s.colls[-1], j) for j in range(n_pieces)]
    nodes = pd.concat([graph.nodes, pd.DataFrame(new_rows)], ignore_index=True)
    nodes.attrs.update(graph.nodes.attrs)
    n_new = len(new_rows)
    dur = np.concatenate([graph.dur, np.tile(cost.time(piece_bytes), len(sync.steps))])
    dur[old_all] = 0.0
    release = np.concatenate([graph.release, np.full(n_new, -np.inf)])
    release[old_all] = np.where(np.isfinite(release[old_all]), release[old_all], 0.0)
    new = _with_edges(
        graph,
        nodes,
        np.concatenate([graph.src[keep], np.asarray(src, dtype=np.int64)]),
        np.concatenate([graph.dst[keep], np.asarray(dst, dtype=np.int64)]),
        np.concatenate([graph.lag[keep], np.asarray(lag, dtype=float)]),
        np.concatenate([graph.edge_kind[keep], np.asarray(kind, dtype=graph.edge_kind.dtype)]),
        dur=dur,
        gap=np.concatenate([graph.gap, np.zeros(n_new)]),
        release=release,
        extra=n_new,
    )
    return new, np.arange(base, base + n_new)


def _bucket_row(graph: OpGraph, like: int, j: int) -> dict:
    row = graph.nodes.iloc[int(like)].to_dict()
    row.update(rank=-1, queue="collective", is_gpu=True, kind="collective", role="sync", coll=-1, corr=-1)
    row[NAME] = str(row[NAME])
    return row


def _with_edges(graph: OpGraph, nodes, src, dst, lag, kind, dur, gap, release, extra: int) -> OpGraph:
    order = np.lexsort((src, dst))
    src, dst, lag, kind = src[order], dst[order], lag[order], kind[order]
    dup = np.r_[False, (src[1:] == src[:-1]) & (dst[1:] == dst[:-1])]
    keep = ~dup
    os_wait = None if graph.os_wait is None else np.concatenate([graph.os_wait, np.zeros(extra)])
    return OpGraph(
        nodes=nodes,
        src=src[keep],
        dst=dst[keep],
        lag=lag[keep],
        edge_kind=kind[keep],
        dur=dur,
        gap=gap,
        release=release,
        coll_offset=np.concatenate([graph.coll_offset, np.zeros(extra)]),
        info=dict(graph.info),
        os_wait=os_wait,
    )


def fuse_chains(graph: OpGraph, chains: list[np.ndarray], keep_gaps: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Durations and gaps with each chain of GPU kernels (node ids, stream order) run as one
    kernel: the first holds the GPU time of all; the later ones' launch calls and the host time
    before them (CPU gaps, not waits in OS calls) go away, as with torch.compile, a foreach or
    fused optimizer, or a CUDA graph. `keep_gaps`: only the launch calls go (the host's own work
    between them stays: the pessimistic end)."""
    dur, gap = graph.dur.copy(), graph.gap.copy()
    os_wait = np.zeros(graph.n) if graph.os_wait is None else graph.os_wait
    launcher = launch_sources(graph)
    for chain in chains:
        dur[chain[0]] = dur[chain].sum()
        dur[chain[1:]] = 0.0
        calls = launcher[chain[1:]]
        calls = calls[calls >= 0]
        dur[calls] = 0.0
        if not keep_gaps:
            gap[calls] = np.minimum(os_wait[calls], gap[calls])
    return dur, gap


def launch_sources(graph: OpGraph) -> np.ndarray:
    """Per node: the CPU call that launched it (-1: none)."""
    out = np.full(graph.n, -1, dtype=np.int64)
    launch = graph.edge_kind == EDGE_KINDS.index("launch")
    out[graph.dst[launch]] = graph.src[launch]
    return out


def own_stream(graph: OpGraph, copies: np.ndarray) -> OpGraph:
    """The graph with each copy in `copies` on a stream of its own: it no longer waits for the op
    before it on its stream (prefetching); the op after it still waits for it (it needs the data)
    and, as before, for the op before the copy (the stream's order without the copy)."""
    queue_in = np.isin(graph.dst, copies) & (graph.edge_kind == QUEUE_EDGE)
    queue_out = np.isin(graph.src, copies) & (graph.edge_kind == QUEUE_EDGE)
    pred = dict(zip(graph.dst[queue_in].tolist(), graph.src[queue_in].tolist()))
    bridge_src, bridge_dst = [], []
    for c, nxt in zip(graph.src[queue_out].tolist(), graph.dst[queue_out].tolist()):
        p = pred.get(c)
        while p is not None and p in pred and p in set(copies.tolist()):  # consecutive copies
            p = pred.get(p)
        if p is not None:
            bridge_src.append(p)
            bridge_dst.append(nxt)
    keep = ~queue_in
    n = len(bridge_src)
    return _with_edges(
        graph,
        graph.nodes,
        np.concatenate([graph.src[keep], np.asarray(bridge_src, dtype=np.int64)]),
        np.concatenate([graph.dst[keep], np.asarray(bridge_dst, dtype=np.int64)]),
        np.concatenate([graph.lag[keep], np.zeros(n)]),
        np.concatenate([graph.edge_kind[keep], np.full(n, QUEUE_EDGE, dtype=graph.edge_kind.dtype)]),
        dur=graph.dur,
        gap=graph.gap,
        release=graph.release,
        extra=0,
    )
