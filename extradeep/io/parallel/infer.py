"""The parallel layout one profile shows, every field with where it was read.

Roles of the communicators first: by the description the framework gave the group (Megatron-Core's
`TENSOR_MODEL_PARALLEL_GROUP`, `PIPELINE_MODEL_PARALLEL_GROUP`, `DATA_PARALLEL_GROUP`; DeviceMesh's
`mesh_tp`, `mesh_pp`, `mesh_dp*`), otherwise by how the step uses it: point-to-point transfers are
pipeline traffic (unless they are an all-to-all, or the run is FSDP without pipeline markers),
all-reduces launched in both the forward (main thread) and the backward pass (autograd thread) are
tensor-parallel, the largest reduce-scatter / all-gather / all-reduce traffic of the backward pass and
the optimizer is data-parallel. A degree is the role's group size; a role the profile shows no sign
of has degree 1 only when the profile records its collectives or groups at all. Then the schedule
(passes per step = runs of kernel launches on the autograd thread), the ZeRO stage (what the
data-parallel group does: all-reduce 0; reduce-scatter once per step 1, in every micro-batch 2;
all-gather in the forward pass 3), recomputation (forward kernels launched again in the backward
pass, or checkpointing markers) and the framework (its markers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    CHUNKS,
    DP,
    DP_RANK,
    END,
    FRAMEWORK,
    GPUS,
    HIDDEN,
    KIND,
    LAUNCH,
    MICRO_BATCH,
    MICRO_BATCHES,
    NAME,
    PASSES,
    PP,
    RECOMPUTE,
    SCHEDULE,
    STAGE,
    START,
    THREAD,
    TP,
    TP_RANK,
    ZERO,
)
from extradeep.io.parallel.facts import AUTOGRAD_THREAD, MAIN_THREAD, P2P, Communicator, ProfileFacts, matches

DESCRIPTIONS = {
    TP: re.compile(r"^(TENSOR_MODEL_PARALLEL_GROUP|mesh_tp)$"),
    PP: re.compile(r"^(PIPELINE_MODEL_PARALLEL_GROUP|mesh_pp)$"),
    DP: re.compile(r"^(DATA_PARALLEL_GROUP|mesh_dp(_shard)?|mesh_fsdp)$"),
}
PIPELINE_MARKERS = r"pipeline_parallel\.p2p_communication|forward_backward_pipelining|PipelineEngine|PipelineModule"
FSDP_MARKERS = r"^FSDP::|FullyShardedDataParallel"
FRAMEWORKS = [
    ("megatron", r"^megatron\."),
    ("deepspeed", r"^DeepSpeed|DeepSpeedEngine|DeepSpeedZeroOptimizer"),
    ("fsdp", FSDP_MARKERS),
    ("ddp", r"DistributedDataParallel"),
]
CHECKPOINT_MARKERS = r"CheckpointFunction|_checkpoint_wrapped_module|torch\.utils\.checkpoint|activation_checkpoint"
# kernels that only a forward pass runs (cuDNN's winograd "Forward" kernels also compute data gradients,
# so plain "forward" in a name is no evidence)
FORWARD_KERNEL = re.compile(
    r"layer_?norm\w*(?:fwd|forward)|cuApplyLayerNorm|softmax_warp_forward|SoftMaxForward|flash_fwd|"
    r"fused_dropout|GeluCUDAKernelImpl|pool\w*_forward",
    re.I,
)
TINY = 64  # bytes: a scalar (loss, gradient norm), never a layer's traffic
BYTES_PER_VALUE = 2  # bf16/fp16 activations, to turn message sizes into micro-batch sizes


@dataclass
class Field:
    """One layout field: its value (None when the profile does not tell) and where it came from."""

    value: object
    source: str

    def to_dict(self) -> dict:
        return {"value": self.value, "source": self.source}


def infer_layout(facts: ProfileFacts, model: dict | None = None) -> dict[str, Field]:
    """The layout fields this profile shows (see the module docstring). ``model`` = {"seq": ...,
    "hidden": ...} lets message sizes give the micro-batch size."""
    key = ("layout", repr(sorted((model or {}).items())))
    if key in facts.cache:
        return dict(facts.cache[key])
    usage = comm_usage(facts)
    roles = assign_roles(facts, usage)
    out: dict[str, Field] = {}
    world = _world(facts)
    out[GPUS] = world
    has_comm_view = bool(facts.comms) or bool(len(usage))
    single = not has_comm_view and world.value in (1, None) and facts.processes <= 1
    for role in (TP, PP, DP):
        comm, why = roles.get(role, (None, ""))
        if comm is not None:
            where = "" if comm.source in why else f"; {comm.source}"
            size = f": {comm.label()}" if comm.size else " (its size is not recorded)"
            out[role] = Field(comm.size, f"{why}{size}{where}")
        elif single:
            out[role] = Field(1, "no collectives: one GPU per process")
        elif role != DP and has_comm_view:
            out[role] = Field(1, _absent(role))
        else:
            out[role] = Field(None, _absent(role) if has_comm_view else "not recorded")
    _derive(out, world, facts)
    _coords(out, facts, roles)
    out.update(_schedule(facts, _passes(facts), out[PP]))
    out[ZERO] = _zero(facts, usage, roles, out)
    out[RECOMPUTE] = _recompute(facts)
    out[MICRO_BATCH] = _micro_batch(facts, usage, roles, model)
    out[FRAMEWORK] = _framework(facts)
    facts.cache[key] = dict(out)
    return out


def _absent(role: str) -> str:
    what = {
        TP: "tensor-parallel group or per-layer all-reduce",
        PP: "pipeline group or stage-to-stage transfer",
        DP: "data-parallel group or gradient reduction",
    }[role]
    return f"no {what} in the profile"


def _world(facts: ProfileFacts) -> Field:
    if facts.world is not None:
        return Field(facts.world, facts.world_source)
    sizes = [c.size for c in facts.comms.values() if c.size]
    if sizes:
        return Field(None, f"not recorded (its largest NCCL communicator has {max(sizes)} ranks)")
    if facts.processes > 1:
        return Field(None, f"{facts.processes} processes in one export; the world size is not recorded")
    return Field(None, "not recorded")


def comm_usage(facts: ProfileFacts) -> pd.DataFrame:
    """Per communicator, collective and thread: calls and bytes per measured step (all kernels
    when no step is measured)."""
    if "usage" not in facts.cache:
        facts.cache["usage"] = _usage(facts)
    return facts.cache["usage"]


def _usage(facts: ProfileFacts) -> pd.DataFrame:
    k = facts.kernels
    k = k[k["collective"] != ""]
    if len(facts.steps):
        lo, hi = facts.steps[START].min(), facts.steps[END].max()
        k = k[(k[LAUNCH] >= lo) & (k[LAUNCH] < hi)]
        n_steps = len(facts.steps)
    else:
        n_steps = 1
    if k.empty:
        return pd.DataFrame(columns=["comm", "collective", "thread", "calls", "bytes", "max_bytes"])
    grouped = k.groupby(["comm", "collective", THREAD]).agg(
        calls=("bytes", "size"), bytes=("bytes", "sum"), max_bytes=("bytes", "max")
    )
    grouped["calls"] = grouped["calls"] / n_steps
    grouped[BYTES] = grouped[BYTES] / n_steps
    return grouped.reset_index()


def assign_roles(facts: ProfileFacts, usage: pd.DataFrame) -> dict[str, tuple[Communicator, str]]:
    """role -> (communicator, why) for tp, pp, dp."""
    if "roles" not in facts.cache:
        facts.cache["roles"] = _roles(facts, usage)
    return facts.cache["roles"]


def _roles(facts: ProfileFacts, usage: pd.DataFrame) -> dict[str, tuple[Communicator, str]]:
    roles: dict[str, tuple[Communicator, str]] = {}
    for role, rx in DESCRIPTIONS.items():
        for comm in facts.comms.values():
            if rx.match(comm.desc) and role not in roles:
                roles[role] = (comm, comm.source)
    comms = dict(facts.comms)
    for key in usage["comm"].unique():
        comms.setdefault(key, Communicator(key, None, None, None, "", "NCCL stream of its own"))
    taken = {c.key for c, _ in roles.values()}
    free = [c for key, c in comms.items() if key not in taken and (c.size is None or c.size > 1)]
    per = {c.key: usage[usage["comm"] == c.key] for c in free}
    fsdp = facts.has_marker(FSDP_MARKERS) is not None
    pipeline = facts.has_marker(PIPELINE_MARKERS)
    if PP not in roles:
        for c in free:
            u = per[c.key]
            if len(u) and u["collective"].isin(P2P).all():
                if fsdp and not pipeline:
                    _note(facts, f"point-to-point traffic in {c.label()} of an FSDP run: not pipeline stages")
                    continue
                why = (
                    f"point-to-point transfers each step (pipeline marker {pipeline!r})"
                    if pipeline
                    else ("point-to-point transfers each step (no pipeline marker)")
                )
                roles[PP] = (c, why)
                break
    if TP not in roles:
        pp_key = roles[PP][0].key if PP in roles else None
        candidates = [(_calls(per[c.key], "allreduce"), c) for c in free if _tp_like(per[c.key]) and c.key != pp_key]
        if candidates:
            calls, comm = max(candidates, key=lambda x: x[0])
            roles[TP] = (comm, f"all-reduces in the forward and the backward pass ({calls:g} per step)")
    if DP not in roles:
        _dp_by_usage(facts, roles, free, per)
    alltoall = usage[usage["collective"] == "alltoall"]
    if len(alltoall):
        _note(facts, "all-to-all traffic (sharded embeddings or experts): not a tensor/pipeline/data axis")
    return roles


def _dp_by_usage(facts: ProfileFacts, roles: dict, free: list, per: dict) -> None:
    """The data-parallel group from its traffic: the largest gradient reduction, preferring one that
    overlaps the backward pass (DDP / Megatron / ZeRO hooks on the autograd thread). With pipeline
    stages, a reduction only on the main thread after the backward pass may be the tied embedding's
    (first and last stage) or the gradient norm's: not taken as data parallelism unless it is sharded
    or its members are not the pipeline group's (`_reduces_after_backward`). With the world size
    and the tp and pp group sizes known, the group must have the size left over."""
    used = {c.key for c, _ in roles.values()}
    sizes = [roles[r][0].size for r in (TP, PP) if r in roles]
    expected = None
    if facts.world and len(sizes) == 2 and all(sizes):
        expected = facts.world // (sizes[0] * sizes[1])
    elif facts.world and TP not in roles and PP not in roles:
        expected = None
    if expected == 1:
        return
    candidates = []
    for c in free:
        u = per[c.key]
        reductions = u["collective"].isin(["allreduce", "reducescatter", "allgather"])
        grads = u[reductions & ((u["max_bytes"] > TINY) | (u["max_bytes"] == 0))]  # 0: size not recorded
        if c.key in used or not len(grads) or (expected and c.size and c.size != expected):
            continue
        overlapped = bool((grads[THREAD] == AUTOGRAD_THREAD).any())
        if PP in roles and not overlapped and not _reduces_after_backward(grads, c, roles[PP][0]):
            continue
        candidates.append((overlapped, grads[BYTES].sum(), grads["calls"].sum(), c))
    if candidates:
        _, volume, calls, comm = max(candidates, key=lambda x: x[:3])
        size = f"{volume / 1e6:.3g} MB" if volume else f"{calls:g} calls, sizes not recorded"
        roles[DP] = (comm, f"gradient reduction ({size} per step)")


def _reduces_after_backward(grads: pd.DataFrame, comm: Communicator, pipeline: Communicator) -> bool:
    """Whether a main-thread reduction of a pipelined run is still the data-parallel one (DeepSpeed's
    engine reduces ZeRO 0-1 gradients after the backward pass): sharded gradients (reduce-scatter or
    all-gather; the tied embedding and the gradient norm only all-reduce), or a group whose recorded
    members share only this rank with the pipeline group (the tied embedding's group joins the first
    and the last stage of this rank's pipeline)."""
    if grads["collective"].isin(["reducescatter", "allgather"]).any():
        return True
    return bool(comm.members and pipeline.members and len(set(comm.members) & set(pipeline.members)) == 1)


def _note(facts: ProfileFacts, text: str) -> None:
    if text not in facts.notes:
        facts.notes.append(text)


def _calls(u: pd.DataFrame, collective: str) -> float:
    return float(u.loc[u["collective"] == collective, "calls"].sum())


def _tp_like(u: pd.DataFrame) -> bool:
    ar = u[(u["collective"] == "allreduce") & ((u["max_bytes"] > TINY) | (u["max_bytes"] == 0))]  # 0: not recorded
    return set(ar[THREAD]) >= {MAIN_THREAD, AUTOGRAD_THREAD}


def _derive(out: dict, world: Field, facts: ProfileFacts) -> None:
    """With the world size and two degrees known, the third is their quotient: ranks that are not
    split by tensor or pipeline parallelism are data-parallel replicas (DDP, FSDP). An export of
    several processes of an FSDP/DDP run without a world size: the processes are the replicas."""
    known = {r: out[r].value for r in (TP, PP, DP)}
    missing = [r for r, v in known.items() if v is None]
    if world.value and len(missing) == 1:
        rest = int(np.prod([v for v in known.values() if v is not None]))
        if rest and world.value % rest == 0:
            marker = facts.has_marker(FSDP_MARKERS) or facts.has_marker(r"DistributedDataParallel")
            also = f" ({marker})" if marker and missing[0] == DP else ""
            out[missing[0]] = Field(world.value // rest, f"world size {world.value} / the other degrees ({rest}){also}")
    elif missing == [DP] and facts.processes > 1:
        marker = facts.has_marker(FSDP_MARKERS) or facts.has_marker(r"DistributedDataParallel")
        if marker and known[TP] == 1 and known[PP] == 1:
            out[DP] = Field(facts.processes, f"{facts.processes} processes in this export, replicas of {marker}")


def _coords(out: dict, facts: ProfileFacts, roles: dict) -> None:
    for coord, role in ((TP_RANK, TP), (STAGE, PP), (DP_RANK, DP)):
        comm = roles.get(role, (None, ""))[0]
        if comm is not None and comm.index is not None:
            out[coord] = Field(comm.index, f"this rank's place in {comm.label()}")
        elif out[role].value == 1:
            out[coord] = Field(0, f"{role} is 1")
        else:
            out[coord] = Field(None, "not recorded")


def _passes(facts: ProfileFacts) -> Field:
    """Backward passes per step: runs of kernel launches from the autograd thread (median over steps)."""
    k = facts.kernels
    if not len(facts.steps) or not (k[THREAD] == AUTOGRAD_THREAD).any():
        return Field(None, "no backward pass on a separate thread recorded")
    lo, hi = facts.steps[START].min(), facts.steps[END].max()
    if not ((k[THREAD] == AUTOGRAD_THREAD) & (k[LAUNCH] >= lo) & (k[LAUNCH] < hi)).any():
        return Field(None, "no kernel launched from a second thread within the steps")
    counts = [int(runs.max(initial=0)) for _, runs in _backward_runs(facts)]
    return Field(int(np.median(counts)), "backward passes per step (runs of kernel launches on the autograd thread)")


def _backward_runs(facts: ProfileFacts):
    """Per measured step: (its kernels in launch order, the backward pass of each: 1, 2, ... for a
    launch from the autograd thread, counting runs of such launches; 0 for other threads)."""
    k = facts.kernels
    k = k[k[LAUNCH] >= 0].sort_values(LAUNCH)
    for lo, hi in facts.steps[[START, END]].to_numpy():
        window = k[(k[LAUNCH] >= lo) & (k[LAUNCH] < hi)]
        is_bwd = window[THREAD].to_numpy() == AUTOGRAD_THREAD
        yield window, np.where(is_bwd, np.cumsum(is_bwd & ~np.r_[False, is_bwd[:-1]]), 0)


def _passes_with(facts: ProfileFacts, comm_key, collective: str) -> int | None:
    """Backward passes per step (median over steps) that launch ``collective`` on ``comm_key``;
    None without measured steps."""
    if not len(facts.steps) or "comm" not in facts.kernels:
        return None
    counts = []
    for window, runs in _backward_runs(facts):
        hit = (runs > 0) & (window["comm"].to_numpy() == comm_key) & (window["collective"].to_numpy() == collective)
        counts.append(len(np.unique(runs[hit])))
    return int(np.median(counts))


def _schedule(facts: ProfileFacts, passes: Field, pp: Field) -> dict[str, Field]:
    """Schedule, chunks per stage and micro-batches. Passes per step are micro-batches x chunks; only
    Megatron-LM's NVTX ranges tell interleaving (they never reach a Kineto trace), so without them
    and with pipeline stages the split stays open."""
    out = {PASSES: passes}
    interleaved = facts.has_marker(r"forward_backward_pipelining_with_interleaving")
    megatron_p2p = facts.has_marker(r"pipeline_parallel\.p2p_communication")
    if interleaved:
        out[SCHEDULE] = Field("interleaved", f"Megatron-LM NVTX range {interleaved}")
        out[CHUNKS] = Field(None, "interleaved; chunks per stage not recorded")
    elif pp.value == 1:
        out[SCHEDULE] = Field("1f1b", "no pipeline: one stage")
        out[CHUNKS] = Field(1, "no pipeline: one stage")
    elif megatron_p2p:
        out[SCHEDULE] = Field("1f1b", f"Megatron-LM ranges ({megatron_p2p}) without interleaving ranges")
        out[CHUNKS] = Field(1, f"Megatron-LM ranges ({megatron_p2p}) without interleaving ranges")
    else:
        out[SCHEDULE] = Field(None, "not recorded (interleaving shows only in Megatron-LM's NVTX ranges)")
        out[CHUNKS] = Field(None, "not recorded")
    v = out[CHUNKS].value
    if passes.value is not None and v:
        out[MICRO_BATCHES] = Field(passes.value // v, passes.source + (f" / {v} chunks" if v > 1 else ""))
    else:
        out[MICRO_BATCHES] = Field(
            None,
            f"{passes.value} passes per step = micro-batches x chunks per stage"
            if passes.value is not None
            else passes.source,
        )
    return out


def _zero(facts: ProfileFacts, usage: pd.DataFrame, roles: dict, out: dict) -> Field:
    marker = facts.has_marker(r"DeepSpeedZeroOptimizer_Stage3")
    if marker:
        return Field(3, f"DeepSpeed NVTX range {marker}")
    fsdp = facts.has_marker(FSDP_MARKERS)
    if DP not in roles:
        if out[DP].value == 1:
            return Field(0, "one data-parallel rank: nothing sharded")
        if fsdp:
            return Field(3, f"FSDP range {fsdp} (full sharding, FSDP's default)")
        return Field(None, "no data-parallel collectives recorded")
    u = usage[usage["comm"] == roles[DP][0].key]
    gathers_fwd = u[(u["collective"] == "allgather") & (u[THREAD] == MAIN_THREAD)]["calls"].sum()
    gathers_bwd = u[(u["collective"] == "allgather") & (u[THREAD] == AUTOGRAD_THREAD)]["calls"].sum()
    scatters = u[u["collective"] == "reducescatter"]["calls"].sum()
    passes = out[PASSES].value or 0
    if gathers_bwd > 0 and gathers_fwd > 0:
        return Field(3, "parameters all-gathered in the forward and the backward pass")
    if scatters:
        # ZeRO 2 reduces in every backward pass, ZeRO 1 in the last one's (per model chunk): the count
        # of reduce-scatters alone tells them apart only while a step has fewer buckets than passes
        spread = _passes_with(facts, roles[DP][0].key, "reducescatter")
        every = scatters >= passes if spread is None else spread > passes / 2
        if passes > 1 and every:
            return Field(2, f"gradients reduce-scattered in every micro-batch ({scatters:g} per step)")
        how = "once per step" if passes > 1 else "(one micro-batch: ZeRO 1 and 2 look alike)"
        return Field(1, f"gradients reduce-scattered {how}, parameters all-gathered after the optimizer step")
    if fsdp:
        return Field(3, f"FSDP range {fsdp}")
    return Field(0, "gradients all-reduced over the data-parallel group")


def _recompute(facts: ProfileFacts) -> Field:
    marker = facts.has_marker(CHECKPOINT_MARKERS)
    if marker:
        return Field("full", f"activation checkpointing marker {marker}")
    k = facts.kernels
    k = k[(k[KIND] == "kernel") & (k["collective"] == "")]
    if not (k[THREAD] == AUTOGRAD_THREAD).any():
        return Field(None, "no backward pass on a separate thread recorded")
    forward = matches(k[NAME], FORWARD_KERNEL)
    main = int((forward & (k[THREAD] == MAIN_THREAD)).sum())
    again = int((forward & (k[THREAD] == AUTOGRAD_THREAD)).sum())
    share = again / main if main else 0.0
    if share >= 0.6:
        return Field("full", f"forward kernels run again in the backward pass ({share:.0%} of them)")
    if share > 0.02:
        return Field("selective", f"part of the forward kernels run again in the backward pass ({share:.0%})")
    return Field("none", "no forward kernel runs again in the backward pass")


def _micro_batch(facts: ProfileFacts, usage: pd.DataFrame, roles: dict, model: dict | None) -> Field:
    if not model or not model.get("seq") or not model.get("hidden"):
        return Field(None, "needs the model's sequence length and hidden size (or a file-name token / manifest)")
    per_sample = model["seq"] * model[HIDDEN] * BYTES_PER_VALUE
    for role, kind in ((PP, P2P), (TP, ("allreduce",))):
        if role in roles:
            u = usage[(usage["comm"] == roles[role][0].key) & usage["collective"].isin(kind)]
            single = u[u["collective"].isin(("allreduce", "send", "recv"))]
            if len(single) and single["max_bytes"].max() > 0 and single["max_bytes"].max() % per_sample == 0:
                mbs = int(single["max_bytes"].max() // per_sample)
                return Field(
                    mbs, f"{role} message of {int(single['max_bytes'].max()):,} bytes = mbs x seq x hidden x 2"
                )
    return Field(None, "no activation-sized message to divide by seq x hidden")


def _framework(facts: ProfileFacts) -> Field:
    for name, rx in FRAMEWORKS:
        hit = facts.has_marker(rx)
        if hit:
            return Field(name, f"marker {hit}")
    descs = {c.desc for c in facts.comms.values()}
    if any(d.endswith("_PARALLEL_GROUP") for d in descs):
        return Field("megatron", "Megatron-Core process-group descriptions")
    if any(d.startswith("mesh_") for d in descs):
        return Field("fsdp", "DeviceMesh process groups")
    return Field(None, "no framework marker")
