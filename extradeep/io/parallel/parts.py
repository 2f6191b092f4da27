"""Per-part observations from profiles: where each measured step of each rank goes, with the run's layout.

`layout_parts(paths)` returns one row per (file, step, part, metric), columns `PARTS_COLUMNS`: the
run (path, app, rep, rank), its layout (gpus, tp, pp, dp, micro_batch, micro_batches, zero,
recompute, chunks, schedule, framework: `run_layouts`), the rank's place (stage, tp_rank, dp_rank),
the step (0, 1, ... over the measured training steps; -1 for whole-file values), part and metric.

The step's wall time split exclusively (`extradeep.columns.LAYOUT_PARTS`, metric `time`, seconds;
they sum to `step`; rules in `split.py`): `compute`, `optimizer`, `tp_comm`, `pp_p2p` (the transfer
itself: per p2p kernel at most the step's fastest p2p kernel, which waited least), `pp_bubble` (the
rest of the p2p kernels' time: waiting for the other stage; idle before the step's first compute
kernel; with pipeline stages, the exposed gradient-norm and tied-embedding all-reduces that wait
for the drain), `dp_sync`, `host_overhead` (the rest of the idle time); `memory` (step -1, metric
`bytes`: Kineto's largest Total Allocated, else nothing) and metric `reserved` (Kineto's Total
Reserved, or nsys's peak of CUDA device allocations); `power` (step -1, metric `watts`: the GPU's mean
board power in the steps, where an nsys export has power samples).

Per-rank detail (`extradeep.columns.DETAIL_PARTS`): busy time (`time`) and kernel counts (`visits`)
of the compute kernels by pass: `forward` (main thread, before the step's last backward launch),
`backward` (the autograd thread), `recompute` (forward-only kernels: layer norm, softmax, GELU,
dropout forward, run again on the autograd thread; recomputed GEMMs cannot be told from backward
GEMMs by name and stay in `backward`, so backward + recompute is the backward pass exactly,
recompute a lower bound), `other_compute` (memcpy, memset, other threads); of the collectives by the
role of their process group (`tp_collectives`, `pp_transfers`, `dp_collectives`,
`other_collectives`: kernel time with waiting included, `visits`, `bytes` = the collective's whole
buffer, and `pure_time` when every member's profile of a collective is in the run and the group is
named alike in all: earliest end minus latest start, summed per step; grouped send/recv pair
differently on each side, so pp_transfers has none); `idle` = the step minus the union of its
compute kernels. The split and `idle` charge the GPU work that ran in the step's range, whichever
step launched it; the detail counts GPU work in the step its launching call starts in, as in
`read_profile`.

`part_observations(frame, model=None)` turns this frame into the layout model's per-part
observations (`extradeep.layouts`): one row per run and LAYOUT_PARTS part, times on the last pipeline
stage's ranks (median over steps, then ranks), memory the largest peak of any rank: allocated
where Kineto records it, else the reserved peak nsys records (an upper bound of what was allocated:
the estimate calibrated on it errs on the side of not fitting).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import (
    ALLOCATED,
    BYTES,
    CHUNKS,
    DP,
    DP_RANK,
    END,
    FRAMEWORK,
    GLOBAL_BATCH,
    GPUS,
    HEADS,
    HIDDEN,
    IN_BACKWARD,
    KIND,
    LATEST_START,
    LAUNCH,
    LAYERS,
    LAYOUT_FIELDS,
    LAYOUT_PARTS,
    METRIC,
    MICRO_BATCH,
    MICRO_BATCHES,
    NAME,
    PART,
    PART_BACKWARD,
    PART_BUBBLE,
    PART_COMPUTE,
    PART_DP,
    PART_DP_KERNELS,
    PART_FORWARD,
    PART_HOST,
    PART_IDLE,
    PART_MEMORY,
    PART_OPTIMIZER,
    PART_OTHER_COMPUTE,
    PART_OTHER_KERNELS,
    PART_POWER,
    PART_PP_KERNELS,
    PART_PP_P2P,
    PART_RECOMPUTE,
    PART_STEP,
    PART_TP,
    PART_TP_KERNELS,
    PATH,
    PEER_WAIT,
    PP,
    PURE,
    PURE_TIME,
    RANK,
    RECOMPUTE,
    REP,
    RESERVED,
    SCHEDULE,
    SEQ_LEN,
    STAGE,
    START,
    STEP,
    THREAD,
    TIME,
    TP,
    TP_RANK,
    VALUE,
    VISITS,
    VOCAB,
    WATTS,
    WORKLOAD,
    ZERO,
)
from extradeep.errors import InputError
from extradeep.io.parallel.facts import AUTOGRAD_THREAD, MAIN_THREAD, P2P, ProfileFacts, matches
from extradeep.io.parallel.infer import FORWARD_KERNEL, assign_roles, comm_usage, infer_layout
from extradeep.io.parallel.layout import point_label, profile_facts, run_layouts
from extradeep.io.parallel.split import exclusive_split

NS = 1e-9
PARTS_COLUMNS = [
    "path",
    "app",
    "rep",
    "rank",
    GPUS,
    *LAYOUT_FIELDS,
    STAGE,
    TP_RANK,
    DP_RANK,
    "step",
    PART,
    "metric",
    "value",
]
ROLE_KERNELS = {TP: PART_TP_KERNELS, PP: PART_PP_KERNELS, DP: PART_DP_KERNELS}
COMM_DETAIL = (PART_TP_KERNELS, PART_PP_KERNELS, PART_DP_KERNELS, PART_OTHER_KERNELS)
# the split's classes, first charged first; "pp_wait" and "other_wait" are charged to pp_bubble (or dp_sync)
SPLIT_ORDER = [PART_OPTIMIZER, PART_COMPUTE, PART_TP, PART_PP_P2P, PART_DP, "other_comm"]
GRADIENT_REDUCTIONS = ("allreduce", "reducescatter")


def layout_parts(
    paths=None,
    *,
    aliases=None,
    manifest=None,
    settings=None,
    model: dict | None = None,
    pure: bool = True,
    facts: dict | None = None,
) -> pd.DataFrame:
    """The per-part frame of the profiles under `paths` (files, folders) or named by a manifest; see
    the module docstring. attrs: `layouts` (one row per run, with sources), `problems`. ``facts``:
    ProfileFacts already read, by path (they are reused, not read again)."""
    from extradeep.io.discover import manifest_runs, one_format_per_run, param_columns, parse_aliases, runs_from_names

    aliases = parse_aliases(aliases) if isinstance(aliases, (list, tuple)) else aliases
    runs, problems = manifest_runs(manifest, aliases) if manifest is not None else runs_from_names(paths, aliases)
    known, read = facts or {}, {}
    for path in runs[PATH]:
        try:
            read[path] = known.get(path) or profile_facts(path, settings)
        except InputError as exc:
            problems.append(str(exc))
    runs = runs[runs[PATH].isin(read)].reset_index(drop=True)
    runs, skipped = one_format_per_run(runs)
    problems += skipped
    if runs.empty:  # the first problem only: fifteen damaged traces would make one line of fifteen
        more = f" ({len(problems)} problems; the first: {problems[0]})" if len(problems) > 1 else ""
        raise InputError(None, "no readable profiles" + (f": {problems[0]}" if len(problems) == 1 else more))
    layouts, more = run_layouts(runs, settings, model, "manifest" if manifest is not None else "file name", read)
    problems += more
    frames = []
    keys = ["app", *param_columns(runs), "rep"]
    for key, run in runs.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        match = layouts[(layouts["app"] == key[0]) & (layouts[REP] == key[-1])]
        match = match[match["point"] == point_label(keys[1:-1], key[1:-1])]
        layout = {k: match.iloc[0][k] for k in (GPUS, *LAYOUT_FIELDS)} if len(match) else {}
        matched = matched_calls(run, read) if pure else {}
        rows = [
            file_parts(read[path], layout, rank, model, matched.get(path)) for path, rank in zip(run[PATH], run[RANK])
        ]
        frame = pd.concat(rows, ignore_index=True)
        if pure:
            frame = pd.concat([frame, pure_times(run, read, frame, matched)], ignore_index=True)
        frames.append(frame.assign(app=key[0], rep=key[-1]))
    out = pd.concat(frames, ignore_index=True)[PARTS_COLUMNS]
    out.attrs["layouts"] = layouts
    out.attrs["problems"] = problems
    return out


def file_parts(
    facts: ProfileFacts, layout: dict, rank, model: dict | None = None, matched: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Rows of one profile: its steps' split and detail, then its memory peaks (step -1). With
    ``matched`` (its collectives matched over the run's ranks: :func:`matched_calls`), each step's
    dp_sync also gets its ``peer_wait``: the share spent waiting for the group's last member."""
    fields = infer_layout(facts, model)
    roles = {k: v[0].key for k, v in assign_roles(facts, comm_usage(facts)).items() if k in ROLE_KERNELS}
    detail_of_comm = {key: ROLE_KERNELS[role] for role, key in roles.items()}
    pp = layout.get(PP) if layout.get(PP) is not None else fields[PP].value
    base = {"path": facts.path, "rank": int(rank), **layout, **{c: fields[c].value for c in (STAGE, TP_RANK, DP_RANK)}}
    if base[STAGE] is None and pp == 1:
        base[STAGE] = 0
    k = facts.kernels.copy()
    k["t"] = np.where(k[LAUNCH] >= 0, k[LAUNCH], k[START])
    k[PART] = _kernel_parts(k, detail_of_comm)
    windows = list(facts.steps[[STEP, START, END]].itertuples(index=False))
    launched = [(k["t"] >= lo) & (k["t"] < hi) for _step, lo, hi in windows]
    for in_step in launched:  # labelled first: a step's split may charge the last step's optimizer
        _optimizer(k, in_step)
    rows = []
    for (step, lo, hi), in_step in zip(windows, launched):
        mine = k[in_step]
        # the split charges what ran on the GPU during the step's range, whichever step launched it:
        # the host runs ahead, so the last step's gradient gathers can run in this one's range, and
        # charged by launch they would leave it idle (host_overhead) and their own step short
        running = k[(k[END] > lo) & (k[START] < hi)]
        rows.append((step, PART_STEP, TIME, (hi - lo) * NS))
        split = step_split(running, lo, hi, (pp or 1) > 1)
        for part, seconds in split.items():
            rows.append((step, part, TIME, seconds))
        if matched is not None and len(matched):
            rows.append((step, PART_DP, PEER_WAIT, _peer_wait(running, matched, lo, hi, (pp or 1) > 1, split)))
        for part, group in mine.groupby(PART):
            if part != PART_OPTIMIZER:  # the split has the optimizer's time: its kernels are charged first
                rows.append((step, part, TIME, float((group[END] - group[START]).sum()) * NS))
            rows.append((step, part, VISITS, float(len(group))))
            if part in COMM_DETAIL:
                rows.append((step, part, BYTES, float(group[BYTES].sum())))
        share = _in_backward(mine)
        if share is not None:
            rows.append((step, PART_DP_KERNELS, IN_BACKWARD, share))
        compute = running[~running[PART].isin(COMM_DETAIL)]
        rows.append((step, PART_IDLE, TIME, ((hi - lo) - _union(compute[START], compute[END], lo, hi)) * NS))
    for metric, key in ((ALLOCATED, "allocated"), (RESERVED, "reserved")):
        if facts.memory.get(key) is not None:
            rows.append((-1, PART_MEMORY, metric, float(facts.memory[key])))
    if facts.power:
        rows.append((-1, PART_POWER, WATTS, float(facts.power[WATTS])))
    frame = pd.DataFrame(rows, columns=["step", PART, "metric", "value"])
    for key, value in base.items():
        frame[key] = value
    return frame


def step_split(kernels: pd.DataFrame, lo: float, hi: float, pipeline: bool) -> dict[str, float]:
    """One step's wall time in LAYOUT_PARTS (seconds, summing to hi - lo); see split.py."""
    cls = np.where(kernels[PART] == PART_OPTIMIZER, PART_OPTIMIZER, PART_COMPUTE).astype(object)
    cls[(kernels[PART] == PART_TP_KERNELS).to_numpy()] = PART_TP
    cls[(kernels[PART] == PART_PP_KERNELS).to_numpy()] = PART_PP_P2P
    cls[(kernels[PART] == PART_DP_KERNELS).to_numpy()] = PART_DP
    cls[(kernels[PART] == PART_OTHER_KERNELS).to_numpy()] = "other_comm"
    starts, ends = kernels[START].to_numpy(np.float64), kernels[END].to_numpy(np.float64)
    intervals = {c: (starts[cls == c], ends[cls == c]) for c in SPLIT_ORDER if (cls == c).any()}
    fill = None
    if pipeline:
        first = starts[cls == PART_COMPUTE].min() if (cls == PART_COMPUTE).any() else hi
        fill = (np.array([lo]), np.array([first]))
    split = exclusive_split(
        {**intervals, **({"fill": fill} if fill else {})}, [*SPLIT_ORDER, "fill"], lo, hi, PART_HOST
    )
    p2p = split.pop(PART_PP_P2P, 0.0)
    durations = (ends - starts)[cls == PART_PP_P2P]
    transfer = min(p2p, float(durations.min() * len(durations))) if len(durations) else 0.0
    out = {part: 0.0 for part in LAYOUT_PARTS if part not in (PART_STEP, PART_MEMORY)}
    out[PART_PP_P2P] = transfer
    out[PART_BUBBLE] = p2p - transfer + split.pop("fill", 0.0)
    other = split.pop("other_comm", 0.0)
    out[PART_BUBBLE if pipeline else PART_DP] += other
    for part, seconds in split.items():
        out[part] += seconds
    return {part: seconds * NS for part, seconds in out.items()}


def _in_backward(mine: pd.DataFrame) -> float | None:
    """The share of the step's data-parallel gradient reductions (bytes) launched from the autograd
    thread (hooks that reduce gradient buckets as the backward pass fills them: PyTorch's DDP,
    Megatron's --overlap-grad-reduce, DeepSpeed's overlap_comm), or None without any."""
    reductions = mine[(mine[PART] == PART_DP_KERNELS) & mine["collective"].isin(GRADIENT_REDUCTIONS)]
    if reductions.empty:
        return None
    weights = reductions[BYTES].to_numpy(float)
    weights = weights if weights.sum() > 0 else np.ones(len(reductions))
    return float(weights[(reductions[THREAD] == AUTOGRAD_THREAD).to_numpy()].sum() / weights.sum())


def _peer_wait(mine: pd.DataFrame, matched: pd.DataFrame, lo, hi, pipeline: bool, split: dict) -> float:
    """Seconds of the step's dp_sync that its data-parallel (and other) collectives spent waiting
    for the group's last member: the split again with each such kernel started at that arrival."""
    waiting = mine[PART].isin((PART_DP_KERNELS, PART_OTHER_KERNELS)) & mine.index.isin(matched.index)
    latest = matched[LATEST_START].reindex(mine.index[waiting]).to_numpy()
    starts, ends = mine.loc[waiting, START].to_numpy(), mine.loc[waiting, END].to_numpy()
    if not (latest > starts).any():  # no kernel started before its last member: nothing to split again
        return 0.0
    trimmed = mine.copy()
    trimmed.loc[waiting, START] = np.minimum(np.maximum(starts, latest), ends)
    return max(split.get(PART_DP, 0.0) - step_split(trimmed, lo, hi, pipeline).get(PART_DP, 0.0), 0.0)


def _kernel_parts(k: pd.DataFrame, detail_of_comm: dict) -> np.ndarray:
    comm = k["collective"] != ""
    compute = (k[KIND] == "kernel") & ~comm
    forward_name = matches(k[NAME], FORWARD_KERNEL)
    out = np.full(len(k), PART_OTHER_COMPUTE, dtype=object)
    out[(compute & (k[THREAD] == MAIN_THREAD)).to_numpy()] = PART_FORWARD
    autograd = (compute & (k[THREAD] == AUTOGRAD_THREAD)).to_numpy()
    out[autograd] = PART_BACKWARD
    out[autograd & forward_name] = PART_RECOMPUTE
    out[comm.to_numpy()] = [detail_of_comm.get(c, PART_OTHER_KERNELS) for c in k.loc[comm, "comm"]]
    return out


def _optimizer(k: pd.DataFrame, launched: pd.Series) -> None:
    """Main-thread compute launched after the step's last backward launch is its optimizer step
    (``launched``: the step's kernels, by launch)."""
    bwd = k.loc[launched & (k[THREAD] == AUTOGRAD_THREAD), "t"]
    if len(bwd):
        late = launched & (k[PART] == PART_FORWARD) & (k["t"] > bwd.max())
        k.loc[late, PART] = PART_OPTIMIZER


def _union(starts, ends, lo: float, hi: float) -> float:
    s = np.clip(np.asarray(starts, dtype=np.float64), lo, hi)
    e = np.clip(np.asarray(ends, dtype=np.float64), lo, hi)
    if not len(s):
        return 0.0
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    gaps = np.maximum(s[1:] - e[:-1], 0.0).sum()
    return float(e[-1] - s[0] - gaps)


def matched_calls(run: pd.DataFrame, facts: dict) -> dict[str, pd.DataFrame]:
    """Per path, its collectives matched over the run's ranks by group and call order, indexed as
    its kernels: launch ``t``, the group's ``comm``, the last member's start (LATEST_START, on this
    path's clock) and the pure time (the earliest end minus that start). Point-to-point transfers
    are left out. Profiles from separate sessions (one per host) keep clocks apart; a collective's
    members end together, so a member's median end against the group's is its clock's offset
    (dPRO's alignment, as :func:`extradeep.predictor.collectives.clock_offsets`), taken out first."""
    calls: dict[str, list] = {}
    for path in run[PATH]:
        k = facts[path].kernels
        k = k[(k["collective"] != "") & ~k["collective"].isin(P2P) & ~k["comm"].str.startswith("stream ")]
        for key, group in k.groupby("comm"):
            calls.setdefault(key, []).append((path, group.sort_values(LAUNCH)))
    rows: dict[str, list] = {}
    for key, members in calls.items():
        n = min(len(g) for _, g in members)
        if len(members) < 2 or n == 0:
            continue
        starts = np.stack([g[START].to_numpy(np.float64)[:n] for _, g in members])
        ends = np.stack([g[END].to_numpy(np.float64)[:n] for _, g in members])
        clock = np.median(ends - np.median(ends, axis=0), axis=1, keepdims=True)
        latest = (starts - clock).max(axis=0)
        pure = np.maximum((ends - clock).min(axis=0) - latest, 0)
        for (path, g), own in zip(members, clock[:, 0]):
            one = {"t": g[LAUNCH].to_numpy()[:n], LATEST_START: latest + own, PURE: pure, "comm": key}
            rows.setdefault(path, []).append(pd.DataFrame(one, index=g.index[:n]))
    return {path: pd.concat(frames) for path, frames in rows.items()}


def pure_times(run: pd.DataFrame, facts: dict, frame: pd.DataFrame, matched: dict | None = None) -> pd.DataFrame:
    """`pure_time` rows per rank, step and collective role: collectives matched over the run's
    ranks by group and call order (see the module docstring; ``matched``: :func:`matched_calls`
    already computed)."""
    matched = matched_calls(run, facts) if matched is None else matched
    if not matched:
        return pd.DataFrame(columns=frame.columns)
    out = []
    for path in sorted(matched):
        group, f = matched[path], facts[path]
        mine = frame[frame[PATH] == path]
        base = mine.iloc[0].to_dict() if len(mine) else {}
        roles = assign_roles(f, comm_usage(f))
        detail = {v[0].key: ROLE_KERNELS[k] for k, v in roles.items() if k in ROLE_KERNELS}
        for step, lo, hi in f.steps[[STEP, START, END]].itertuples(index=False):
            inside = group[(group["t"] >= lo) & (group["t"] < hi)]
            for part, sub in inside.groupby(inside["comm"].map(detail).fillna(PART_OTHER_KERNELS)):
                out.append(
                    {**base, "step": step, PART: part, "metric": PURE_TIME, "value": float(sub[PURE].sum()) * NS}
                )
    return pd.DataFrame(out, columns=frame.columns)


def part_observations(frame: pd.DataFrame, model: dict | None = None) -> pd.DataFrame:
    """The layout model's per-part observations (`extradeep.layouts.tables.check_part_observations`):
    one row per run and part of LAYOUT_PARTS with the run's layout (gpus, tp, pp, dp, micro_batch,
    micro_batches, global_batch, zero, recompute, schedule, chunks; the shape columns layers, hidden,
    heads, seq_len, vocab from ``model`` where given; workload = the app), metric time (seconds per
    step: the last pipeline stage's ranks, median over steps, the first left out where there are
    more, then ranks) or bytes (memory: the
    largest allocated peak of any rank); and, where the run reduces gradients over a data-parallel
    group, part dp_sync with metric in_backward: the median share of those reductions launched from
    the autograd thread. The last stage's dp_sync and step leave out its peer_wait: the ranks' skew is
    noise of the profiled run, and the layout model predicts a step of ranks in step.
    Runs without a known stage or step are left out."""
    layout_cols = [GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, ZERO, RECOMPUTE, SCHEDULE, CHUNKS]
    rows = []
    for (app, _rep), run in frame.groupby(["app", REP], sort=True):
        for _, one in run.groupby(layout_cols + [FRAMEWORK], dropna=False, sort=True):
            rows += _observations(one, app, layout_cols)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out[GLOBAL_BATCH] = out[MICRO_BATCH] * out[MICRO_BATCHES] * out[DP]
    shape = {LAYERS: "layers", HIDDEN: "hidden", HEADS: "heads", SEQ_LEN: "seq", VOCAB: "vocab"}
    for column, key in shape.items():
        if model and model.get(key) is not None:
            out[column] = model[key]
    return out


def _observations(run: pd.DataFrame, app, layout_cols: list[str]) -> list[dict]:
    """The split of one whole step, so the parts still sum to it: per rank of the last stage its
    median step (after the first, where there are more), then the rank with the median of those."""
    layout = {c: run[c].iloc[0] for c in layout_cols}
    if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in layout.values()):
        return []
    timed = run[(run[METRIC] == TIME) & run[PART].isin(LAYOUT_PARTS) & (run[STEP] >= 0)]
    last = timed[timed[STAGE] == timed[STAGE].max()]
    steps = last[last[PART] == PART_STEP]
    # a rank's first measured step also runs the tail of the unmeasured (warmup) step before it, or
    # waits for it where the profile left that out: with later steps to choose from, it is left out
    by_path = steps.groupby(PATH)[STEP]
    steps = steps[(steps[STEP] > by_path.transform("min")) | (by_path.transform("nunique") < 2)]
    steps = steps.sort_values([PATH, VALUE, STEP])
    if steps.empty:
        return []
    medians = steps.groupby(PATH).apply(lambda g: g.iloc[(len(g) - 1) // 2], include_groups=False)
    chosen = medians.sort_values(VALUE).iloc[(len(medians) - 1) // 2]
    values = last[(last[PATH] == chosen.name) & (last[STEP] == chosen[STEP])].set_index(PART)[VALUE].copy()
    wait = run[(run[PATH] == chosen.name) & (run[STEP] == chosen[STEP]) & (run[METRIC] == PEER_WAIT)][VALUE]
    if len(wait) and PART_DP in values.index:  # rank skew is noise, not the reduction's cost: out of the step
        skew = min(float(wait.iloc[0]), float(values[PART_DP]))
        values[PART_DP] -= skew
        values[PART_STEP] -= skew
    out = [
        {**layout, WORKLOAD: app, PART: part, "metric": TIME, "value": float(values.get(part, 0.0))}
        for part in LAYOUT_PARTS
        if part != PART_MEMORY
    ]
    share = run[run[METRIC] == IN_BACKWARD][VALUE]
    if len(share):
        out.append({**layout, WORKLOAD: app, PART: PART_DP, "metric": IN_BACKWARD, "value": float(share.median())})
    memory = run[(run[PART] == PART_MEMORY) & (run[METRIC] == ALLOCATED)][VALUE]
    if not len(memory):  # nsys records what CUDA allocated: the allocator's reserve, an upper bound
        memory = run[(run[PART] == PART_MEMORY) & (run[METRIC] == RESERVED)][VALUE]
    if len(memory):
        out.append({**layout, WORKLOAD: app, PART: PART_MEMORY, "metric": BYTES, "value": float(memory.max())})
    return out
