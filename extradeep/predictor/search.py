"""The pieces of the strategy search: the replayed run it starts from, and each family of candidates
(bucket layouts, kernel fusion, copies on their own stream) evaluated by replaying the changed graph.
`extradeep.predictor.optimize` ranks them and says what to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    CATEGORY,
    COLL,
    EPOCH,
    HI,
    KIND,
    LAUNCH,
    LO,
    MEASURED,
    NAME,
    NODE,
    PHASE,
    PURE,
    RANK,
    REPLAYED,
    ROLE,
    START,
    STEP,
    STEP_ID,
    WARMUP,
)
from extradeep.errors import InputError
from extradeep.predictor.api import _critical_paths, resolve_run, step_times
from extradeep.predictor.buckets import (
    CollectiveCost,
    best_layout,
    candidate_caps,
    cap_interval,
    cap_layout,
    chain_ends,
    nice_cap_mb,
)
from extradeep.predictor.calibrate import calibrate
from extradeep.predictor.critical_path import CLASSES
from extradeep.predictor.fusion import copies_on_compute_streams, fusion_sites, launch_bound_chains
from extradeep.predictor.gradients import (
    GradientSync,
    find_gradient_sync,
    gradient_collectives,
    launch_times,
    member_lists,
)
from extradeep.predictor.graph import OpGraph, build_graph
from extradeep.predictor.replay import ReplayPlan, ReplayResult, plan_replay, replay
from extradeep.predictor.rewrite import fuse_chains, launch_sources, own_stream, rewrite_buckets
from extradeep.predictor.trace import RunTrace, load_trace


@dataclass
class Baseline:
    """One run, replayed with its measured durations: what every strategy is compared with."""

    trace: RunTrace
    graph: OpGraph
    plan: ReplayPlan
    result: ReplayResult
    steps: pd.DataFrame  # step_times of the baseline
    keys: pd.DataFrame  # the steady training steps: epoch, phase, step
    windows: pd.DataFrame  # per steady step: epoch, phase, step, lo, hi (measured, graph s), base (replayed)
    measured: float  # median over those steps of the slowest rank's measured time (s)
    replayed: float
    replay_error: float  # median relative |replayed - measured| over steps and ranks
    breakdown: dict  # class -> median seconds on the critical path
    notes: list[str] = field(default_factory=list)
    path_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class Outcome:
    """One candidate after its replay."""

    kind: str  # buckets | fusion | stream | memory
    label: str
    setting: str
    detail: str
    step: float  # replayed step time (s)
    low: float
    high: float
    reference: float  # the replayed step it is compared with (s)
    breakdown: dict = field(default_factory=dict)
    memory_delta: float = 0.0  # bytes more (+) or less (-) than the profiled run
    activation_factor: float = 1.0  # activations kept, relative to the profiled run


def baseline(run, select=None, settings=None, progress=None) -> Baseline:
    """Read and replay one run (a folder, files, or a RunTrace already built)."""
    notes = []
    if isinstance(run, RunTrace):
        trace = run
    else:
        paths, _, notes = resolve_run(run, select)
        _say(progress, 0, f"reading {len(paths)} profile(s)")
        trace = load_trace(paths, settings=settings)
    _say(progress, 0, f"building the dependency graph ({len(trace.ops)} ops)")
    graph = build_graph(trace)
    try:
        plan = plan_replay(graph)
    except ValueError as exc:
        raise InputError(None, f"cannot replay the traces: {exc}") from None
    result = replay(graph, plan)
    steps = step_times(graph, result, trace)
    keys = steady_keys(steps)
    windows = step_windows(graph, result, steps, keys)
    mine = steps.merge(keys, on=[EPOCH, PHASE, STEP])
    per_step = mine.groupby([EPOCH, PHASE, STEP])[[MEASURED, REPLAYED]].max()
    err = float(np.median(np.abs(mine["error"]))) if len(mine) else 0.0
    b = Baseline(
        trace,
        graph,
        plan,
        result,
        steps,
        keys,
        windows,
        float(per_step[MEASURED].median()),
        float(per_step[REPLAYED].median()),
        err,
        {},
        list(notes) + list(trace.problems),
    )
    b.breakdown, b.path_nodes = path_breakdown(b, graph, result, steps, nodes=True)
    return b


def steady_keys(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps a setting is judged on: steady-state training steps (all steps, or the whole
    span, when there are none)."""
    st = steps[~steps[WARMUP].astype(bool)]
    train = st[st[PHASE] == "train"]
    st = train if len(train) else st
    if st.empty:
        st = steps
    return st[[EPOCH, PHASE, STEP]].drop_duplicates().reset_index(drop=True)


def step_windows(graph: OpGraph, result: ReplayResult, steps: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """Per steady step: lo, hi (measured, graph seconds: where its launches lie) and base (its
    replayed start, for times relative to the step)."""
    n = graph.nodes
    if (steps[STEP_ID] < 0).all():
        keep = n[ROLE].isin(["op", "wake"]).to_numpy()
        return pd.DataFrame(
            {
                EPOCH: [-1],
                PHASE: ["span"],
                STEP: [-1],
                LO: [-np.inf],
                HI: [np.inf],
                "base": [float(result.start[keep].min())],
            }
        )
    mk = n[n[ROLE] == "marker"]
    frame = pd.DataFrame({STEP_ID: mk[STEP].to_numpy(), "edge": mk[NAME].to_numpy(), "m": mk[START].to_numpy()}).assign(
        r=result.start[mk.index]
    )
    frame = frame.merge(steps[[STEP_ID, EPOCH, PHASE, STEP]], on=STEP_ID).merge(keys)
    start, end = frame[frame["edge"] == "step_start"], frame[frame["edge"] == "step_end"]
    lo = start.groupby([EPOCH, PHASE, STEP])[["m", "r"]].min()
    hi = end.groupby([EPOCH, PHASE, STEP])["m"].max()
    return pd.DataFrame({LO: lo["m"], HI: hi, "base": lo["r"]}).reset_index()


def step_time(b: Baseline, graph: OpGraph, result: ReplayResult) -> tuple[float, pd.DataFrame]:
    """Median over the steady steps of the slowest rank's replayed time, and the step table."""
    st = step_times(graph, result, b.trace)
    mine = st.merge(b.keys, on=[EPOCH, PHASE, STEP])
    return float(mine.groupby([EPOCH, PHASE, STEP])[REPLAYED].max().median()), st


def path_breakdown(b: Baseline, graph: OpGraph, result: ReplayResult, steps: pd.DataFrame, nodes: bool = False):
    """Seconds per class on the critical path, median over the steady steps (and, with `nodes`, the
    ids of the nodes on those paths)."""
    mine = steps.merge(b.keys, on=[EPOCH, PHASE, STEP])
    try:
        paths, table = _critical_paths(graph, result, mine)
    except (ValueError, KeyError, IndexError):  # a step whose markers the change moved apart
        return ({}, np.zeros(0, dtype=np.int64)) if nodes else {}
    shares = {c: float(table[c].median()) for c in CLASSES if c in table}
    return (shares, np.unique(paths[NODE].to_numpy())) if nodes else shares


def on_path(b: Baseline, ids) -> bool:
    """Whether any of these nodes lies on a steady step's critical path (dPRO's guide: a change
    off the critical path cannot shorten the step)."""
    return bool(np.isin(np.asarray(ids, dtype=np.int64), b.path_nodes).any())


def _say(progress, done, text, total=0) -> None:
    if progress is not None:
        progress(done, total, text)


# -- bucket layouts ------------------------------------------------------------------------------


@dataclass
class Layout:
    label: str
    layout: list
    parts: list | None = None
    cap_mb: float | None = None
    chain_end: float = np.inf


@dataclass
class BucketProblem:
    """What the bucket search works on: units in ready order, their sizes, the cost model, and
    when each unit is ready relative to its step (median over steps)."""

    sync: GradientSync
    cost: CollectiveCost
    unit_bytes: np.ndarray
    ready: np.ndarray
    start: float  # when the stream is free for the first bucket (relative)
    best_cap: Layout | None = None  # the best layout DDP's bucket_cap_mb can produce


def bucket_problem(b: Baseline) -> BucketProblem | None:
    sync = find_gradient_sync(b.graph, b.trace, b.windows, b.result)
    if sync is None:
        return None
    ranks = int(b.trace.files[RANK].nunique()) if len(b.trace.files) else 1
    cost, unit_bytes = calibrate(sync, _collective_table(b, sync), ranks)
    end = b.result.end
    ready, start = [], []
    for s in sync.steps:
        ready.append([_ready(end, src, lag) - s.base for src, lag in s.anchors])
        start.append(_ready(end, *s.fifo) - s.base)
    ready = np.median(np.array(ready), axis=0)
    start_med = float(np.median(start))
    return BucketProblem(sync, cost, np.asarray(unit_bytes, dtype=float), ready, start_med)


def _ready(end, src, lag) -> float:
    src = np.asarray(src, dtype=np.int64)
    return float(np.max(end[src] + np.asarray(lag, dtype=float))) if len(src) else -np.inf


def _collective_table(b: Baseline, sync: GradientSync) -> pd.DataFrame:
    """Name, bytes and pure time of the run's collectives launched in the steady steps (virtual
    nodes and unmatched NCCL kernels)."""
    g = b.graph
    n = g.nodes
    role, kind = n[ROLE].to_numpy(), n[KIND].to_numpy()
    ids = np.flatnonzero(
        ((role == "sync") & (kind == "collective"))
        | ((role == "op") & (n[CATEGORY].to_numpy() == "communication") & (n[COLL].to_numpy() < 0))
    )
    launched = launch_times(g)
    members = member_lists(g)
    at = np.array([min(launched[m] for m in members.get(i, [i])) for i in ids]) if len(ids) else np.zeros(0)
    inside = np.zeros(len(ids), dtype=bool)
    for w in b.windows.itertuples(index=False):
        inside |= (at >= w.lo) & (at < w.hi)
    ids = ids[inside]
    return pd.DataFrame({NAME: n[NAME].astype(str).to_numpy()[ids], BYTES: n[BYTES].to_numpy()[ids], PURE: g.dur[ids]})


def layout_candidates(p: BucketProblem, keep: int = 4) -> tuple[Layout, list[Layout]]:
    """(the measured layout, the best other layouts by the chain model): the exact contiguous
    optimum, the best layouts DDP's bucket_cap_mb can produce (the best of them always), tensor
    partitioning of the optimum's largest bucket, and one bucket."""
    n = p.sync.n_units
    measured = Layout("measured layout", p.sync.measured_layout)
    best, _ = best_layout(p.ready, p.unit_bytes, p.cost, p.start)
    out = [Layout("optimal contiguous buckets", best)]
    caps = []
    if p.sync.source.startswith("gradients") and p.sync.sized:
        seen = {tuple(best), tuple(measured.layout)}
        for cap in candidate_caps(p.unit_bytes):
            lay = cap_layout(p.unit_bytes, cap)
            if tuple(lay) not in seen:
                seen.add(tuple(lay))
                caps.append(Layout("best bucket_cap_mb", lay))
        for c in caps:
            c.chain_end = _chain(p, c)
        caps = sorted(caps, key=lambda c: c.chain_end)[:2]
        for k, c in enumerate(caps[1:], start=2):
            c.label = f"bucket_cap_mb, {k}nd best" if k == 2 else f"bucket_cap_mb, {k}th best"
    big = int(np.argmax(_bucket_bytes(p, best)))
    for k in (2, 4):
        parts = [1] * len(best)
        parts[big] = k
        out.append(Layout(f"optimal buckets, largest sent in {k} pieces", best, parts))
    if n > 1:
        out.append(Layout("one bucket", [n]))
    for c in out + caps + [measured]:
        c.chain_end = _chain(p, c)
        _name_cap(p, c)
    if caps and out[0].cap_mb is not None:  # the optimum is itself a bucket_cap_mb
        caps[0].label = "another bucket_cap_mb"
    ranked = sorted(out + caps[1:], key=lambda c: c.chain_end)[: max(keep - len(caps[:1]), 1)]
    p.best_cap = caps[0] if caps else None
    return measured, ranked + caps[:1]


def _bucket_bytes(p: BucketProblem, layout) -> np.ndarray:
    cuts = np.cumsum([0, *layout])
    return np.add.reduceat(p.unit_bytes, cuts[:-1])


def _chain(p: BucketProblem, c: Layout) -> float:
    return float(chain_ends(p.ready, p.unit_bytes, c.layout, p.cost, p.start, c.parts)[-1])


def _name_cap(p: BucketProblem, c: Layout) -> None:
    """The bucket_cap_mb that makes DDP build this layout, when one does."""
    if not (p.sync.source.startswith("gradients") and p.sync.sized) or c.parts and max(c.parts) > 1:
        return
    span = cap_interval(p.unit_bytes, c.layout)
    if span is not None:
        c.cap_mb = nice_cap_mb(*span)


def evaluate_layout(b: Baseline, p: BucketProblem, c: Layout, reference: float) -> Outcome:
    """Replay the run with the gradient collectives of layout `c` (and at the interval's ends)."""
    graph, new = rewrite_buckets(b.graph, p.sync, c.layout, p.unit_bytes, p.cost, c.parts)
    plan = plan_replay(graph)
    result = replay(graph, plan)
    step, steps = step_time(b, graph, result)
    spread = 2.0 * p.cost.rel_sd
    ends = []
    for f in (1.0 - spread, 1.0 + spread):
        dur = graph.dur.copy()
        dur[new] *= max(f, 0.0)
        ends.append(step_time(b, graph, replay(graph, plan, dur=dur))[0])
    return Outcome(
        "buckets",
        c.label,
        bucket_setting(p, c),
        layout_text(p, c),
        step,
        min(ends),
        max(ends),
        reference,
        path_breakdown(b, graph, result, steps),
    )


def reference_step(b: Baseline, p: BucketProblem, measured: Layout) -> float:
    """The measured layout replayed with the calibrated cost model: the reference the layouts are
    compared with, so that the model's own bias cancels."""
    graph, _ = rewrite_buckets(b.graph, p.sync, measured.layout, p.unit_bytes, p.cost)
    return step_time(b, graph, replay(graph, plan_replay(graph)))[0]


def layout_text(p: BucketProblem, c: Layout) -> str:
    sizes = _bucket_bytes(p, c.layout)
    unit = "MB" if p.sync.sized else "ms of transfer"
    scale = 1e6 if p.sync.sized else 1e-3
    shown = ", ".join(f"{x / scale:.3g}" for x in sizes[:12]) + (", ..." if len(sizes) > 12 else "")
    pieces = "" if not c.parts or max(c.parts) == 1 else f"; pieces per bucket {c.parts}"
    what = "gradients" if p.sync.source.startswith("gradients") else "collectives"
    return f"{len(c.layout)} bucket(s) of {list(map(int, c.layout))} {what}: {shown} {unit}{pieces}"


def bucket_setting(p: BucketProblem, c: Layout) -> str:
    """What to change in the user's framework to get layout `c`."""
    fsdp = p.sync.kind == "reduce_scatter"
    if c.parts and max(c.parts) > 1:
        return (
            "split the largest bucket: DDP(..., bucket_cap_mb=<its size / pieces>) for all-reduce; Horovod "
            "HOROVOD_FUSION_THRESHOLD; BytePS BYTEPS_PARTITION_BYTES"
        )
    if fsdp:
        params = int(np.ceil(np.max(_bucket_bytes(p, c.layout)) / max(p.sync.element_bytes, 1)))
        return (
            "FSDP(model, auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, "
            f"min_num_params={params:_})): wrap units of about this size"
        )
    if c.cap_mb is not None:
        return f"DDP(model, ..., bucket_cap_mb={c.cap_mb:g})"
    if not p.sync.sized:
        return "DDP(model, ..., bucket_cap_mb=...): fewer, larger buckets (profile with record_shapes=True for a value)"
    near = p.best_cap
    hint = f"; the best DDP can do: bucket_cap_mb={near.cap_mb:g} (its own row)" if near and near.cap_mb else ""
    return (
        "no single bucket_cap_mb builds exactly these buckets: a DDP comm hook over them, or Horovod/DeepSpeed "
        "bucket settings" + hint
    )


# -- kernel fusion and streams -------------------------------------------------------------------


def fusion_outcomes(b: Baseline, top: int = 3) -> list[Outcome]:
    """One candidate per site of launch-bound kernel chains (and all sites together)."""
    launcher = launch_sources(b.graph)
    chains = launch_bound_chains(b.graph, b.result, b.windows)
    # a site is searched when one of its chains is on the critical path; fusing it then fuses all
    # of its chains (on every rank), since the path moves to the next one when only one goes
    sites = [
        s
        for s in fusion_sites(b.graph, chains, b.windows, _handoff(b), top=len(chains))
        if on_path(b, np.concatenate([np.r_[c, launcher[c]] for c in s.chains]))
    ][:top]
    out = []
    groups = [(s.label, s.chains, s.setting()) for s in sites]
    if len(sites) > 1:
        every = [c for s in sites for c in s.chains]
        settings = "; ".join(dict.fromkeys(s.setting() for s in sites))
        groups.append(("all launch-bound chains", every, settings))
    for label, chains_, setting in groups:
        dur, gap = fuse_chains(b.graph, chains_)
        result = replay(b.graph, b.plan, dur=dur, gap=gap)
        step, steps = step_time(b, b.graph, result)
        high = step_time(b, b.graph, replay(b.graph, b.plan, *fuse_chains(b.graph, chains_, keep_gaps=True)))[0]
        kernels = sum(len(c) for c in chains_)
        detail = (
            f"{len(chains_)} chain(s), {kernels} kernels, one launch per chain instead of {kernels}; the interval's "
            "upper end keeps the host's work between the launches"
        )
        name = f"fuse kernel chains: {label}"
        breakdown = path_breakdown(b, b.graph, result, steps)
        out.append(Outcome("fusion", name, setting, detail, step, step, max(high, step), b.replayed, breakdown))
    return out


def _handoff(b: Baseline) -> dict:
    """(rank, window index) -> launch time of the step's last gradient collective (all ranks alike)."""
    colls = gradient_collectives(b.graph)
    ranks = b.graph.nodes.loc[b.graph.nodes[RANK] >= 0, RANK].unique()
    out = {}
    for k, w in enumerate(b.windows.itertuples(index=False)):
        inside = colls[(colls[LAUNCH] >= w.lo) & (colls[LAUNCH] < w.hi)]
        if len(inside):
            out.update({(r, k): float(inside[LAUNCH].max()) for r in ranks})
    return out


def stream_outcomes(b: Baseline) -> list[Outcome]:
    """Host-to-device copies that wait for compute on their stream, moved to a stream of their own."""
    copies = copies_on_compute_streams(b.graph, b.result, b.windows)
    if not on_path(b, copies):  # none holds up the critical path: moving them cannot help
        return []
    graph = own_stream(b.graph, copies)
    result = replay(graph, plan_replay(graph))
    step, steps = step_time(b, graph, result)
    nbytes = float(np.median(b.graph.nodes[BYTES].to_numpy()[copies]))
    return [
        Outcome(
            "stream",
            "host-to-device copies on a side stream",
            "pinned host memory and asynchronous copies issued ahead of use on a separate torch.cuda.Stream: "
            "DataLoader(..., pin_memory=True), tensor.to(device, non_blocking=True)",
            f"{len(copies)} host-to-device copies (median {nbytes / 1e6:.3g} MB) waited for compute on their "
            "stream; on a stream of their own they start when launched",
            step,
            step,
            step,
            b.replayed,
            path_breakdown(b, graph, result, steps),
            memory_delta=nbytes,
        )
    ]
