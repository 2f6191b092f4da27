"""One rank's training step of a Megatron-style GPT, issued operation by operation.

Per step: zero the gradient buffer; run the stage's schedule (forward and backward passes of its
model chunks over the micro-batches, grouped point-to-point calls between stages); reduce the
gradients over the data-parallel group (all-reduce for ZeRO 0, reduce-scatter for ZeRO 1 and 2,
per layer for ZeRO 3), the tied embedding's gradient between the first and last stage, the gradient
norm over the model-parallel group (a scalar read back to the CPU); the Adam step on the rank's
shard, and for ZeRO 1-2 the all-gather of the updated parameters. Tensor-parallel layers all-reduce
their outputs (two per layer forward, two per backward). Backward passes run on the autograd
thread; recomputation re-runs a layer's forward (or its attention core) before its backward.
Gradient reduction overlaps the backward pass as Megatron's DDP does it: buckets are reduced as
soon as their gradients are complete, in the last micro-batch for ZeRO 0-1 and in every micro-batch
once the gradients are sharded. DeepSpeed's engine (its defaults: no overlap_comm) reduces ZeRO 0-1
gradients at the accumulation boundary instead, from the main thread after the backward pass returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from extradeep.columns import GRADIENT_BUCKET_PARAMS
from extradeep.simulate.gpt import memory as mem
from extradeep.simulate.gpt.config import GPTModel, ParallelLayout
from extradeep.simulate.gpt.costs import Costs
from extradeep.simulate.gpt.issue import (
    AUTOGRAD,
    COMPUTE,
    DP_STREAM,
    MAIN,
    MP_STREAM,
    PP_STREAM,
    TP_STREAM,
    RankIssuer,
)
from extradeep.simulate.gpt.names import DEEPSPEED, FSDP_RANGES, MEGATRON_INTERLEAVED, MEGATRON_P2P, TORCH_OPTIMIZER
from extradeep.simulate.gpt.schedule import stage_actions

ADAM_CHUNKS = 4  # multi-tensor apply launches of one optimizer step


@dataclass(frozen=True)
class Groups:
    """The process groups of one rank (sorted member lists)."""

    tp: tuple
    dp: tuple
    pp: tuple
    mp: tuple
    embedding: tuple


def rank_groups(layout: ParallelLayout, rank: int) -> Groups:
    pp = layout.pp_group(rank)
    emb = (pp[0], pp[-1]) if layout.pp > 1 else (rank,)
    return Groups(
        tuple(layout.tp_group(rank)), tuple(layout.dp_group(rank)), tuple(pp), tuple(layout.mp_group(rank)), emb
    )


class StepProgram:
    """Issues the steps of one rank. Ranges are recorded for the format that would show them:
    "nvtx" (nsys), "user_annotation" (Kineto's record_function) or "both"."""

    def __init__(self, model: GPTModel, layout: ParallelLayout, costs: Costs, rank: int):
        self.model, self.layout, self.costs, self.rank = model, layout, costs, rank
        self.tp_rank, self.dp_rank, self.stage = layout.coords(rank)
        self.groups = rank_groups(layout, rank)
        self.fw = layout.framework
        self.chunks = layout.pp * layout.virtual_stages
        self.layers = model.layers // self.chunks
        self.fwd_ops = costs.layer_forward()
        self.bwd_ops = costs.layer_backward()
        self.act = mem.aligned(mem.layer_activation_bytes(model, layout))
        self.full_act = mem.aligned(mem.layer_activation_bytes(model, layout, "none"))
        stored = mem.layer_activation_bytes(model, layout)
        self.temp = {"none": 0, "selective": mem.aligned(self.full_act - stored), "full": self.full_act}[
            layout.recompute
        ]
        self.logits = mem.aligned(mem.logits_bytes(model, layout))
        self.gathered = mem.aligned(mem.gathered_layer_bytes(model, layout))
        self.params = mem.rank_params(model, layout, self.stage)
        self.buckets = self._buckets()
        self.seq: dict = {}
        self.received: dict = {}  # transfer key -> True once its receiving call was issued

    # -- helpers ---------------------------------------------------------------------------
    def _buckets(self) -> dict[tuple, float]:
        """(chunk, layer index within chunk) after whose backward a gradient bucket is complete ->
        the bucket's parameters; the last bucket of a chunk closes after its last layer (embedding)."""
        out: dict[tuple, float] = {}
        for c in range(self.layout.virtual_stages):
            g = c * self.layout.pp + self.stage
            total = mem.chunk_params(self.model, self.layout, g)
            per_layer = self.model.layer_params / self.layout.tp
            filled, count = 0.0, 0.0
            for idx in reversed(range(self.layers)):
                filled += per_layer
                count += per_layer
                if filled >= GRADIENT_BUCKET_PARAMS or idx == 0:
                    out[(c, idx)] = count + (total - self.layers * per_layer if idx == 0 else 0.0)
                    filled = count = 0.0
        return out

    def _key(self, step: int, role: str, group: tuple):
        n = self.seq[(step, role)] = self.seq.get((step, role), -1) + 1
        return (step, role, group, n)

    def _group_collective(
        self,
        io: RankIssuer,
        step: int,
        slot: int,
        stream: int,
        role: str,
        kind: str,
        group: tuple,
        nbytes: float,
        part: str,
    ) -> None:
        """A collective of this rank's `role` group on its NCCL stream, ordered after the compute stream."""
        io.wait_stream(slot, stream, COMPUTE)
        ns = self.costs.collective(kind.removesuffix("_f32"), list(group), nbytes)
        comm = {"role": role, "collective": kind, "group": list(group), "bytes": int(nbytes)}
        io.collective(slot, stream, kind, [(self._key(step, role, group), ns, part)], part, comm)

    def _tp_allreduce(self, io: RankIssuer, step: int, slot: int, nbytes: float, part: str = "tp_comm") -> None:
        if self.layout.tp > 1:
            self._group_collective(io, step, slot, TP_STREAM, "tp", "allreduce", self.groups.tp, nbytes, part)
            io.wait_stream(slot, COMPUTE, TP_STREAM)

    def _kernels(self, io: RankIssuer, step: int, slot: int, ops, part: str, first_alloc=None) -> int | None:
        """Issue compute kernels (and the TP all-reduces marked "AR") in order; allocates
        `first_alloc` bytes when the first kernel starts. Returns the last kernel's end node."""
        last = None
        for key, ns in ops:
            if key in ("AR", "AR_small"):
                size = self.costs.activation_message if key == "AR" else 4 * self.costs.tokens
                self._tp_allreduce(io, step, slot, size)
                continue
            node = io.kernel(slot, COMPUTE, key, ns, part)
            if last is None and first_alloc:
                io.alloc(node, first_alloc[0], first_alloc[1])
            last = node
        return last

    # -- the step ----------------------------------------------------------------------------
    def run_step(self, io: RankIssuer, step: int) -> None:
        step_range = io.range_open(MAIN, f"train_step {step}", "extradeep")  # extradeep.capture.marks
        profiler_step = io.range_open(MAIN, f"ProfilerStep#{step}", kind="user_annotation")
        start = step_range[4]
        if step == 0:
            for label, nbytes in mem.static_bytes(self.model, self.layout, self.stage).items():
                io.alloc(start, mem.aligned(nbytes), label)
        grads = self.params * self.model.grad_bytes / (self.layout.dp if self.layout.zero >= 2 else 1)
        io.kernel(MAIN, COMPUTE, "zero_grad", self.costs.elementwise(grads), "other", "memset", int(grads))
        actions = stage_actions(
            self.stage, self.layout.pp, self.layout.micro_batches, self.layout.schedule, self.layout.virtual_stages
        )
        last_bwd = {a[1]: i for i, a in enumerate(actions) if a[0] == "bwd"}  # chunk -> its last backward
        phase_range, phase = None, None
        for index, action in enumerate(actions):
            if self.layout.schedule == "interleaved" and self.fw == "megatron":
                now = _phase(actions, index)
                if now != phase:
                    if phase_range is not None:
                        io.range_close(phase_range)
                    phase_range, phase = io.range_open(MAIN, MEGATRON_INTERLEAVED.format(now)), now
            if action[0] == "fwd":
                self.forward(io, step, action[1], action[2])
            elif action[0] == "bwd":
                self.backward(io, step, action[1], action[2], index == last_bwd[action[1]])
            else:
                self.p2p(io, step, *action[1:])
        if phase_range is not None:
            io.range_close(phase_range)
        self.finish(io, step)
        io.synchronize(MAIN, COMPUTE)
        io.range_close(profiler_step)
        io.range_close(step_range)
        io.rec.steps.append((self.rank, step, step_range[4], step_range[5]))

    # -- passes ------------------------------------------------------------------------------
    def forward(self, io: RankIssuer, step: int, chunk: int, mb: int) -> None:
        g = chunk * self.layout.pp + self.stage
        ds = io.range_open(MAIN, DEEPSPEED["forward"]) if self.fw == "deepspeed" else None
        if g > 0 and ("F", g - 1, mb) in self.received:
            io.wait_stream(MAIN, COMPUTE, PP_STREAM)
        if g == 0:
            self._kernels(io, step, MAIN, self.costs.embedding_forward(), "compute_forward")
        ahead = self._gather(io, step, MAIN) if self.layout.zero == 3 else None
        for idx in range(self.layers):
            gathered, ahead = ahead, (self._gather(io, step, MAIN) if ahead and idx + 1 < self.layers else None)
            self._layer_forward(io, step, chunk, idx, gathered)
        if g == self.chunks - 1:
            self._kernels(io, step, MAIN, self.costs.head_forward(), "compute_forward", (self.logits, "logits"))
        if ds is not None:
            io.range_close(ds)

    def _layer_forward(self, io: RankIssuer, step: int, chunk: int, idx: int, gathered) -> None:
        name = self._module(chunk, idx)
        fsdp = io.range_open(MAIN, FSDP_RANGES[0].format(name), kind="both") if self.fw == "fsdp" else None
        io.wait_event(MAIN, COMPUTE, gathered)
        end = self._kernels(io, step, MAIN, self.fwd_ops, "compute_forward", (self.act, "activations"))
        if gathered is not None:
            io.alloc(end, -self.gathered, "gathered parameters", "end")
        if fsdp is not None:
            io.range_close(fsdp)

    def _module(self, chunk: int, idx: int) -> str:
        layer = (chunk * self.layout.pp + self.stage) * self.layers + idx
        suffix = "._checkpoint_wrapped_module" if self.layout.recompute == "full" else ""
        return f"layers.{layer}{suffix}"

    def _gather(self, io: RankIssuer, step: int, slot: int) -> tuple | None:
        """ZeRO-3: all-gather one layer's parameters on the DP stream once the compute stream has
        finished what it was given so far (so at most two layers are gathered at once); the
        event the layer's compute waits for. None with one data-parallel rank (nothing sharded)."""
        if self.layout.dp == 1:
            return None
        io.wait_stream(slot, DP_STREAM, COMPUTE)
        nbytes = self.model.layer_params / self.layout.tp * self.model.param_bytes
        ns = self.costs.collective("allgather", list(self.groups.dp), nbytes)
        comm = {"role": "dp", "collective": "allgather", "group": list(self.groups.dp), "bytes": int(nbytes)}
        key = self._key(step, "dp", self.groups.dp)
        end = io.collective(slot, DP_STREAM, "allgather", [(key, ns, "dp_comm")], "dp_comm", comm)
        io.alloc(end, self.gathered, "gathered parameters")
        return io.record_event(slot, DP_STREAM)

    def backward(self, io: RankIssuer, step: int, chunk: int, mb: int, last_mb: bool) -> None:
        g = chunk * self.layout.pp + self.stage
        ds = io.range_open(MAIN, DEEPSPEED["backward"]) if self.fw == "deepspeed" else None
        call = io.cpu(MAIN, 6_000.0)  # loss.backward(): hands the graph to the autograd thread
        io.cpu(AUTOGRAD, 3_000.0, [call])
        if g < self.chunks - 1 and ("B", g + 1, mb) in self.received:
            io.wait_stream(AUTOGRAD, COMPUTE, PP_STREAM)
        if g == self.chunks - 1:
            end = self._kernels(io, step, AUTOGRAD, self.costs.head_backward(), "compute_backward")
            io.alloc(end, -self.logits, "logits", "end")
        sync_grads = self.layout.zero >= 2 or last_mb
        # DeepSpeed's engine reduces ZeRO 0-1 gradients at the accumulation boundary, after autograd
        # returns (its default, without overlap_comm); hooks reduce them during the backward otherwise
        after = self.fw == "deepspeed" and self.layout.zero < 2
        reduce = self.layout.dp > 1 and self.layout.zero < 3 and sync_grads
        ahead = self._gather(io, step, AUTOGRAD) if self.layout.zero == 3 else None
        for idx in reversed(range(self.layers)):
            gathered, ahead = ahead, (self._gather(io, step, AUTOGRAD) if ahead and idx > 0 else None)
            self._layer_backward(io, step, chunk, idx, gathered)
            if reduce and not after and (chunk, idx) in self.buckets:
                self._reduce_bucket(io, step, AUTOGRAD, self.buckets[(chunk, idx)])
        if g == 0:
            self._kernels(io, step, AUTOGRAD, self.costs.embedding_backward(), "compute_backward")
        io.cpu(MAIN, 2_000.0, [io.g.tail[io.thread(AUTOGRAD)]])  # backward() returns
        if reduce and after:
            for (c, _idx), params in sorted(self.buckets.items(), key=lambda kv: -kv[0][1]):
                if c == chunk:
                    self._reduce_bucket(io, step, MAIN, params)
        if ds is not None:
            io.range_close(ds)

    def _reduce_bucket(self, io: RankIssuer, step: int, slot: int, params: float) -> None:
        """One gradient bucket's data-parallel reduction (ZeRO 0: all-reduce; 1-2: reduce-scatter)."""
        kind = "allreduce" if self.layout.zero == 0 else "reducescatter"
        nbytes = params * self.model.grad_bytes
        self._group_collective(io, step, slot, DP_STREAM, "dp", kind, self.groups.dp, nbytes, "dp_comm")

    def _layer_backward(self, io: RankIssuer, step: int, chunk: int, idx: int, gathered) -> None:
        fsdp = None
        if self.fw == "fsdp":
            fsdp = io.range_open(AUTOGRAD, FSDP_RANGES[2].format(self._module(chunk, idx)), kind="both")
        io.wait_event(AUTOGRAD, COMPUTE, gathered)
        if self.layout.recompute != "none":
            ops = self.fwd_ops if self.layout.recompute == "full" else self.costs.attention_core()
            self._kernels(io, step, AUTOGRAD, ops, "recompute", (self.temp, "recomputed activations"))
        end = self._kernels(io, step, AUTOGRAD, self.bwd_ops, "compute_backward")
        io.alloc(end, -self.act, "activations", "end")
        if self.temp:
            io.alloc(end, -self.temp, "recomputed activations", "end")
        if gathered is not None:
            io.alloc(end, -self.gathered, "gathered parameters", "end")
        if self.layout.zero == 3 and self.layout.dp > 1:
            nbytes = self.model.layer_params / self.layout.tp * self.model.grad_bytes
            self._group_collective(
                io, step, AUTOGRAD, DP_STREAM, "dp", "reducescatter", self.groups.dp, nbytes, "dp_comm"
            )
        if fsdp is not None:
            io.range_close(fsdp)

    def p2p(self, io: RankIssuer, step: int, call: str, sends: list, recvs: list) -> None:
        """One grouped send/recv call between neighbouring stages: one SendRecv kernel."""
        name = MEGATRON_P2P.format(call) if self.fw == "megatron" else None
        outer = io.range_open(MAIN, name) if name else None
        if sends:
            io.wait_stream(MAIN, PP_STREAM, COMPUTE)
        nbytes = self.costs.activation_message
        joins, peers = [], []
        for direction, transfers in (("send", sends), ("recv", recvs)):
            for kind, g, mb in transfers:
                src_chunk, dst_chunk = (g, g + 1) if kind == "F" else (g, g - 1)
                src = self._stage_rank(src_chunk % self.layout.pp)
                dst = self._stage_rank(dst_chunk % self.layout.pp)
                key = (step, "pp", kind, g, mb, self.tp_rank, self.dp_rank)
                joins.append((key, self.costs.p2p(src, dst, nbytes), "pp_comm"))
                peers.append((direction, dst if direction == "send" else src, nbytes))
                if direction == "recv":
                    self.received[(kind, g, mb)] = True
        comm = {
            "role": "pp",
            "collective": "sendrecv",
            "group": list(self.groups.pp),
            "bytes": int(nbytes * len(peers)),
            "peers": peers,
        }
        io.collective(MAIN, PP_STREAM, "sendrecv", joins, "pp_comm", comm)
        if outer is not None:
            io.range_close(outer)

    def _stage_rank(self, stage: int) -> int:
        return self.layout.rank_of(self.tp_rank, self.dp_rank, stage)

    # -- after the passes ----------------------------------------------------------------------
    def finish(self, io: RankIssuer, step: int) -> None:
        """Finish the gradient reduction, reduce the norm, step the optimizer, gather parameters."""
        lay, model = self.layout, self.model
        io.wait_stream(MAIN, COMPUTE, DP_STREAM)
        if lay.pp > 1 and self.stage in (0, lay.pp - 1):
            nbytes = model.vocab * model.hidden / lay.tp * model.grad_bytes
            self._group_collective(
                io, step, MAIN, MP_STREAM, "embedding", "allreduce", self.groups.embedding, nbytes, "other_comm"
            )
            io.wait_stream(MAIN, COMPUTE, MP_STREAM)
        shard = self.params / (lay.dp if lay.zero >= 1 else 1)
        opt = None
        if self.fw == "deepspeed":
            opt = io.range_open(MAIN, DEEPSPEED["optimizer"][lay.zero])
        else:
            opt = io.range_open(MAIN, TORCH_OPTIMIZER, kind="user_annotation")
        io.kernel(MAIN, COMPUTE, "grad_norm", self.costs.grad_norm(shard), "optimizer")
        norm_group = self.groups.mp if lay.zero == 0 else tuple(range(lay.world))  # sharded: over all ranks
        if len(norm_group) > 1:
            self._group_collective(io, step, MAIN, MP_STREAM, "mp", "allreduce_f32", norm_group, 4, "other_comm")
            io.wait_stream(MAIN, COMPUTE, MP_STREAM)
        io.copy_to_host(MAIN, COMPUTE, 4)
        for _ in range(ADAM_CHUNKS):
            io.kernel(MAIN, COMPUTE, "adam", self.costs.optimizer_step(shard / ADAM_CHUNKS), "optimizer")
        if opt is not None:
            io.range_close(opt)
        if lay.zero in (1, 2) and lay.dp > 1:
            for _bucket, params in sorted(self.buckets.items(), reverse=True):
                self._group_collective(
                    io, step, MAIN, DP_STREAM, "dp", "allgather", self.groups.dp, params * model.param_bytes, "dp_comm"
                )
            io.wait_stream(MAIN, COMPUTE, DP_STREAM)


def _phase(actions: list, index: int) -> str:
    """warmup / steady / cooldown of an action of an interleaved schedule (Megatron's NVTX ranges):
    the steady part starts with the forward just before the first backward and ends with the
    backward after the last forward."""
    first_bwd = next(i for i, a in enumerate(actions) if a[0] == "bwd")
    steady_from = max(i for i in range(first_bwd) if actions[i][0] == "fwd")
    last_fwd = max(i for i, a in enumerate(actions) if a[0] == "fwd")
    steady_to = next((i for i in range(last_fwd + 1, len(actions)) if actions[i][0] == "bwd"), last_fwd)
    if index < steady_from:
        return "warmup"
    return "steady" if index <= steady_to + 1 else "cooldown"
