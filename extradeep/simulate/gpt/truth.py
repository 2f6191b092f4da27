"""Ground truth of a simulated GPT layout: step time, where it goes, and memory, from the simulator's own labels.

Values are seconds and bytes of the last simulated step (the steady state; without noise every step
after the first is the same):
- ``step_time``: the iteration time, between the ends of the last two steps of the slowest rank;
- ``critical_path``: that time split by what the critical path spends it on (compute forward /
  backward / recompute, optimizer, tensor-, pipeline- and data-parallel communication as pure
  transfer time, CPU work, and ``wait``: launch latencies and synchronisation wake-ups); the parts
  sum to ``step_time`` exactly;
- ``stages``: per pipeline stage, what a profile of its rank shows in that step: the step range's
  duration, busy time per part (kernels launched in the step, by the launching runtime call's start,
  as the readers assign them), kernel counts and message bytes per communication role, the pure time
  of those collectives, idle time (the step minus the union of compute kernels), peak memory.
The labels come from the simulator (which pass, which process group), never from kernel names, so a
reader that classifies kernels by what a profile shows can be checked against them.
"""

from __future__ import annotations

import numpy as np

from extradeep.columns import (
    PART_BACKWARD,
    PART_DP,
    PART_FORWARD,
    PART_IDLE,
    PART_OPTIMIZER,
    PART_OTHER_COMM,
    PART_OTHER_COMPUTE,
    PART_PP,
    PART_RECOMPUTE,
    PART_STEP,
    PART_TP,
)
from extradeep.simulate.gpt import memory as mem
from extradeep.simulate.gpt.run import RankTimeline, SimulatedRun

# simulator part labels -> the parts the readers report
PART_OF = {
    "compute_forward": PART_FORWARD,
    "compute_backward": PART_BACKWARD,
    "recompute": PART_RECOMPUTE,
    "optimizer": PART_OPTIMIZER,
    "other": PART_OTHER_COMPUTE,
    "tp_comm": PART_TP,
    "pp_comm": PART_PP,
    "dp_comm": PART_DP,
    "other_comm": PART_OTHER_COMM,
}
ROLE_PART = {"tp": PART_TP, "pp": PART_PP, "dp": PART_DP, "mp": PART_OTHER_COMM, "embedding": PART_OTHER_COMM}
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
        "layout": run.layout.to_dict(),
        "label": run.layout.label(),
        "step_time": float((g.end[sink] - since) * NS),
        "critical_path": {k: float(v) for k, v in sorted(critical.items())},
        "stages": stages,
        "peak_memory": max(s["memory"]["peak_allocated"] for s in stages),
        "fits": bool(max(s["memory"]["peak_allocated"] for s in stages) <= run.gpu.memory),
    }


def rank_is_stage_head(run: SimulatedRun, rank: int) -> bool:
    """The rank with tensor- and data-parallel coordinate 0 of its stage (all others repeat it)."""
    tp_rank, dp_rank, _ = run.layout.coords(rank)
    return tp_rank == 0 and dp_rank == 0


def in_step(tl: RankTimeline, step: int) -> tuple[list[dict], float, float]:
    """The GPU records of a rank whose launching call starts within the step's range."""
    window = next(s for s in tl.steps if s["step"] == step)
    lo, hi = window["start"], window["end"]
    launched = {r["corr"]: r["start"] for r in tl.runtime}
    rows = [r for r in tl.gpu if lo <= launched.get(r["corr"], -1.0) < hi]
    return rows, lo, hi


def stage_truth(run: SimulatedRun, tl: RankTimeline, step: int) -> dict:
    lay = run.layout
    rows, lo, hi = in_step(tl, step)
    busy: dict[str, float] = {}
    counts: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    pure: dict[str, float] = {}
    compute = []
    for r in rows:
        comm = r["comm"]
        part = ROLE_PART[comm["role"]] if comm else PART_OF[r["part"]]
        busy[part] = busy.get(part, 0.0) + (r["end"] - r["start"]) * NS
        counts[part] = counts.get(part, 0) + 1
        if comm:
            nbytes[part] = nbytes.get(part, 0) + int(comm["bytes"])
            pure[part] = pure.get(part, 0.0) + max(run.graph.dur[j] for j in comm["joins"]) * NS
        else:
            compute.append((r["start"], r["end"]))
    _, _, stage = lay.coords(tl.rank)
    passes = lay.micro_batches * lay.virtual_stages
    peak = max((m["total"] for m in tl.memory), default=0.0)
    return {
        "stage": stage,
        "rank": tl.rank,
        "step_time": float((hi - lo) * NS),
        "busy": {k: float(v) for k, v in sorted(busy.items())},
        "counts": dict(sorted(counts.items())),
        "bytes": dict(sorted(nbytes.items())),
        "pure": {k: float(v) for k, v in sorted(pure.items())},
        PART_IDLE: float((hi - lo - _union(compute, lo, hi)) * NS),
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
