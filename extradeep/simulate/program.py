"""The training loop the simulated ranks execute: epochs, steps, marks, and the op order per step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from extradeep.simulate.catalogue import PARAM_BYTES, OpSpec
from extradeep.simulate.engine import Engine
from extradeep.simulate.gradients import FLOAT_BYTES, GradientPlan

COMPUTE, NCCL, COPY = 7, 13, 14
NCCL_DOMAIN, MPI_DOMAIN = 1, 2
MARKS = ("ranges", "marks", "profiler")
RANGE_CATEGORIES = {"epoch": 1, "training_step": 2, "testing_step": 3}
MARK_CATEGORIES = {"epoch": 1, "training step": 2, "testing step": 3}


@dataclass(frozen=True)
class LoopConfig:
    """What one simulated training run does."""

    epochs: int = 2
    train_steps: int = 5
    val_steps: int = 2
    marks: str = "ranges"
    ddp: bool = False
    warmup_factor: float = 1.3
    host_sync: bool = False  # the loop waits for the GPU before the optimizer (clipping, logging)
    activation_bytes: float = 0.0  # > 0: record GPU memory (weights and optimizer state + these activations)


def interleave(indexes: list[int], visits: list[int]) -> list[int]:
    """Round-robin over ops by remaining instances: conv, bn, relu, conv, bn, relu, ..."""
    left, order = list(visits), []
    while any(left):
        for k, idx in enumerate(indexes):
            if left[k]:
                order.append(idx)
                left[k] -= 1
    return order


class TrainingProgram:
    """Issues the calls of every step of a run through an Engine, in program order."""

    def __init__(
        self,
        engine: Engine,
        ops: list[OpSpec],
        durations_ns: np.ndarray,
        nbytes: np.ndarray,
        cfg: LoopConfig,
        plan: GradientPlan | None = None,
    ):
        self.e, self.ops, self.dur, self.nbytes, self.cfg = engine, ops, durations_ns, nbytes, cfg
        self.plan = plan  # DDP with explicit gradients and bucket layout (None: equal buckets)
        self.order = {}
        for block in ("forward", "backward", "optimizer", "warmup"):
            idx = [i for i, op in enumerate(ops) if op.block == block and op.category == "computation"]
            self.order[block] = interleave(idx, [ops[i].visits for i in idx])
        self.index = {(op.block, op.name): i for i, op in enumerate(ops)}
        self.profiler_step = 0
        self.windows: list[tuple] = []  # (epoch, phase, step, start, end) per step, arrays over ranks

    def op(self, block: str, name: str) -> int:
        return self.index[(block, name)]

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> None:
        e, cfg = self.e, self.cfg
        e.rec.nvtx.append(["NCCL", e.cpu.copy(), None, 75, None, NCCL_DOMAIN, None, None])
        e.rec.nvtx.append(["MPI", e.cpu.copy(), None, 75, None, MPI_DOMAIN, None, None])
        categories = {"ranges": RANGE_CATEGORIES, "marks": MARK_CATEGORIES}.get(cfg.marks, {})
        for name, cid in categories.items():
            e.rec.nvtx.append([name, e.cpu.copy(), None, 33, cid, 0, None, None])
        e.cpu_work(2e6)  # model set-up before the first epoch
        for epoch in range(cfg.epochs):
            self.epoch(epoch)

    def epoch(self, epoch: int) -> None:
        e, cfg = self.e, self.cfg
        e.warmup = cfg.warmup_factor if epoch == 0 and cfg.epochs > 1 else 1.0  # one epoch: no warm-up
        e.tag = (epoch, "between", -1)
        e.mpi("MPI_Barrier", 2e4, 0)
        handle = self.open("epoch", epoch)
        for step in range(cfg.train_steps):
            self.train_step(epoch, step)
        outer = e.push("validation") if cfg.marks == "profiler" else None
        for step in range(cfg.val_steps):
            self.val_step(epoch, step)
        if outer is not None:
            e.pop(outer)
        self.close("epoch", epoch, handle)
        e.tag = (epoch, "between", -1)
        e.mpi("MPI_Allreduce", 1.5e4, 8)

    # -- marks -------------------------------------------------------------------------------
    def open(self, kind: str, index: int):
        e, marks = self.e, self.cfg.marks
        if marks == "ranges":
            text = {"epoch": f"epoch {index}", "train": f"train step {index}", "val": f"test step {index}"}[kind]
            cat = {"epoch": "epoch", "train": "training_step", "val": "testing_step"}[kind]
            return e.push(text, RANGE_CATEGORIES[cat])
        if marks == "marks":
            noun = "epoch" if kind == "epoch" else "step"
            cat = {"epoch": "epoch", "train": "training step", "val": "testing step"}[kind]
            e.mark(f"{noun}:{index},type:started", MARK_CATEGORIES[cat])
            return None
        if kind == "epoch":
            return None
        handle = e.push(f"ProfilerStep#{self.profiler_step}")
        self.profiler_step += 1
        return handle

    def close(self, kind: str, index: int, handle) -> None:
        if self.cfg.marks == "marks":
            noun = "epoch" if kind == "epoch" else "step"
            cat = {"epoch": "epoch", "train": "training step", "val": "testing step"}[kind]
            self.e.mark(f"{noun}:{index},type:ended", MARK_CATEGORIES[cat])
        elif handle is not None:
            self.e.pop(handle)

    # -- steps -------------------------------------------------------------------------------
    def load_batch(self) -> None:
        """Data-loading gap (the loader thread reads while the main thread waits), then HtoD."""
        e, ddp = self.e, self.cfg.ddp
        gap = 3e6 if ddp else 3e5
        e.rec.osrt.append(("read", e.cpu.copy(), e.cpu + 0.8 * gap, 1))
        e.osrt("pthread_cond_wait" if ddp else "poll", gap, skewed=ddp)
        htod = self.op("data", "[CUDA memcpy HtoD]")
        if ddp:  # pinned-memory copy on a side stream; compute waits for it through an event
            e.launch(htod, COPY, self.dur[htod], api="cudaMemcpyAsync_v3020", api_ns=8e3, skewed=False)
            e.wait_event(COMPUTE, e.record_event(COPY))
        else:
            e.launch(htod, COMPUTE, self.dur[htod], api="cudaMemcpyAsync_v3020", api_ns=8e3, skewed=False)

    def compute(self, idx: int, overhead_ns: float = 1.2e4) -> None:
        e, op = self.e, self.ops[idx]
        e.cpu_work(overhead_ns)  # framework dispatch before the launch
        start = e.cpu
        e.launch(idx, COMPUTE, self.dur[idx])
        if op.library:
            e.library_call(op.library[0], op.library[1], start)

    def allreduce(self, idx: int, name: str = "ncclAllReduce", bucket: int | None = None) -> None:
        """Hand a finished gradient bucket to NCCL: event record -> stream wait -> collective."""
        e = self.e
        nbytes, dur = int(self.nbytes[idx]), self.dur[idx]
        if bucket is not None:
            nbytes, dur = int(self.plan.bucket_bytes[bucket]), self.plan.bucket_ns[bucket]
        e.wait_event(NCCL, e.record_event(COMPUTE))
        handle = e.push(name, domain=NCCL_DOMAIN, payload=nbytes)
        e.collective(idx, NCCL, dur, nbytes=nbytes)
        e.pop(handle)

    def train_step(self, epoch: int, step: int) -> None:
        e, cfg = self.e, self.cfg
        e.tag = (epoch, "train", step)
        begin = e.cpu
        handle = self.open("train", step)
        self.load_batch()
        if epoch == 0 and step == 0 and cfg.epochs > 1:
            for idx in self.order["warmup"]:  # cuDNN autotuning tries algorithms once
                self.compute(idx)
        zero = self.op("zero_grad", "[CUDA memset]")
        e.launch(zero, COMPUTE, self.dur[zero], api="cudaMemsetAsync_v3020", api_ns=6e3, skewed=False)
        bcast = self.op("forward", "ncclDevKernel_Broadcast_RING_LL")
        handle_b = e.push("ncclBroadcast", domain=NCCL_DOMAIN, payload=int(self.nbytes[bcast]))
        e.collective(bcast, NCCL, self.dur[bcast])
        e.pop(handle_b)
        e.wait_event(COMPUTE, e.record_event(NCCL))
        for idx in self.order["forward"]:
            self.compute(idx)
        self.allocated(cfg.activation_bytes)  # the forward's activations, held until the backward
        self.backward()
        self.allocated(0.0)
        gather = self.op("optimizer", "ncclDevKernel_AllGather_RING_LL")
        self.allreduce(gather, "ncclAllGather")
        e.wait_event(COMPUTE, e.record_event(NCCL))
        if cfg.host_sync:  # e.g. clip_grad_norm_ or loss.item() before optimizer.step()
            e.stream_sync(COMPUTE)
        for idx in self.order["optimizer"]:
            self.compute(idx, 4e3 if self.ops[idx].visits > 20 else 1.2e4)
        e.stream_sync(COMPUTE)
        self.close("train", step, handle)
        self.windows.append((epoch, "train", step, begin, e.cpu))
        e.tag = (epoch, "between", -1)
        e.cpu_work(2e4)
        e.launch(self.op("between", "reduce_kernel"), COMPUTE, self.dur[self.op("between", "reduce_kernel")])
        dtoh = self.op("between", "[CUDA memcpy DtoH]")
        e.memcpy_blocking(dtoh, COMPUTE, self.dur[dtoh])

    def backward(self) -> None:
        if self.plan is not None:
            self.layered_backward()
            return
        order = self.order["backward"]
        bucket = self.op("bucket", "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
        n = self.ops[bucket].visits
        cuts = {int(round(len(order) * (k + 1) / n)) for k in range(n)}
        for pos, idx in enumerate(order, start=1):
            self.compute(idx)
            if pos in cuts:
                self.allreduce(bucket)

    def allocated(self, activations: float) -> None:
        """A GPU memory record (PyTorch's profile_memory): weights, gradients and two optimizer
        moments (16 bytes per float32 parameter) plus the activations held now."""
        if self.cfg.activation_bytes > 0:
            self.e.rec.memory.append((self.e.cpu.copy(), 4.0 * PARAM_BYTES + activations))

    def layered_backward(self) -> None:
        """One layer per gradient: its kernels, its AccumulateGrad (the DDP hook), and the bucket's
        all-reduce when the layer completes one. Layer 0 is the classifier (softmax and GEMM
        backward), the last layer also runs the stem's kernels (max-pool backward, ...)."""
        e, plan = self.e, self.plan
        bucket = self.op("bucket", "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
        per_layer = [i for i, op in enumerate(self.ops) if op.block == "backward" and op.visits > 1]
        single = [i for i, op in enumerate(self.ops) if op.block == "backward" and op.visits == 1]
        first = [i for i in single if "SoftMax" in self.ops[i].name or "gemm" in self.ops[i].name]
        stem = [i for i in single if i not in first]
        closes = plan.last_of_bucket()
        for g, size in enumerate(plan.sizes):
            kernels = first if g == 0 else (stem if g == len(plan.sizes) - 1 else []) + per_layer
            for idx in kernels:
                self.compute(idx)
            start = e.cpu
            e.cpu_work(3e3)  # AccumulateGrad and DDP's autograd hook
            e.rec.autograd.append(("torch::autograd::AccumulateGrad", start, e.cpu, [[int(size) // FLOAT_BYTES]]))
            if g in closes:
                self.allreduce(bucket, bucket=closes[g])

    def val_step(self, epoch: int, step: int) -> None:
        e = self.e
        e.tag = (epoch, "val", step)
        begin = e.cpu
        handle = self.open("val", step)
        self.load_batch()
        for idx in self.order["forward"]:
            self.compute(idx)
        e.stream_sync(COMPUTE)
        self.close("val", step, handle)
        self.windows.append((epoch, "val", step, begin, e.cpu))
