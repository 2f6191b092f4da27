"""Write one rank's share of the simulated records as an Nsight Systems SQLite export."""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from extradeep.simulate.catalogue import OpSpec
from extradeep.simulate.engine import Records
from extradeep.simulate.program import COMPUTE, MPI_DOMAIN
from extradeep.simulate.schema import ExportWriter, Layout, StringTable

VM = 1 << 48
SESSION_UTC_NS = 1_779_782_330_000_000_000  # fixed session start, so files are reproducible
GPU_NAME = "NVIDIA A100-SXM4-40GB"
THREAD_NAMES = ("python3", "pt_data_worker", "NCCL proxy")
LIBRARY_CLASS = {"cudnn": 28, "cublas": 29}
# record fields holding timestamps, per subset (shifted by a rank's clock offset)
TIME_FIELDS = {
    "runtime": (1, 2),
    "kernel": (2, 3),
    "memcpy": (2, 3),
    "memset": (2, 3),
    "sync": (2, 3),
    "cuda_event": (4,),
    "mpi": (1, 2),
    "osrt": (1, 2),
    "cudnn": (2, 3),
    "cublas": (2, 3),
}


def global_pid(pid: int) -> int:
    return VM | (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | tid


# Which node signals the exports carry (docs/profiling.md, "Where the node layout comes from"), as
# real exports of different versions and set-ups do.
SIGNALS = {
    "all": "host name, the node's GPU UUIDs, the export host (nsys 2023.3+ as exported on the node)",
    "hostname": "the host name only (TARGET_INFO_SYSTEM_ENV); each rank lists only its own GPU",
    "uuids": "the node's GPU UUID sets and EXPORT_HOST, no TARGET_INFO_SYSTEM_ENV",
    "export-host": "EXPORT_HOST only: no TARGET_INFO_SYSTEM_ENV, each rank lists only its own GPU",
    "containers": "one container per rank: its own host name and export host, the node's GPU UUIDs",
    "elsewhere": "the node's GPU UUID sets, no TARGET_INFO_SYSTEM_ENV, every report exported on one login node",
}
LOGIN_HOST = "login01"


@dataclass(frozen=True)
class Placement:
    """Where each rank runs: ranks fill nodes of ``gpus_per_node`` GPUs in order. ``signals``
    (:data:`SIGNALS`) says which node signals each export carries."""

    gpus_per_node: int
    signals: str = "all"

    def node(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def host(self, rank: int) -> str:
        return f"gpu-node{self.node(rank):03d}"

    def container(self, rank: int) -> str:
        """A container id as Docker names its hostname (12 hex digits), one per rank."""
        return f"{0x5EED0000 + 7919 * rank:012x}"

    def local(self, rank: int) -> int:
        return rank % self.gpus_per_node

    def node_uuids(self, rank: int) -> list[str]:
        node = self.node(rank)
        return [f"{node:08x}-5e1f-4a11-8d00-{local:012x}" for local in range(self.gpus_per_node)]

    @property
    def lists_node(self) -> bool:
        """Whether an export lists all of its node's GPUs (else only the rank's own)."""
        return self.signals in ("all", "uuids", "containers", "elsewhere")

    def uuids(self, rank: int) -> list[str]:
        """The GPUs the rank's export lists."""
        return self.node_uuids(rank) if self.lists_node else [self.node_uuids(rank)[self.local(rank)]]

    def device(self, rank: int) -> int:
        """The device id of the rank's GPU among those its export lists."""
        return self.local(rank) if self.lists_node else 0

    def hostname(self, rank: int) -> str | None:
        """TARGET_INFO_SYSTEM_ENV's host name (None: the export has no such table)."""
        return {"all": self.host(rank), "hostname": self.host(rank), "containers": self.container(rank)}.get(
            self.signals
        )

    def export_host(self, rank: int) -> str | None:
        return {"hostname": None, "containers": self.container(rank), "elsewhere": LOGIN_HOST}.get(
            self.signals, self.host(rank)
        )


DEFAULT_UUID = "00000000-0000-0000-0000-0000000000a1"


def new_export(path: Path, layout: Layout) -> tuple[sqlite3.Connection, ExportWriter]:
    """Open a fresh file (small pages keep many near-empty tables cheap) with the ENUM tables."""
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 512")
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    writer = ExportWriter(conn, layout)
    writer.write_enums()
    return conn, writer


def write_metadata(
    w: ExportWriter,
    strings: StringTable,
    path: Path,
    pid: int,
    threads: dict,
    streams,
    span,
    placement: Placement | None = None,
    rank: int = 0,
) -> None:
    """Process/thread/GPU/session tables every real export carries; threads maps tid -> name.
    Without a placement each rank has its own host with one GPU."""
    uuids = [DEFAULT_UUID] if placement is None else placement.uuids(rank)
    host = f"node{pid % 1000:03d}" if placement is None else placement.hostname(rank)
    export_host = None if placement is None else placement.export_host(rank)
    device = 0 if placement is None else placement.device(rank)
    gpid = global_pid(pid)
    start, stop = span
    when = dt.datetime.fromtimestamp(SESSION_UTC_NS / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    w.insert(
        "ThreadNames",
        len(threads),
        nameId=strings.many(threads.values()),
        priority=20,
        globalTid=[global_tid(pid, tid) for tid in threads],
    )
    w.insert("PROCESSES", 1, globalPid=gpid, pid=pid, name="python3")
    n_gpus = len(uuids)
    w.insert(
        "TARGET_INFO_GPU",
        n_gpus,
        vmId=VM,
        id=list(range(n_gpus)),
        name=GPU_NAME,
        busLocation=[f"0000:{7 + 16 * k:02x}:00.0" for k in range(n_gpus)],
        isDiscrete=1,
        l2CacheSize=41943040,
        totalMemory=42505273344,
        memoryBandwidth=1555200000000,
        clockRate=1410000000,
        smCount=108,
        pwGpuId=list(range(n_gpus)),
        uuid=uuids,
        luid=0,
        chipName="GA100",
        cuDevice=list(range(n_gpus)),
        ctxswDevPath="",
        ctrlDevPath="",
        revision=161,
        nodeMask=0,
        constantMemory=65536,
        maxIPC=4,
        maxRegistersPerBlock=65536,
        maxShmemPerBlock=49152,
        maxShmemPerBlockOptin=166912,
        maxShmemPerSm=167936,
        maxRegistersPerSm=65536,
        threadsPerWarp=32,
        asyncEngines=3,
        maxWarpsPerSm=64,
        maxBlocksPerSm=32,
        maxThreadsPerBlock=1024,
        maxBlockDimX=1024,
        maxBlockDimY=1024,
        maxBlockDimZ=64,
        maxGridDimX=2147483647,
        maxGridDimY=65535,
        maxGridDimZ=65535,
        computeMajor=8,
        computeMinor=0,
        smMajor=8,
        smMinor=0,
    )
    w.insert("TARGET_INFO_CUDA_DEVICE", 1, gpuId=device, cudaId=device, pid=pid, numMultiprocessors=108)
    w.insert(
        "TARGET_INFO_CUDA_CONTEXT_INFO",
        1,
        nullStreamId=COMPUTE,
        hwId=device,
        vmId=1,
        processId=pid,
        deviceId=device,
        contextId=1,
        parentContextId=0,
        isGreenContext=0,
        numMultiprocessors=0,
    )
    w.insert(
        "TARGET_INFO_CUDA_NULL_STREAM",
        1,
        streamId=COMPUTE,
        hwId=device,
        vmId=1,
        processId=pid,
        deviceId=device,
        contextId=1,
    )
    side = sorted(s for s in streams if s != COMPUTE)
    w.insert(
        "TARGET_INFO_CUDA_STREAM",
        len(side),
        streamId=side,
        hwId=0,
        vmId=1,
        processId=pid,
        contextId=1,
        priority=0,
        flag=2,
    )
    w.insert(
        "TARGET_INFO_SESSION_START_TIME", 1, utcEpochNs=SESSION_UTC_NS, utcTime=when, localTime=when, systemClockNs=0
    )
    env = [("CpuCores", 1, "64"), ("CpuArchitecture", 3, "x86_64"), ("Hostname", 4, host)]
    w.insert(
        "TARGET_INFO_SYSTEM_ENV",
        len(env) if host is not None else 0,
        globalVid=VM,
        devStateName="Local (CLI)",
        name=[e[0] for e in env],
        nameEnum=[e[1] for e in env],
        value=[e[2] for e in env],
    )
    w.insert("ANALYSIS_DETAILS", 1, globalVid=VM, duration=int(stop - start), startTime=int(start), stopTime=int(stop))
    capture = [
        ("CAPTURE_EVENT_TYPE", "NvtxEvents"),
        ("CAPTURE_EVENT_TYPE", "Cuda"),
        ("CUDA_TRACE_SCOPE", "ProcessTree"),
        ("PROCESS_0:COMMAND", "python3"),
    ] + ([("DEVICE_DISPLAY_NAME", host)] if host is not None else [])
    w.insert("META_DATA_CAPTURE", len(capture), name=[c[0] for c in capture], value=[c[1] for c in capture])
    rows = [
        (
            k,
            path.with_suffix(".nsys-rep").name
            if "INPUT_FILE" in k
            else path.name
            if "OUTPUT_FILE" in k or "OUTUPT_FILE" in k
            else v,
        )
        for k, v in w.layout.export_metadata
        if "_PATH" not in k and k not in ("EXPORT_HOST", "EXPORT_TIME")
    ]
    if export_host is not None:  # where the report was exported: here, on the rank's node
        rows.append(("EXPORT_HOST", export_host))
    rows.append(("EXPORT_SIMULATED_BY", "extradeep.simulate"))
    w.insert(w.layout.metadata_table, len(rows), name=[r[0] for r in rows], value=[r[1] for r in rows])


class RunColumns:
    """One run's records as columns, stacked once (events x ranks) and shared by all its ranks' files.

    Every rank has the same records in the same order, so names are interned once into one
    StringTable whose ids are valid in every file of the run.
    """

    def __init__(
        self,
        rec: Records,
        ops: list[OpSpec],
        op_bytes: np.ndarray,
        offsets: np.ndarray | None = None,
        placement: Placement | None = None,
    ):
        self.rec, self.ops, self.op_bytes = rec, ops, op_bytes
        self.placement = placement
        self.offsets = offsets  # clock offset (ns) per rank, or None
        self.strings = StringTable()
        self._cache: dict = {}
        self.subsets = {kind: [g for g in rec.gpu if ops[g[0]].kind == kind] for kind in ("kernel", "memcpy", "memset")}
        self.subsets.update({lib: [x for x in rec.library if x[0] == lib] for lib in LIBRARY_CLASS})
        for name in ("runtime", "sync", "cuda_event", "mpi", "osrt"):
            self.subsets[name] = getattr(rec, name)

    def __call__(self, subset: str, k: int, rank: int) -> np.ndarray:
        """Field k of every record in subset, for one rank."""
        key = (subset, k)
        if key not in self._cache:
            values = [item[k] for item in self.subsets[subset]]
            self._cache[key] = np.stack(values) if values and isinstance(values[0], np.ndarray) else np.array(values)
        column = self._cache[key]
        if self.offsets is not None and k in TIME_FIELDS.get(subset, ()):
            return column[:, rank] + self.offsets[rank]
        return column[:, rank] if column.ndim == 2 else column

    def ids(self, subset: str, k: int, names=None) -> np.ndarray:
        """StringIds ids of field k (or of names, a function of the record) of every record in subset."""
        key = ("ids", subset, k, names)
        if key not in self._cache:
            items = self.subsets[subset]
            self._cache[key] = self.strings.many(names(x) if names else x[k] for x in items)
        return self._cache[key]


def write_rank(path: Path, layout: Layout, cols: RunColumns, rank: int, nvtx_strings: str = "text") -> None:
    """One rank's export; cols = RunColumns of the run (shared by its ranks)."""
    pid = 1000 + rank
    conn, w = new_export(path, layout)
    rec, strings = cols.rec, cols.strings
    gpid, main = global_pid(pid), global_tid(pid, pid)
    device = 0 if cols.placement is None else cols.placement.device(rank)
    n = {name: len(items) for name, items in cols.subsets.items()}
    w.insert(
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        n["runtime"],
        start=cols("runtime", 1, rank),
        end=cols("runtime", 2, rank),
        eventClass=0,
        globalTid=main,
        correlationId=cols("runtime", 3, rank),
        nameId=cols.ids("runtime", 0),
        returnValue=0,
    )
    for kind, table in (
        ("kernel", "CUPTI_ACTIVITY_KIND_KERNEL"),
        ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ("memset", "CUPTI_ACTIVITY_KIND_MEMSET"),
    ):
        if n[kind]:
            _write_gpu(w, cols, table, kind, rank, gpid)
    w.insert(
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        n["sync"],
        start=cols("sync", 2, rank),
        end=cols("sync", 3, rank),
        deviceId=device,
        contextId=1,
        streamId=cols("sync", 1, rank),
        correlationId=cols("sync", 4, rank),
        globalPid=gpid,
        syncType=cols("sync", 0, rank),
        eventId=cols("sync", 5, rank),
        eventSyncId=cols("sync", 6, rank),
    )
    w.insert(
        "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
        n["cuda_event"],
        timestamp=cols("cuda_event", 4, rank),
        deviceId=device,
        contextId=1,
        streamId=cols("cuda_event", 0, rank),
        correlationId=cols("cuda_event", 1, rank),
        globalPid=gpid,
        eventId=cols("cuda_event", 2, rank),
        eventSyncId=cols("cuda_event", 3, rank),
    )
    nvtx = list(rec.nvtx)
    if layout.has("MPI_COLLECTIVES_EVENTS"):
        size = cols("mpi", 3, rank)
        w.insert(
            "MPI_COLLECTIVES_EVENTS",
            n["mpi"],
            start=cols("mpi", 1, rank),
            end=cols("mpi", 2, rank),
            globalTid=main,
            textId=cols.ids("mpi", 0),
            commHandle=1,
            rootRank=0,
            size=size,
            recvSize=size,
        )
        w.insert("MPI_RANKS", 1 if n["mpi"] else 0, globalTid=main, rank=rank)
    else:  # older nsys recorded MPI calls as NVTX ranges in an "MPI" domain
        nvtx += [[name, s, e, 59, None, MPI_DOMAIN, None, None] for name, s, e, _ in rec.mpi]
    nvtx += [[emit_nvtx_text(name, dims), s, e, 59, None, 0, None, None] for name, s, e, dims in rec.autograd]
    write_nvtx(w, strings, nvtx, rank, main, nvtx_strings, 0.0 if cols.offsets is None else cols.offsets[rank])
    w.insert(
        "OSRT_API",
        n["osrt"],
        start=cols("osrt", 1, rank),
        end=cols("osrt", 2, rank),
        eventClass=27,
        globalTid=global_tid(pid, pid) + cols("osrt", 3, rank),
        nameId=cols.ids("osrt", 0),
        returnValue=0,
        nestingLevel=0,
        callchainId=0,
    )
    for lib, table in (("cudnn", "CUDNN_EVENTS"), ("cublas", "CUBLAS_EVENTS")):
        w.insert(
            table,
            n[lib],
            start=cols(lib, 2, rank),
            end=cols(lib, 3, rank),
            eventClass=LIBRARY_CLASS[lib],
            globalTid=main,
            nameId=cols.ids(lib, 1),
        )
    span = (cols("runtime", 1, rank).min(), cols("runtime", 2, rank).max()) if n["runtime"] else (0, 0)
    streams = {g[1] for g in rec.gpu} | {COMPUTE}
    threads = {pid + k: name for k, name in enumerate(THREAD_NAMES)}
    write_metadata(w, strings, path, pid, threads, streams, span, cols.placement, rank)
    rows = strings.rows()
    w.insert("StringIds", len(rows), id=[i for i, _ in rows], value=[v for _, v in rows])
    conn.commit()
    conn.close()


def _write_gpu(w, cols: RunColumns, table: str, kind: str, rank: int, gpid: int) -> None:
    items, ops = cols.subsets[kind], cols.ops
    n = len(items)
    idx = cols(kind, 0, rank)
    device = 0 if cols.placement is None else cols.placement.device(rank)
    common = dict(
        start=cols(kind, 2, rank),
        end=cols(kind, 3, rank),
        deviceId=device,
        contextId=1,
        greenContextId=0,
        streamId=cols(kind, 1, rank),
        correlationId=cols(kind, 4, rank),
        globalPid=gpid,
    )
    if kind == "kernel":
        demangled = cols.ids(kind, 0, lambda g: ops[g[0]].demangled)
        grid = np.array([ops[i].grid for i in idx])
        w.insert(
            table,
            n,
            **common,
            demangledName=demangled,
            shortName=cols.ids(kind, 0, lambda g: ops[g[0]].name),
            mangledName=demangled,
            launchType=1,
            cacheConfig=1,
            registersPerThread=np.array([ops[i].registers for i in idx]),
            gridX=grid[:, 0],
            gridY=grid[:, 1],
            gridZ=grid[:, 2],
            blockX=grid[:, 3],
            blockY=grid[:, 4],
            blockZ=grid[:, 5],
            staticSharedMemory=0,
            dynamicSharedMemory=0,
            localMemoryPerThread=0,
            localMemoryTotal=0,
            gridId=np.arange(1, n + 1),
            sharedMemoryExecuted=0,
            sharedMemoryLimitConfig=0,
            clusterX=0,
            clusterY=0,
            clusterZ=0,
            clusterSchedulingPolicy=0,
            maxPotentialClusterSize=0,
            maxActiveClusters=0,
            tensorSizeMinusOneElements="[]",
        )
    elif kind == "memcpy":
        copy_kind = np.array([ops[i].copy_kind for i in idx])
        w.insert(
            table,
            n,
            **common,
            bytes=cols.op_bytes[idx],
            copyKind=copy_kind,
            srcKind=np.where(copy_kind == 1, 1, 2),
            dstKind=np.where(copy_kind == 1, 2, 0),
            srcDeviceId=device,
            srcContextId=1,
            dstDeviceId=device,
            dstContextId=1,
            copyCount=1,
        )
    else:
        w.insert(table, n, **common, value=0, bytes=cols.op_bytes[idx], memKind=2)


def emit_nvtx_text(name: str, dims: list) -> str:
    """An operator's range as torch.autograd.profiler.emit_nvtx(record_shapes=True) names it."""
    shapes = ", ".join("[" + ", ".join(str(int(d)) for d in shape) + "]" for shape in dims)
    return f"{name}, sizes = [{shapes}]"


def write_nvtx(w, strings, nvtx, r, main, mode, offset: float = 0.0) -> None:
    """nvtx rows: [text, start, end, eventType, category, domainId, globalTid, uint64Value]; start/end
    may be per-rank arrays; globalTid None means the main thread."""

    def pick(v):
        return (v[r] if isinstance(v, np.ndarray) else v) + offset

    end = [None if row[2] is None else int(round(pick(row[2]))) for row in nvtx]
    texts = [row[0] for row in nvtx]
    by_id = mode == "textId"
    w.insert(
        "NVTX_EVENTS",
        len(nvtx),
        start=np.array([pick(row[1]) for row in nvtx]),
        end=end,
        eventType=[row[3] for row in nvtx],
        category=[row[4] for row in nvtx],
        text=None if by_id else texts,
        textId=strings.many(texts) if by_id else None,
        globalTid=[main if row[6] is None else row[6] for row in nvtx],
        domainId=[row[5] for row in nvtx],
        uint64Value=[row[7] for row in nvtx],
    )
