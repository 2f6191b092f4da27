"""Ground truth of a simulated GPT layout: step time, where it goes, and memory, from the simulator's own labels.

Values are seconds and bytes of the last simulated step (the steady state; without noise every step
after the first is the same):
- ``step_time``: the iteration time, between the ends of the last two steps of the slowest rank;
- ``critical_path``: that time split by what the critical path spends it on (compute forward /
  backward / recompute, optimizer, tensor-, pipeline- and data-parallel communication as pure
  transfer time, CPU work, and ``wait``: launch latencies and synchronisation wake-ups); the parts
  sum to ``step_time`` exactly;
- ``stages``: per pipeline stage, what a profile of its rank shows in that step: the step range's
  duration, its exclusive `split` of the GPU work that ran in that range (whichever step launched
  it) into `extradeep.columns.LAYOUT_PARTS` (rules in
  `extradeep/io/parallel/split.py`; a point-to-point kernel's pure transfer, the end of it its joins
  last, is `pp_p2p`, its waiting before `pp_bubble`), busy time per detail part (kernels launched in
  the step, by the launching runtime call's start, as the readers assign them), kernel counts and
  message bytes per communication role, the pure time of those collectives, idle time (the step
  minus the union of compute kernels), peak memory;
- ``power``: watts per GPU over the step, the mean over stages (every stage has t x d GPUs) of
  :func:`extradeep.simulate.gpt.power.mean_power` over each stage head's step range;
- ``parts``: the split of the last stage (the rank the layout model's observations come from).
The labels come from the simulator (which pass, which process group), never from kernel names, so a
reader that classifies kernels by what a profile shows can be checked against them.
"""

from __future__ import annotations

import numpy as np

from extradeep.columns import (
    BYTES,
    CORR,
    END,
    LAYOUT_PARTS,
    MEMORY_TOTAL,
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
    START,
    STEP,
)
from extradeep.io.parallel.split import exclusive_split
from extradeep.simulate.gpt import memory as mem
from extradeep.simulate.gpt.power import mean_power
from extradeep.simulate.gpt.run import RankTimeline, SimulatedRun

# simulator part labels -> the parts the readers report
PART_OF = {
    "compute_forward": PART_FORWARD,
    "compute_backward": PART_BACKWARD,
    "recompute": PART_RECOMPUTE,
    "optimizer": PART_OPTIMIZER,
    "other": PART_OTHER_COMPUTE,
    "tp_comm": PART_TP_KERNELS,
    "pp_comm": PART_PP_KERNELS,
    "dp_comm": PART_DP_KERNELS,
    "other_comm": PART_OTHER_KERNELS,
}
ROLE_PART = {
    "tp": PART_TP_KERNELS,
    "pp": PART_PP_KERNELS,
    "dp": PART_DP_KERNELS,
    "mp": PART_OTHER_KERNELS,
    "embedding": PART_OTHER_KERNELS,
}
NS = 1e-9


def layout_truth(run: SimulatedRun) -> dict:
    """Truth of the last simulated step of a solved run (see the module docstring)."""
    g = run.graph
    last, prev = run.steps - 1, run.steps - 2
    ends = {(r, k): (s, e) for r, k, s, e in run.records.steps}
    final = {r: g.end[ends[(r, last)][1]] for r in run.ranks}
    slowest = max(final, key=final.get)
    since = max(g.end[ends[(r, prev)][1]] for r in run.ranks) if prev >= 0 else g.start[ends[(slowest, last)][0]]
    sink = ends[(slowest, last)][1]
    critical = {PART_OF.get(k, k): v * NS for k, v in g.critical_parts(sink, since).items()}
    stages = [stage_truth(run, run.timeline(rank), last) for rank in run.ranks if rank_is_stage_head(run, rank)]
    return {
        "parts": dict(stages[-1]["split"]),
        "layout": run.layout.to_dict(),
        "label": run.layout.label(),
        "step_time": float((g.end[sink] - since) * NS),
        "critical_path": {k: float(v) for k, v in sorted(critical.items())},
        "stages": stages,
        "peak_memory": max(s[PART_MEMORY]["peak_allocated"] for s in stages),
        "power": float(np.mean([s[PART_POWER] for s in stages])),
        "fits": bool(max(s[PART_MEMORY]["peak_allocated"] for s in stages) <= run.gpu.memory),
    }


def rank_is_stage_head(run: SimulatedRun, rank: int) -> bool:
    """The rank with tensor- and data-parallel coordinate 0 of its stage (all others repeat it)."""
    tp_rank, dp_rank, _ = run.layout.coords(rank)
    return tp_rank == 0 and dp_rank == 0


def in_step(tl: RankTimeline, step: int) -> tuple[list[dict], float, float]:
    """The GPU records of a rank whose launching call starts within the step's range."""
    window = next(s for s in tl.steps if s[STEP] == step)
    lo, hi = window[START], window[END]
    launched = {r[CORR]: r[START] for r in tl.runtime}
    rows = [r for r in tl.gpu if lo <= launched.get(r[CORR], -1.0) < hi]
    return rows, lo, hi


def stage_truth(run: SimulatedRun, tl: RankTimeline, step: int) -> dict:
    lay = run.layout
    rows, lo, hi = in_step(tl, step)
    busy: dict[str, float] = {}
    counts: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    pure: dict[str, float] = {}
    for r in rows:
        comm = r["comm"]
        part = ROLE_PART[comm["role"]] if comm else PART_OF[r[PART]]
        busy[part] = busy.get(part, 0.0) + (r[END] - r[START]) * NS
        counts[part] = counts.get(part, 0) + 1
        if comm:
            nbytes[part] = nbytes.get(part, 0) + int(comm[BYTES])
            pure[part] = pure.get(part, 0.0) + max(run.graph.dur[j] for j in comm["joins"]) * NS
    _, _, stage = lay.coords(tl.rank)
    passes = lay.micro_batches * lay.virtual_stages
    # the split charges what ran in the step's range, whichever step launched it (as the reader does)
    running = [r for r in tl.gpu if r[END] > lo and r[START] < hi]
    split = _split(run, running, lo, hi)
    peak = max((m[MEMORY_TOTAL] for m in tl.memory), default=0.0)
    return {
        "stage": stage,
        "rank": tl.rank,
        "step_time": float((hi - lo) * NS),
        "split": split,
        "busy": {k: float(v) for k, v in sorted(busy.items())},
        "counts": dict(sorted(counts.items())),
        "bytes": dict(sorted(nbytes.items())),
        "pure": {k: float(v) for k, v in sorted(pure.items())},
        PART_IDLE: float((hi - lo - _union([(r[START], r[END]) for r in running if not r["comm"]], lo, hi)) * NS),
        "power": mean_power(run.gpu, tl.gpu, lo, hi),
        "per_micro_batch": {
            PART_FORWARD: busy.get(PART_FORWARD, 0.0) / passes,
            PART_BACKWARD: (busy.get(PART_BACKWARD, 0.0) + busy.get(PART_RECOMPUTE, 0.0)) / passes,
        },
        "memory": {
            "peak_allocated": float(peak),
            "peak_reserved": float(reserved(peak)),
            **{k: float(mem.aligned(v)) for k, v in mem.static_bytes(run.model, lay, stage).items()},
            "activations_per_layer": float(mem.aligned(mem.layer_activation_bytes(run.model, lay))),
        },
    }


def _split(run: SimulatedRun, rows: list[dict], lo: float, hi: float) -> dict[str, float]:
    """The step's exclusive split from the simulator's labels (see split.py): a p2p kernel's
    transfer is its last pure-duration, the time of its longest join; before that it waits."""
    classes: dict[str, list] = {}
    first_compute = hi
    for r in rows:
        comm = r["comm"]
        if not comm:
            name = PART_OPTIMIZER if r[PART] == "optimizer" else PART_COMPUTE
            first_compute = min(first_compute, r[START]) if name == PART_COMPUTE else first_compute
        elif comm["role"] == "pp":
            pure = max(run.graph.dur[j] for j in comm["joins"])
            cut = max(r[START], r[END] - pure)
            classes.setdefault("pp_wait", []).append((r[START], cut))
            classes.setdefault(PART_PP_P2P, []).append((cut, r[END]))
            continue
        else:
            name = {"tp": PART_TP, "dp": PART_DP}.get(comm["role"], "other_comm")
        classes.setdefault(name, []).append((r[START], r[END]))
    pipeline = run.layout.pp > 1
    if pipeline:
        classes["fill"] = [(lo, first_compute)]
    intervals = {k: (np.array([a for a, _ in v]), np.array([b for _, b in v])) for k, v in classes.items()}
    order = [PART_OPTIMIZER, PART_COMPUTE, PART_TP, PART_PP_P2P, "pp_wait", PART_DP, "other_comm", "fill"]
    got = exclusive_split(intervals, order, lo, hi, PART_HOST)
    out = {part: 0.0 for part in LAYOUT_PARTS if part not in (PART_STEP, PART_MEMORY)}
    out[PART_BUBBLE] += got.pop("pp_wait", 0.0) + got.pop("fill", 0.0)
    out[PART_BUBBLE if pipeline else PART_DP] += got.pop("other_comm", 0.0)
    for part, ns in got.items():
        out[part] += ns
    return {part: float(ns * NS) for part, ns in out.items()}


def _union(intervals: list[tuple], lo: float, hi: float) -> float:
    """Length of the union of intervals clipped to [lo, hi]."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            total += 0.0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0.0 if cur_e is None else cur_e - cur_s)


def reserved(allocated: float) -> float:
    """Memory the caching allocator holds for a peak allocation: whole 2 MiB segments."""
    return float(np.ceil(allocated / mem.SEGMENT) * mem.SEGMENT)


def step_part_names() -> tuple[str, ...]:
    return (PART_STEP, *PART_OF.values(), PART_IDLE)
