"""How one simulated rank issues work: CPU calls on its threads, kernels on its streams, events,
collectives and transfers, with the records the writers turn into profiles.

A kernel launch is a CPU node (framework dispatch plus the CUDA runtime call) and a GPU node that
starts no earlier than the call plus the launch latency. A stream waits for another through an
event (cudaEventRecord on one, cudaStreamWaitEvent on the other), as PyTorch hands work between
the compute stream and each process group's NCCL stream. Every record keeps graph node ids; times
are read after the graph is solved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from extradeep.simulate.engine import LAUNCH_LATENCY_NS, WAKE_NS
from extradeep.simulate.gpt.dag import Graph

COMPUTE, TP_STREAM, DP_STREAM, PP_STREAM, MP_STREAM = 7, 13, 17, 21, 25
MAIN, AUTOGRAD = 0, 1  # thread slots: the Python main thread and the autograd engine's device thread
DISPATCH_NS = 8_000.0  # framework work before a kernel launch
LAUNCH_API_NS = 4_500.0
NCCL_DISPATCH_NS = 14_000.0
NCCL_API_NS = 6_000.0
EVENT_API_NS = 2_000.0


@dataclass
class Records:
    """What a run did, per kind, as tuples of graph node ids and attributes."""

    # (rank, stream, kind, key, part, start node, end node, corr, thread, comm dict | None, nbytes)
    gpu: list = field(default_factory=list)
    # (rank, thread, api name, node, corr, api ns): the call is the last `api ns` of its node
    runtime: list = field(default_factory=list)
    # (rank, thread, text, domain, start node, end node, payload dict | None, annotation kind)
    ranges: list = field(default_factory=list)
    # (rank, node, at ("start" | "end"), delta bytes, label)
    memory: list = field(default_factory=list)
    # (rank, sync type, stream, api node, corr, event id, record corr, record stream)
    syncs: list = field(default_factory=list)
    # (rank, step, start node, end node) of every training step's range
    steps: list = field(default_factory=list)


class RankIssuer:
    """Issues one rank's operations into the shared graph; `noise()` draws its duration factors."""

    def __init__(self, graph: Graph, records: Records, rank: int, rng: np.random.Generator, sigma: float, factor):
        self.g, self.rec, self.rank = graph, records, rank
        self.rng, self.sigma, self.factor = rng, sigma, factor
        self.corr = 0
        self.event = 0
        self.scale = 1.0  # warm-up slow-down of GPU work
        self.waits: dict[int, list] = {}  # stream -> nodes its next operation waits for
        self.last: dict[int, int] = {}  # stream -> end node of its last operation
        self.last_corr: dict[int, int] = {}

    # -- helpers ---------------------------------------------------------------------------
    def noise(self) -> float:
        return float(np.exp(self.sigma * self.rng.standard_normal())) * self.factor if self.sigma else self.factor

    def _corr(self) -> int:
        self.corr += 1
        return self.corr

    def thread(self, slot: int):
        return (self.rank, "cpu", slot)

    def stream(self, sid: int):
        return (self.rank, "gpu", sid)

    # -- CPU --------------------------------------------------------------------------------
    def cpu(self, slot: int, ns: float, deps=(), part: str = "cpu") -> int:
        return self.g.op(self.thread(slot), ns * self.noise(), deps, part)

    def api(self, slot: int, name: str, ns: float, deps=(), before: float = 0.0) -> tuple[int, int]:
        """A CUDA runtime call after `before` ns of framework work on the same thread (one node):
        (node, correlation id)."""
        f = self.noise()
        node = self.g.op(self.thread(slot), (before + ns) * f, deps, "cpu")
        corr = self._corr()
        self.rec.runtime.append((self.rank, slot, name, node, corr, ns * f))
        return node, corr

    def range_open(self, slot: int, text: str, domain: str = "", payload=None, kind: str = "nvtx") -> list:
        """An NVTX range (or Kineto annotation) opened now on a thread; close it with range_close."""
        node = self.g.node(0.0, [self.g.tail.get(self.thread(slot))], "cpu")
        self.g.tail[self.thread(slot)] = node
        row = [self.rank, slot, text, domain, node, None, payload, kind]
        self.rec.ranges.append(row)
        return row

    def range_close(self, row: list) -> None:
        slot = row[1]
        node = self.g.node(0.0, [self.g.tail.get(self.thread(slot))], "cpu")
        self.g.tail[self.thread(slot)] = node
        row[5] = node

    # -- GPU --------------------------------------------------------------------------------
    def kernel(self, slot: int, sid: int, key: str, ns: float, part: str, kind: str = "kernel", nbytes: int = 0):
        """Launch a kernel (or memset) from a thread onto a stream; returns its end node."""
        api = "cudaLaunchKernel" if kind == "kernel" else "cudaMemsetAsync"
        launch, corr = self.api(slot, api, LAUNCH_API_NS, before=DISPATCH_NS)
        deps = [(launch, LAUNCH_LATENCY_NS), *self.waits.pop(sid, [])]
        node = self.g.op(self.stream(sid), ns * self.scale * self.noise(), deps, part)
        self.rec.gpu.append((self.rank, sid, kind, key, part, node, node, corr, slot, None, nbytes))
        self.last[sid], self.last_corr[sid] = node, corr
        return node

    def collective(self, slot: int, sid: int, key: str, joins: list, part: str, comm: dict) -> int:
        """Launch an NCCL kernel taking part in `joins` [(join key, pure ns, part)]: its end node."""
        launch, corr = self.api(slot, "cudaLaunchKernelExC", NCCL_API_NS, before=NCCL_DISPATCH_NS)
        deps = [(launch, LAUNCH_LATENCY_NS), *self.waits.pop(sid, [])]
        noisy = [(k, ns * self.scale * self.noise(), p) for k, ns, p in joins]
        arrive, end = self.g.comm(self.stream(sid), noisy, deps, part)
        comm = {**comm, "joins": [self.g.joins[k] for k, _, _ in joins]}
        self.rec.gpu.append((self.rank, sid, "kernel", key, part, arrive, end, corr, slot, comm, comm.get("bytes", 0)))
        self.last[sid], self.last_corr[sid] = end, corr
        return end

    def record_event(self, slot: int, producer: int) -> tuple | None:
        """cudaEventRecord on a stream: (event id, the stream's last node, record corr, stream)."""
        done = self.last.get(producer)
        if done is None:
            return None
        _, record_corr = self.api(slot, "cudaEventRecord", EVENT_API_NS)
        self.event += 1
        return self.event, done, record_corr, producer

    def wait_event(self, slot: int, waiter: int, event: tuple | None) -> None:
        """cudaStreamWaitEvent: the waiter's next operation starts after the recorded work."""
        if event is None:
            return
        event_id, done, record_corr, producer = event
        node, corr = self.api(slot, "cudaStreamWaitEvent", EVENT_API_NS)
        self.waits.setdefault(waiter, []).append(done)
        self.rec.syncs.append((self.rank, 2, waiter, node, corr, event_id, record_corr, producer))

    def wait_stream(self, slot: int, waiter: int, producer: int) -> None:
        """The waiter's next operation starts after the producer's last one (record, then wait)."""
        self.wait_event(slot, waiter, self.record_event(slot, producer))

    def synchronize(self, slot: int, sid: int) -> None:
        """cudaStreamSynchronize: the thread blocks until the stream's last operation ends."""
        done = self.last.get(sid)
        node, corr = self.api(slot, "cudaStreamSynchronize", 1_000.0, [(done, WAKE_NS)] if done is not None else [])
        self.rec.syncs.append((self.rank, 3, sid, node, corr, 0, -1, -1))

    def copy_to_host(self, slot: int, sid: int, nbytes: int) -> None:
        """A blocking cudaMemcpy DtoH of a scalar (`.item()`): waits for the stream, then copies."""
        launch, corr = self.api(slot, "cudaMemcpyAsync", 5_000.0, before=DISPATCH_NS)
        node = self.g.op(self.stream(sid), 2_000.0 * self.noise(), [(launch, LAUNCH_LATENCY_NS)], "other")
        self.rec.gpu.append(
            (self.rank, sid, "memcpy", "[CUDA memcpy DtoH]", "other", node, node, corr, slot, None, nbytes)
        )
        self.last[sid] = node
        self.synchronize(slot, sid)

    def alloc(self, node: int, delta: float, label: str, at: str = "start") -> None:
        self.rec.memory.append((self.rank, node, at, float(delta), label))
