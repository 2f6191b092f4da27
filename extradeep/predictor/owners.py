"""Who owns the critical path: every second of it attributed to the operators and annotations around it.

A critical path is a chain of runtime calls, CPU gaps between them, GPU ops and waits. The classes
(compute, communication, memory, cpu_overhead, idle) say what kind of time it is; the owners say
whose: each piece of CPU time goes to the stack of framework ranges (PyTorch `cpu_op` /
`user_annotation`, NVTX ranges) open on its thread at that moment, each GPU op and GPU wait to the
stack around the call that launched it. A CPU-bound step then names the operator that spends the
CPU time (`## optimizer ## > Optimizer.step#Shampoo.step`), a GPU-bound one the operator whose
kernels run, as HolisticTraceAnalysis attributes each critical-path edge to the operator holding it.

Ranges of an autograd engine thread nest in its main thread's (`threads.merged_threads`): the
backward's operators appear inside `## backward ##`. Time outside every range is owned by the call
or GPU op itself, or, for CPU time between calls, by `HOST_CODE`.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from extradeep.columns import END, GROUP, HI, IS_GPU, LO, NAME, NODE, QUEUE, RANK, ROLE, START, STEP_ID
from extradeep.predictor.critical_path import CLASSES
from extradeep.predictor.graph import EDGE_KINDS, NS, OpGraph
from extradeep.predictor.replay import _ranges

SEPARATOR = " > "
HOST_CODE = "(host code outside any range)"
SELF = "(its own code, outside the ranges inside it)"
# levels of nesting tabulated; PyTorch's are 4-8 deep, while NVTX ranges pushed and never popped
# until exit (PyProf's markers in one real export) nest over a thousand deep
MAX_LEVELS = 12
OWNER_COLUMNS = ["level", "owner", NAME, "parent", "seconds", "share", *CLASSES]
# PyTorch's NVTX names carry per-call counters ("aten::mm, seq = 12, op_id = 345"); owners are per op
_COUNTERS = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+")
# instance numbers in range names ("FSDP::pre_forward (blocks.15._checkpoint_wrapped_module)",
# "layers.3.attn"): one owner for the same operation on every layer; digits inside words stay
# ("conv2d", "max_pool2d")
_INSTANCE = re.compile(r"(?<=[._#\[( ])\d+(?=$|[._\])\s,:])")


def range_owner(name) -> str:
    """The owner name of a range: per-call counters dropped, layer/instance numbers as N."""
    return _INSTANCE.sub("N", _COUNTERS.sub("", str(name)))


class _Forest:
    """The ranges of one rank's thread group as a forest, and the innermost range at every instant."""

    def __init__(self, ranges: pd.DataFrame, base: int):
        order = np.lexsort((-ranges[END].to_numpy(), ranges[START].to_numpy()))
        r = ranges.iloc[order]
        n = len(r)
        self.ids = base + np.arange(n)
        raw = r[NAME].astype(str).to_numpy()
        owner_of = {name: range_owner(name) for name in pd.unique(raw)}
        self.names = [owner_of[name] for name in raw]
        self.parent = np.full(n, -1)
        # ends before starts at one instant; outer ranges (earlier in `order`) start first
        times = np.r_[r[START].to_numpy(), r[END].to_numpy()]
        is_start = np.r_[np.ones(n, dtype=bool), np.zeros(n, dtype=bool)]
        which = np.r_[np.arange(n), np.arange(n)]
        events = np.lexsort((which, is_start, times))
        last = np.r_[times[events][1:] != times[events][:-1], True]  # the last event at each instant
        inner, stack = [], []
        for t_last, start, i in zip(last.tolist(), is_start[events].tolist(), which[events].tolist()):
            if start:
                self.parent[i] = stack[-1] if stack else -1
                stack.append(i)
            elif stack and stack[-1] == i:
                stack.pop()
            elif i in stack:  # a range that outlives its parent by a few ns is still closed
                stack.remove(i)
            if t_last:
                inner.append(stack[-1] if stack else -1)
        self.times = np.asarray(times[events][last], dtype=float)
        self.inner = np.asarray(inner, dtype=np.int64)

    def chains(self) -> dict[int, tuple]:
        """Global range id -> names from the outermost range down to it."""
        out: dict[int, tuple] = {}
        for i in range(len(self.names)):
            p = self.parent[i]
            out[int(self.ids[i])] = (out[int(self.ids[p])] if p >= 0 else ()) + (self.names[i],)
        return out

    def at(self, t: np.ndarray) -> np.ndarray:
        """Global id of the innermost range open at each time (-1: none)."""
        k = np.searchsorted(self.times, t, side="right") - 1
        local = np.where(k >= 0, self.inner[np.maximum(k, 0)], -1)
        return np.where(local >= 0, self.ids[np.maximum(local, 0)], -1)

    def split(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pieces of the intervals [lo, hi): (interval index, global range id or -1, overlap)."""
        bounds = np.r_[-np.inf, self.times, np.inf]
        inner = np.r_[-1, self.inner]
        j0 = np.searchsorted(bounds, lo, side="right") - 1
        j1 = np.maximum(np.searchsorted(bounds, hi, side="left"), j0 + 1)
        seg = np.repeat(np.arange(len(lo)), j1 - j0)
        j = _ranges(j0, j1)
        overlap = np.minimum(hi[seg], bounds[j + 1]) - np.maximum(lo[seg], bounds[j])
        local = inner[j]
        owner = np.where(local >= 0, self.ids[np.maximum(local, 0)], -1)
        return seg, owner, np.maximum(overlap, 0.0)


def path_owners(graph: OpGraph, path: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """Pieces of the critical path with their owners: step_id, seconds, class, chain (tuple of
    names, outermost first, ending with the call or GPU op that took the time where one did)."""
    segments = _segments(graph, path)
    forests, chains = _forests(graph, ranges)
    parts = []
    for key, seg in segments.groupby(GROUP, sort=False):
        forest = forests.get(key)
        if forest is None:
            parts.append(seg.assign(range_id=-1))
            continue
        point = seg[LO].to_numpy() == seg[HI].to_numpy()
        pt = seg[point].assign(range_id=forest.at(seg.loc[point, LO].to_numpy()))
        iv = seg[~point]
        idx, owner, overlap = forest.split(iv[LO].to_numpy(), iv[HI].to_numpy())
        length = (iv[HI] - iv[LO]).to_numpy()[idx]
        pieces = iv.iloc[idx].assign(range_id=owner, seconds=iv["seconds"].to_numpy()[idx] * overlap / length)
        parts += [pt, pieces]
    out = pd.concat(parts, ignore_index=True).fillna({"leaf": ""})
    out = out.groupby([STEP_ID, "class", "range_id", "leaf"], as_index=False, sort=False)["seconds"].sum()
    base = [chains.get(int(r), ()) for r in out["range_id"]]
    out["chain"] = [b + (leaf,) if leaf else (b or (HOST_CODE,)) for b, leaf in zip(base, out["leaf"])]
    return out[[STEP_ID, "seconds", "class", "chain"]]


def owner_table(pieces: pd.DataFrame, span: float, depth: int = MAX_LEVELS) -> pd.DataFrame:
    """Seconds per owner at each level of the hierarchy down to `depth` (level 1: the outermost
    owners, which partition the path). Columns OWNER_COLUMNS, largest first per level."""
    if pieces.empty:
        return pd.DataFrame(columns=OWNER_COLUMNS)
    pieces = pieces.groupby(["chain", "class"], as_index=False, sort=False)["seconds"].sum()
    deepest = max(len(c) for c in pieces["chain"])
    rows = []
    for level in range(1, min(deepest, depth) + 1):
        keep = pieces[[len(c) >= level for c in pieces["chain"]]]
        key = [SEPARATOR.join(c[:level]) for c in keep["chain"]]
        wide = keep.assign(owner=key).pivot_table(
            index="owner", columns="class", values="seconds", aggfunc="sum", fill_value=0.0
        )
        wide = wide.reindex(columns=list(CLASSES), fill_value=0.0)
        wide["seconds"] = wide.sum(axis=1)
        names = wide.index.to_series().str.split(SEPARATOR, regex=False)
        wide = wide.assign(
            level=level,
            name=names.str[-1],
            parent=names.str[:-1].str.join(SEPARATOR),
            share=wide["seconds"] / span if span > 0 else np.nan,
        )
        rows.append(wide.reset_index().sort_values("seconds", ascending=False, kind="stable"))
    return pd.concat(rows, ignore_index=True)[OWNER_COLUMNS]


def hot_path(owners: pd.DataFrame, owner: str, at_least: float = 0.5) -> list[tuple[str, float]]:
    """(name, share of the path) of the largest owner inside `owner`, level by level, while it holds
    at least `at_least` of its parent's time."""
    out, parent = [], owners[owners["owner"] == owner]
    while len(parent):
        inside = owners[owners["parent"] == parent["owner"].iloc[0]]
        total = float(parent["seconds"].iloc[0])
        if inside.empty or inside["seconds"].iloc[0] < at_least * total:
            own = total - float(inside["seconds"].sum())
            if len(inside) and own >= at_least * total:  # time in the range but in none inside it
                out.append((SELF, own / total * float(parent["share"].iloc[0])))
            break
        parent = inside.head(1)
        out.append((str(parent[NAME].iloc[0]), float(parent["share"].iloc[0])))
    return out


def _segments(graph: OpGraph, path: pd.DataFrame) -> pd.DataFrame:
    """Each path row's own time and wait as (group, lo, hi, seconds, class, leaf): CPU time as the
    measured interval on its thread, GPU time as the instant its launching call started."""
    n = graph.nodes
    ids = path[NODE].to_numpy()
    anchor = _anchors(graph, path)
    a = anchor[ids]
    start, end = n[START].to_numpy()[a], n[END].to_numpy()[a]
    is_gpu = n[IS_GPU].to_numpy()[ids]
    wake = n[ROLE].to_numpy()[ids] == "wake"
    contrib, wait, os_wait = (path[c].to_numpy() for c in ("contribution", "wait", "os_wait"))
    own_hi = np.where(wake, end, start + contrib)
    own_lo = np.where(wake, end - contrib, start)
    leaf = np.where(n[ROLE].to_numpy()[ids] == "marker", None, n[NAME].to_numpy()[ids]).astype(object)
    group = _group_keys(graph, a)
    parts = []
    for lo, hi, sec, cls, lf in (
        (own_lo, own_hi, contrib, path["class"].to_numpy(), leaf),
        (own_lo - wait, own_lo, wait - os_wait, path["wait_class"].to_numpy(), np.where(is_gpu, leaf, None)),
        (own_lo - wait, own_lo, os_wait, np.full(len(ids), "idle", dtype=object), np.full(len(ids), None)),
    ):
        parts.append(
            pd.DataFrame(
                {
                    STEP_ID: path[STEP_ID].to_numpy() if STEP_ID in path else -1,
                    GROUP: group,
                    LO: np.where(is_gpu, start, lo),
                    HI: np.where(is_gpu, start, hi),
                    "seconds": sec,
                    "class": cls,
                    "leaf": lf,
                }
            )
        )
    out = pd.concat(parts, ignore_index=True)
    return out[out["seconds"] > 0].reset_index(drop=True)


def _anchors(graph: OpGraph, path: pd.DataFrame) -> np.ndarray:
    """Per node, the node whose thread and time place it: itself on a CPU thread, the launching
    call for a GPU op, a member's launching call for a collective (the member on the rank the path
    came from)."""
    anchor = np.arange(graph.n)
    launch = graph.edge_kind == EDGE_KINDS.index("launch")
    anchor[graph.dst[launch]] = graph.src[launch]
    coll = graph.edge_kind == EDGE_KINDS.index("collective")
    if coll.any():
        rank = graph.nodes[RANK].to_numpy()
        members = pd.DataFrame({"member": graph.src[coll], "sync": graph.dst[coll], RANK: rank[graph.src[coll]]})
        ids = path[NODE].to_numpy()
        later = np.r_[ids[0], ids[:-1]] if len(ids) else ids  # the path is latest first
        want = pd.DataFrame({"sync": ids, RANK: rank[later]})
        want = want[graph.nodes[ROLE].to_numpy()[ids] == "sync"].drop_duplicates("sync")
        pick = want.merge(members, on=["sync", RANK], how="left")
        fallback = members.drop_duplicates("sync").set_index("sync")["member"]
        chosen = pick["member"].fillna(pick["sync"].map(fallback)).astype(np.int64).to_numpy()
        anchor[pick["sync"].to_numpy()] = anchor[chosen]
    return anchor


def _group_keys(graph: OpGraph, nodes: np.ndarray) -> np.ndarray:
    merged = graph.info.get("merged_threads", {})
    rank, queue = graph.nodes[RANK].to_numpy()[nodes], graph.nodes[QUEUE].to_numpy()[nodes]
    return np.array([f"{r}|{merged.get((r, q), q)}" for r, q in zip(rank, queue)], dtype=object)


def _forests(graph: OpGraph, ranges: pd.DataFrame) -> tuple[dict, dict]:
    """One forest per rank and thread group, and the name chain of every range."""
    if ranges.empty:
        return {}, {}
    t0 = graph.info.get("t0_ns", 0)
    merged = graph.info.get("merged_threads", {})
    frame = ranges.assign(
        start=(ranges[START].to_numpy() - t0) * NS,
        end=(ranges[END].to_numpy() - t0) * NS,
        group=[f"{r}|{merged.get((r, q), q)}" for r, q in zip(ranges[RANK], ranges[QUEUE])],
    )
    forests, chains, base = {}, {}, 0
    frame = frame[(frame[END] > frame[START]).to_numpy()]  # an empty range holds no time
    for key, grp in frame.groupby(GROUP, sort=False):
        forest = _Forest(grp, base)
        base += len(grp)
        forests[key] = forest
        chains.update(forest.chains())
    return forests, chains
