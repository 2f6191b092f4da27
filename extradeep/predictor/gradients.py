"""Where a run's gradients become ready, how large they are, and which collectives synchronise them.

Per steady-state training step the gradient collectives are the step's all-reduces (DDP) or
reduce-scatters (FSDP, ZeRO) of its dominant collective name, in launch order; tiny ones (below
1 % of the largest, such as a logged loss) are left out. The units the bucket search groups are:

- the gradients themselves, where the profile records PyTorch's `AccumulateGrad` operator on every
  rank (Kineto `cpu_op`, or NVTX from `emit_nvtx`): a gradient is ready when its operator returns
  on the CPU and the GPU has run what was launched before it. Sizes come from the recorded shapes
  (`record_shapes=True`: Kineto `Input Dims`, NVTX `sizes = [[...]]`) times the element size, else
  each bucket's bytes are shared equally among the gradients it held;
- else the measured collectives themselves (only merging is possible then).

Each unit keeps its *anchor edges* in the graph (the nodes whose end + lag make it ready), so a
new bucket layout can be wired into the replay graph (`extradeep.predictor.rewrite`).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    CATEGORY,
    COLL,
    END,
    IS_GPU,
    KIND,
    LAUNCH,
    NAME,
    NODE,
    OFFSET_NS,
    PATH,
    PURE,
    QUEUE,
    RANK,
    ROLE,
    START,
)
from extradeep.predictor.collectives import collective_kind
from extradeep.predictor.graph import EDGE_KINDS, NS, OpGraph
from extradeep.predictor.replay import ReplayResult

GRADIENT_KINDS = ("all_reduce", "reduce_scatter")
ACCUMULATE = "AccumulateGrad"
TINY = 0.01  # collectives below this share of the step's largest are not gradient buckets
_SIZES = re.compile(r"sizes = \[(.*)\]\s*(?:,|$)")
DTYPE_BYTES = {"f32": 4, "float": 4, "f16": 2, "half": 2, "bf16": 2, "bfloat16": 2, "f64": 8, "double": 8}
QUEUE_EDGE, LAUNCH_EDGE, COLLECTIVE_EDGE = (EDGE_KINDS.index(k) for k in ("queue", "launch", "collective"))


@dataclass
class SyncStep:
    """One training step's gradient synchronisation."""

    key: tuple  # (epoch, phase, step)
    colls: np.ndarray  # node ids of its gradient collectives, launch order
    unit_bucket: np.ndarray  # measured bucket (index into colls) of each unit
    anchors: list  # per unit: (src node ids, lags) that make it ready
    fifo: tuple  # (src node ids, lags) of what precedes the first collective on its stream
    base: float  # the step's replayed start (s), for times relative to the step


@dataclass
class GradientSync:
    """The gradient synchronisation of a run, as the bucket search needs it: units in ready order,
    each a share of one measured collective (its bucket)."""

    steps: list[SyncStep]
    unit_bucket: np.ndarray  # measured bucket of each unit
    unit_share: np.ndarray  # the unit's share of its bucket's bytes (shapes, or equal)
    coll_bytes: np.ndarray  # per measured collective: bytes (median over steps; 0 where unknown)
    coll_pure: np.ndarray  # per measured collective: pure duration (s, median over steps)
    source: str  # "gradients (recorded shapes)", "gradients (sizes shared within buckets)", "collectives"
    name: str  # the collective's name
    kind: str  # all_reduce | reduce_scatter
    sized: bool  # whether the collectives' bytes are known
    element_bytes: int = 4
    notes: list[str] = field(default_factory=list)

    @property
    def n_units(self) -> int:
        return len(self.unit_bucket)

    @property
    def measured_layout(self) -> list[int]:
        return np.bincount(self.unit_bucket, minlength=len(self.coll_pure)).tolist()

    def unit_bytes(self, volume: np.ndarray | None = None) -> np.ndarray:
        """Bytes per unit (or its share of `volume` per measured collective, when sizes are unknown)."""
        per_bucket = self.coll_bytes if volume is None else volume
        return self.unit_share * per_bucket[self.unit_bucket]


def find_gradient_sync(graph: OpGraph, trace, windows: pd.DataFrame, base: ReplayResult) -> GradientSync | None:
    """The gradient synchronisation of the steps in `windows` (epoch, phase, step, lo, hi in graph
    seconds), or None when the steps hold no gradient collectives. Units are gradients where every
    step has the same AccumulateGrad count on every rank, else the collectives."""
    colls = gradient_collectives(graph)
    if colls.empty:
        return None
    name = colls.groupby(NAME)[PURE].sum().idxmax()
    colls = colls[colls[NAME] == name]
    per_step = []
    for w in windows.itertuples(index=False):
        mine = colls[(colls[LAUNCH] >= w.lo) & (colls[LAUNCH] < w.hi)].sort_values(LAUNCH)
        if len(mine) and mine[BYTES].max() > 0:
            mine = mine[mine[BYTES] >= TINY * mine[BYTES].max()]
        if len(mine):
            per_step.append(((w.epoch, w.phase, w.step), mine, w))
    if not per_step:
        return None
    counts = {len(m) for _, m, _ in per_step}
    notes = []
    if len(counts) > 1:  # e.g. a step that ran a different number of buckets: keep the common case
        common = max(counts, key=lambda c: sum(len(m) == c for _, m, _ in per_step))
        per_step = [p for p in per_step if len(p[1]) == common]
        notes.append(f"steps differ in their number of gradient collectives; using the {len(per_step)} with {common}")
    units = _gradient_units(graph, trace, per_step)
    element = _element_bytes(str(name))
    if units is None:
        return _collective_units(graph, base, per_step, str(name), element, notes)
    return _accumulate_units(graph, base, per_step, units, str(name), element, notes, trace)


def gradient_collectives(graph: OpGraph) -> pd.DataFrame:
    """Gradient-kind collectives: virtual nodes and unmatched NCCL kernels, with their launch time
    (earliest launching call of a member), bytes and pure duration."""
    n = graph.nodes
    role, kind = n[ROLE].to_numpy(), n[KIND].to_numpy()
    names = n[NAME].astype(str).to_numpy()
    is_kind = np.array([collective_kind(x) in GRADIENT_KINDS for x in names], dtype=bool)
    virtual = (role == "sync") & (kind == "collective") & is_kind
    single = (role == "op") & (kind == "kernel") & (n[COLL].to_numpy() < 0) & is_kind
    single &= (n[CATEGORY].to_numpy() == "communication") & n[IS_GPU].to_numpy()
    ids = np.flatnonzero(virtual | single)
    if not len(ids):
        return pd.DataFrame(columns=[NODE, NAME, BYTES, PURE, LAUNCH])
    launched = launch_times(graph)
    members = member_lists(graph)
    launch = [min(launched[m] for m in members.get(i, [i])) for i in ids]
    return pd.DataFrame(
        {
            NODE: ids,
            NAME: names[ids],
            BYTES: n[BYTES].to_numpy()[ids],
            PURE: graph.dur[ids],
            LAUNCH: launch,
        }
    )


def launch_times(graph: OpGraph) -> np.ndarray:
    """Measured start of each node's launching call (its own start where none)."""
    start = graph.nodes[START].to_numpy()
    out = start.copy()
    launch = graph.edge_kind == LAUNCH_EDGE
    out[graph.dst[launch]] = start[graph.src[launch]]
    return out


def member_lists(graph: OpGraph) -> dict:
    """Virtual collective node -> its member nodes."""
    coll = graph.edge_kind == COLLECTIVE_EDGE
    out: dict = {}
    for s, d in zip(graph.src[coll].tolist(), graph.dst[coll].tolist()):
        out.setdefault(d, []).append(s)
    return out


def in_edges(graph: OpGraph, nodes) -> np.ndarray:
    """Edge ids into any of `nodes`."""
    ptr = graph.info.get("_pred_ptr")
    if ptr is None or len(ptr) != graph.n + 1:
        ptr = graph.info["_pred_ptr"] = graph.pred_ptr()
    parts = [np.arange(ptr[v], ptr[v + 1]) for v in np.atleast_1d(nodes)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _entry_nodes(graph: OpGraph, coll: int, members: dict) -> list:
    return members.get(int(coll), [int(coll)])


def _collective_units(graph, base, per_step, name, element, notes) -> GradientSync:
    """Units = the measured collectives: ready by their members' non-FIFO in-edges."""
    members = member_lists(graph)
    steps = []
    for key, mine, w in per_step:
        ids = mine[NODE].to_numpy()
        anchors = []
        for c in ids:
            e = in_edges(graph, _entry_nodes(graph, c, members))
            e = e[(graph.edge_kind[e] != QUEUE_EDGE) & (graph.edge_kind[e] != COLLECTIVE_EDGE)]
            anchors.append((graph.src[e], graph.lag[e]))
        steps.append(
            SyncStep(key, ids, np.arange(len(ids)), anchors, _fifo(graph, ids[0], members, set(ids)), float(w.base))
        )
    notes = notes + [
        "no AccumulateGrad operator on every rank (profile with the PyTorch profiler, or emit_nvtx): the search "
        "can merge the measured collectives but not split them"
    ]
    k = len(steps[0].colls)
    return _sync(steps, per_step, np.arange(k), np.ones(k), "collectives", name, element, notes, graph)


def _fifo(graph, first_coll, members, colls: set) -> tuple:
    """What precedes the first gradient collective on its stream (queue edges not from one of `colls`)."""
    e = in_edges(graph, _entry_nodes(graph, first_coll, members))
    e = e[(graph.edge_kind[e] == QUEUE_EDGE) & ~np.isin(graph.src[e], list(colls))]
    return graph.src[e], graph.lag[e]


def _gradient_units(graph, trace, per_step) -> list | None:
    """Per step: per rank the hook times (graph seconds) of its outermost AccumulateGrad ranges and
    their queue, or None when some rank or step has none or counts differ."""
    ranges = trace.ranges
    if ranges.empty:
        return None
    acc = ranges[ranges[NAME].astype(str).str.contains(ACCUMULATE, regex=False)]
    if acc.empty:
        return None
    acc = _outermost(acc)
    t0 = graph.info.get("t0_ns", 0)
    ranks = sorted(graph.nodes.loc[graph.nodes[RANK] >= 0, RANK].unique())
    out = []
    for _, _mine, w in per_step:
        lo_ns, hi_ns = w.lo / NS + t0, w.hi / NS + t0
        inside = acc[(acc[END] >= lo_ns) & (acc[END] < hi_ns)]
        by_rank = {r: g.sort_values(END) for r, g in inside.groupby(RANK)}
        lengths = {len(by_rank.get(r, ())) for r in ranks}
        if len(lengths) != 1 or 0 in lengths:
            return None
        out.append(by_rank)
    if len({len(next(iter(s.values()))) for s in out}) != 1:
        return None
    return out


def _outermost(acc: pd.DataFrame) -> pd.DataFrame:
    """AccumulateGrad ranges not inside another one on the same thread (Kineto nests two per hook)."""
    keep = []
    for _, g in acc.sort_values([START, END], ascending=[True, False]).groupby([RANK, QUEUE]):
        reach = -np.inf
        for row in g.itertuples():
            if row.end > reach:
                keep.append(row.Index)
                reach = row.end
    return acc.loc[keep]


def _accumulate_units(graph, base, per_step, units, name, element, notes, trace) -> GradientSync:
    """Units = gradients: anchored on the last GPU op launched before each hook and on the CPU call
    before it; assigned to the first measured collective launched after the hook."""
    t0 = graph.info.get("t0_ns", 0)
    members = member_lists(graph)
    launched = launch_times(graph)
    gpu_ops, cpu_ops = _op_index(graph, launched)
    launch_lag = _LaunchLag(graph, members)
    steps, bucket_of, lag_samples, dropped = [], [], [], 0
    for (key, mine, w), by_rank in zip(per_step, units):
        ids = mine[NODE].to_numpy()
        coll_launch = {r: np.array([_member_launch(graph, members, launched, c, r) for c in ids]) for r in by_rank}
        n_units = len(next(iter(by_rank.values())))
        anchors = [([], []) for _ in range(n_units)]
        bucket = np.full(n_units, -1)
        for r, hooks in by_rank.items():
            h = (hooks[END].to_numpy() - t0) * NS
            queue = hooks[QUEUE].to_numpy()
            k = np.searchsorted(coll_launch[r], h, side="left")
            bucket = np.where(bucket < 0, k, np.minimum(bucket, k))
            for i in range(n_units):
                g = gpu_ops.last_before(r, None, h[i])
                c = cpu_ops.last_before(r, queue[i], h[i])
                if g is not None:
                    anchors[i][0].append(g)
                    anchors[i][1].append(0.0)
                if c is not None:
                    anchors[i][0].append(c)
                    anchors[i][1].append(np.nan)  # filled with the calibrated hook-to-collective lag
                if c is not None and k[i] < len(ids):
                    lag_samples.append(launch_lag(ids[k[i]], r, c))
        keep = bucket < len(ids)
        dropped += int((~keep).sum())
        steps.append(
            SyncStep(
                key,
                ids,
                bucket[keep],
                [a for a, ok in zip(anchors, keep) if ok],
                _fifo(graph, ids[0], members, set(ids)),
                float(w.base),
            )
        )
        bucket_of.append(bucket[keep])
    if len({len(b) for b in bucket_of}) != 1 or any((b != bucket_of[0]).any() for b in bucket_of):
        return _collective_units(
            graph, base, per_step, name, element, notes + ["gradients fall into different buckets in different steps"]
        )
    lag = float(np.nanmedian(lag_samples)) if lag_samples else 0.0
    for s in steps:
        s.anchors = [(np.asarray(src, dtype=np.int64), np.where(np.isnan(lg), lag, lg)) for src, lg in s.anchors]
    bucket = bucket_of[0]
    coll_bytes = np.median(np.stack([m[BYTES].to_numpy(float) for _, m, _ in per_step]), axis=0)
    layout = np.bincount(bucket, minlength=len(coll_bytes)).tolist()
    shapes = _unit_shapes(trace, units[0], t0)
    if dropped:
        notes.append(f"{dropped} gradient(s) became ready after the last collective was launched; left out")
    if 0 in layout:
        notes.append("a measured collective holds no gradient")
        return _collective_units(graph, base, per_step, name, element, notes)
    if shapes is not None and len(shapes) == len(bucket) + dropped // len(steps):
        weight = np.asarray(shapes, dtype=float)[: len(bucket)]
        source = "gradients (recorded shapes)"
    else:
        weight = np.ones(len(bucket))
        source = "gradients (sizes shared within buckets)"
        notes.append(
            "gradient shapes not recorded (profile with record_shapes=True): each bucket's bytes are shared "
            "equally among its gradients"
        )
    share = weight / np.bincount(bucket, weights=weight)[bucket]
    return _sync(steps, per_step, bucket, share, source, name, element, notes, graph)


def _sync(steps, per_step, bucket, share, source, name, element, notes, graph) -> GradientSync:
    coll_bytes = np.median(np.stack([m[BYTES].to_numpy(float) for _, m, _ in per_step]), axis=0)
    coll_pure = np.median(np.stack([graph.dur[s.colls] for s in steps]), axis=0)
    sized = bool(np.all(coll_bytes > 0))
    return GradientSync(
        steps=steps,
        unit_bucket=np.asarray(bucket),
        unit_share=np.asarray(share, dtype=float),
        coll_bytes=coll_bytes,
        coll_pure=coll_pure,
        source=source,
        name=name,
        kind=collective_kind(name),
        sized=sized,
        element_bytes=element,
        notes=notes,
    )


class _OpIndex:
    """Per (rank[, queue]): node ids sorted by a time, for 'the last one before t'."""

    def __init__(self, ids: np.ndarray, times: np.ndarray, ranks: np.ndarray, queues=None):
        self.groups = {}
        keys = ranks if queues is None else list(zip(ranks, queues))
        frame = pd.DataFrame({"id": ids, "t": times, "k": list(keys)})
        for k, g in frame.groupby("k", sort=False):
            g = g.sort_values("t", kind="stable")
            self.groups[k] = (g["id"].to_numpy(), g["t"].to_numpy())

    def last_before(self, rank, queue, t: float):
        key = rank if queue is None else (rank, queue)
        ids, times = self.groups.get(key, (None, None))
        if ids is None:
            return None
        k = np.searchsorted(times, t, side="left") - 1
        return int(ids[k]) if k >= 0 else None


def _op_index(graph: OpGraph, launched: np.ndarray) -> tuple[_OpIndex, _OpIndex]:
    """GPU compute ops by launch time per rank; CPU calls by start per (rank, thread)."""
    n = graph.nodes
    role = n[ROLE].to_numpy()
    gpu = np.flatnonzero(n[IS_GPU].to_numpy() & (role == "op") & (n[CATEGORY].to_numpy() != "communication"))
    cpu = np.flatnonzero(~n[IS_GPU].to_numpy() & (role == "op"))
    rank, queue = n[RANK].to_numpy(), n[QUEUE].to_numpy()
    return (
        _OpIndex(gpu, launched[gpu], rank[gpu]),
        _OpIndex(cpu, n[START].to_numpy()[cpu], rank[cpu], queue[cpu]),
    )


def _member_launch(graph, members, launched, coll, rank) -> float:
    """Launch time of a collective's member on one rank (the collective's own where it is single)."""
    ids = members.get(int(coll), [int(coll)])
    rank_of = graph.nodes[RANK].to_numpy()
    mine = [m for m in ids if rank_of[m] == rank] or ids
    return float(min(launched[m] for m in mine))


class _LaunchLag:
    """Measured time from the end of the CPU call before a bucket's last hook to its collective's
    start on that rank, when launch-bound: launch call end - anchor end + the launch edge's lag."""

    def __init__(self, graph: OpGraph, members: dict):
        self.members, self.rank = members, graph.nodes[RANK].to_numpy()
        launch = graph.edge_kind == LAUNCH_EDGE
        self.call = np.full(graph.n, -1, dtype=np.int64)
        self.lag = np.zeros(graph.n)
        self.call[graph.dst[launch]] = graph.src[launch]
        self.lag[graph.dst[launch]] = graph.lag[launch]
        self.end = graph.nodes[START].to_numpy() + graph.dur

    def __call__(self, coll, rank, cpu_anchor) -> float:
        ids = self.members.get(int(coll), [int(coll)])
        mine = [m for m in ids if self.rank[m] == rank] or ids
        m = mine[0]
        if self.call[m] < 0:
            return np.nan
        return float(self.end[self.call[m]] - self.end[cpu_anchor] + self.lag[m])


def _element_bytes(name: str) -> int:
    low = name.lower()
    for key, size in DTYPE_BYTES.items():
        if f"_{key}" in low or f"{key}_" in low:
            return size
    return 4


def _unit_shapes(trace, by_rank: dict, t0: int) -> list | None:
    """Elements per gradient of the first step on the first rank, from the range names (emit_nvtx)
    or, for Kineto traces, from the recorded `Input Dims` of the AccumulateGrad operators."""
    first_rank = min(by_rank)
    names = by_rank[first_rank][NAME].astype(str).tolist()
    parsed = [_elements_from_name(x) for x in names]
    if all(p is not None for p in parsed):
        return parsed
    path = trace.files.set_index(RANK)[PATH].get(first_rank)
    if path is None or not str(path).endswith((".json", ".json.gz")):
        return None
    offset = int(trace.files.set_index(RANK)[OFFSET_NS].get(first_rank, 0))
    dims = kineto_accumulate_dims(path)
    if not dims:
        return None
    starts = by_rank[first_rank][START].to_numpy() + offset
    ends = by_rank[first_rank][END].to_numpy() + offset
    times = np.array([d[0] for d in dims])
    out = []
    for s, e in zip(starts, ends):
        k = np.flatnonzero((times >= s) & (times <= e))
        if not len(k):
            return None
        out.append(dims[k[0]][1])
    return out


def _elements_from_name(name: str) -> int | None:
    m = _SIZES.search(name)
    if not m:
        return None
    first = re.match(r"\s*\[([^\]]*)\]", m.group(1))
    if not first:
        return None
    dims = [int(d) for d in re.findall(r"\d+", first.group(1))]
    return int(np.prod(dims)) if dims else None


def kineto_accumulate_dims(path) -> list:
    """(start ns, elements) of each AccumulateGrad operator with recorded input shapes in a Kineto
    trace, by the trace's own clock. Read separately from the predictor's frames: only the search
    needs shapes, so ordinary reads stay as fast as before."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if b"Input Dims" not in raw or ACCUMULATE.encode() not in raw:
        return []
    try:
        doc = json.loads(raw)
    except ValueError:
        return []
    out = []
    for e in doc.get("traceEvents", []):
        args = e.get("args") if isinstance(e, dict) else None
        if not isinstance(args, dict) or ACCUMULATE not in str(e.get("name", "")) or "Input Dims" not in args:
            continue
        dims = args["Input Dims"]
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0]:
            try:
                ts = int(round(float(e["ts"]) * 1000))
                out.append((ts, int(np.prod([int(d) for d in dims[0]]))))
            except (KeyError, TypeError, ValueError):
                continue
    return sorted(out)
