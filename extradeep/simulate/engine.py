"""Causal scheduling of one run (all ranks of one point and repetition), vectorised over ranks.

The CPU thread of each rank issues calls in program order; a GPU operation starts at the latest of
its launch (+ latency), its stream becoming free and the CUDA events its stream waits for; a
collective ends when the slowest rank is ready plus its pure duration; a stream synchronize blocks
the CPU until the stream drains. Times are float nanoseconds on a session clock shared by all
ranks; every record keeps one value per rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LAUNCH_LATENCY_NS = 2_500.0
WAKE_NS = 1_500.0  # CPU wake-up after a blocking call returns


@dataclass
class Records:
    """Columnar event lists; array entries have one value per rank."""

    runtime: list = field(default_factory=list)  # (name, start, end, corr)
    gpu: list = field(default_factory=list)  # (op index, stream, start, end, corr, tag)
    nvtx: list = field(default_factory=list)  # [text, start, end, eventType, category, domain, tid, payload]
    sync: list = field(default_factory=list)  # (syncType, stream, start, end, corr, eventId, eventSyncId)
    cuda_event: list = field(default_factory=list)  # (stream, corr, eventId, eventSyncId, time)
    library: list = field(default_factory=list)  # (library, name, start, end)
    osrt: list = field(default_factory=list)  # (name, start, end, thread)
    mpi: list = field(default_factory=list)  # (name, start, end, size)
    autograd: list = field(default_factory=list)  # (name, start, end, input dims): AccumulateGrad ranges
    coll_bytes: dict = field(default_factory=dict)  # correlation id -> message bytes of one collective
    memory: list = field(default_factory=list)  # (time, bytes allocated on the GPU): profile_memory events


class Engine:
    """Clock state of all ranks of one run and the primitives the training program calls."""

    def __init__(
        self,
        n_ranks: int,
        rng: np.random.Generator,
        noise: tuple,
        t0: float,
        rank_skew: np.ndarray | None = None,
        cpu_scale: float = 1.0,
    ):
        self.n = n_ranks
        self.rng = rng
        self.sigma_instance, sigma_rank, sigma_rep = noise
        self.rank_factor = np.exp(sigma_rank * rng.standard_normal(n_ranks)) * np.exp(sigma_rep * rng.standard_normal())
        self.skew = np.ones(n_ranks) if rank_skew is None else rank_skew
        self.cpu_scale = cpu_scale  # what-if factor on CPU overheads (dispatch and API calls)
        self.cpu = np.full(n_ranks, float(t0))
        self.free: dict[int, np.ndarray] = {}
        self.corr = 0
        self.event_id = 0
        self.tag = None  # (epoch, phase, step) of the GPU work being issued
        self.warmup = 1.0
        self.rec = Records()

    # -- helpers ---------------------------------------------------------------------------
    def noise(self, skewed: bool = False) -> np.ndarray:
        """Multiplicative factor per rank: instance x rank x repetition noise (x imbalance)."""
        draw = np.exp(self.sigma_instance * self.rng.standard_normal(self.n)) * self.rank_factor
        return draw * self.skew if skewed else draw

    def stream(self, sid: int) -> np.ndarray:
        return self.free.setdefault(sid, self.cpu.copy())

    def next_corr(self) -> int:
        self.corr += 1
        return self.corr

    # -- CPU side --------------------------------------------------------------------------
    def cpu_work(self, ns: float, skewed: bool = False) -> None:
        self.cpu = self.cpu + ns * self.cpu_scale * self.noise(skewed)

    def api(self, name: str, ns: float) -> tuple[np.ndarray, np.ndarray, int]:
        start = self.cpu
        end = start + ns * self.cpu_scale * self.noise()
        corr = self.next_corr()
        self.rec.runtime.append((name, start, end, corr))
        self.cpu = end
        return start, end, corr

    def osrt(self, name: str, ns: float, thread: int = 0, skewed: bool = False) -> None:
        start = self.cpu
        self.cpu = self.cpu + ns * self.noise(skewed)  # waiting, not CPU overhead: no cpu_scale
        self.rec.osrt.append((name, start, self.cpu, thread))

    def library_call(self, library: str, name: str, start: np.ndarray) -> None:
        self.cpu = self.cpu + 400.0 * self.noise()
        self.rec.library.append((library, name, start, self.cpu))

    def push(self, text: str, category: int | None = None, domain: int = 0, payload: int | None = None) -> list:
        """NVTX push; payload goes to uint64Value (NCCL ranges carry their message size)."""
        row = [text, self.cpu, None, 59, category, domain, None, payload]
        self.rec.nvtx.append(row)
        return row

    def pop(self, row: list) -> None:
        row[2] = self.cpu

    def mark(self, text: str, category: int | None = None) -> None:
        self.rec.nvtx.append([text, self.cpu, None, 34, category, 0, None, None])

    def mpi(self, name: str, ns: float, size: int) -> None:
        start = self.cpu
        end = start.max() + ns * self.noise()  # a collective returns after the slowest rank arrives
        self.rec.mpi.append((name, start, end, size))
        self.cpu = end

    # -- GPU side --------------------------------------------------------------------------
    def launch(
        self,
        op: int,
        sid: int,
        dur_ns: float,
        api: str = "cudaLaunchKernel_v7000",
        api_ns: float = 5_000.0,
        skewed: bool = True,
    ) -> np.ndarray:
        start, _, corr = self.api(api, api_ns)
        ready = np.maximum(start + LAUNCH_LATENCY_NS, self.stream(sid))
        end = ready + dur_ns * self.warmup * self.noise(skewed)
        self.free[sid] = end
        self.rec.gpu.append((op, sid, ready, end, corr, self.tag))
        return end

    def collective(
        self, op: int, sid: int, pure_ns: float, api: str = "cudaLaunchKernelExC_v11060", nbytes: int | None = None
    ) -> None:
        start, _, corr = self.api(api, 6_000.0)
        if nbytes is not None:
            self.rec.coll_bytes[corr] = int(nbytes)
        ready = np.maximum(start + LAUNCH_LATENCY_NS, self.stream(sid))
        # all ranks leave together: the slowest rank's arrival plus the pure transfer time
        end = ready.max() + pure_ns * self.warmup * float(np.exp(self.sigma_instance * self.rng.standard_normal()))
        self.free[sid] = np.full(self.n, end)
        self.rec.gpu.append((op, sid, ready, self.free[sid], corr, self.tag))

    def record_event(self, sid: int) -> tuple[int, np.ndarray]:
        _, _, corr = self.api("cudaEventRecord_v3020", 2_500.0)
        self.event_id += 1
        done = self.stream(sid).copy()
        self.rec.cuda_event.append((sid, corr, self.event_id, self.event_id, done))
        return self.event_id, done

    def wait_event(self, sid: int, event: tuple[int, np.ndarray]) -> None:
        start, end, corr = self.api("cudaStreamWaitEvent_v3020", 2_000.0)
        event_id, done = event
        self.free[sid] = np.maximum(self.stream(sid), done)
        self.rec.sync.append((2, sid, start, end, corr, event_id, event_id))

    def stream_sync(self, sid: int) -> None:
        start = self.cpu
        corr = self.next_corr()
        end = np.maximum(start + 1_000.0, self.stream(sid) + WAKE_NS)
        self.rec.runtime.append(("cudaStreamSynchronize_v3020", start, end, corr))
        self.rec.sync.append((3, sid, start, end, corr, 4294967295, 0))
        self.cpu = end

    def memcpy_blocking(self, op: int, sid: int, dur_ns: float) -> None:
        """cudaMemcpy DtoH: returns to the CPU only after the copy is done."""
        start = self.cpu
        corr = self.next_corr()
        ready = np.maximum(start + LAUNCH_LATENCY_NS, self.stream(sid))
        gend = ready + dur_ns * self.noise()
        self.free[sid] = gend
        self.cpu = gend + WAKE_NS
        self.rec.runtime.append(("cudaMemcpy_v3020", start, self.cpu, corr))
        self.rec.gpu.append((op, sid, ready, gend, corr, self.tag))
