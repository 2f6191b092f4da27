"""Write one rank's share of the simulated records as an Nsight Systems SQLite export."""

from __future__ import annotations

import datetime as dt
import sqlite3
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


def global_pid(pid: int) -> int:
    return VM | (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | tid


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


def write_metadata(w: ExportWriter, strings: StringTable, path: Path, pid: int, threads: dict, streams,
                   span) -> None:
    """Process/thread/GPU/session tables every real export carries; threads maps tid -> name."""
    gpid = global_pid(pid)
    start, stop = span
    when = dt.datetime.fromtimestamp(SESSION_UTC_NS / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    w.insert("ThreadNames", len(threads), nameId=strings.many(threads.values()), priority=20,
             globalTid=[global_tid(pid, tid) for tid in threads])
    w.insert("PROCESSES", 1, globalPid=gpid, pid=pid, name="python3")
    w.insert("TARGET_INFO_GPU", 1, vmId=VM, id=0, name=GPU_NAME, busLocation="0000:07:00.0", isDiscrete=1,
             l2CacheSize=41943040, totalMemory=42505273344, memoryBandwidth=1555200000000,
             clockRate=1410000000, smCount=108, pwGpuId=0, uuid="00000000-0000-0000-0000-0000000000a1",
             luid=0, chipName="GA100", cuDevice=0, ctxswDevPath="", ctrlDevPath="", revision=161, nodeMask=0,
             constantMemory=65536, maxIPC=4, maxRegistersPerBlock=65536, maxShmemPerBlock=49152,
             maxShmemPerBlockOptin=166912, maxShmemPerSm=167936, maxRegistersPerSm=65536,
             threadsPerWarp=32, asyncEngines=3, maxWarpsPerSm=64, maxBlocksPerSm=32, maxThreadsPerBlock=1024,
             maxBlockDimX=1024, maxBlockDimY=1024, maxBlockDimZ=64, maxGridDimX=2147483647,
             maxGridDimY=65535, maxGridDimZ=65535, computeMajor=8, computeMinor=0, smMajor=8, smMinor=0)
    w.insert("TARGET_INFO_CUDA_DEVICE", 1, gpuId=0, cudaId=0, pid=pid, numMultiprocessors=108)
    w.insert("TARGET_INFO_CUDA_CONTEXT_INFO", 1, nullStreamId=COMPUTE, hwId=0, vmId=1, processId=pid,
             deviceId=0, contextId=1, parentContextId=0, isGreenContext=0, numMultiprocessors=0)
    w.insert("TARGET_INFO_CUDA_NULL_STREAM", 1, streamId=COMPUTE, hwId=0, vmId=1, processId=pid,
             deviceId=0, contextId=1)
    side = sorted(s for s in streams if s != COMPUTE)
    w.insert("TARGET_INFO_CUDA_STREAM", len(side), streamId=side, hwId=0, vmId=1, processId=pid,
             contextId=1, priority=0, flag=2)
    w.insert("TARGET_INFO_SESSION_START_TIME", 1, utcEpochNs=SESSION_UTC_NS, utcTime=when, localTime=when,
             systemClockNs=0)
    env = [("CpuCores", 1, "64"), ("CpuArchitecture", 3, "x86_64"), ("Hostname", 4, f"node{pid % 1000:03d}")]
    w.insert("TARGET_INFO_SYSTEM_ENV", len(env), globalVid=VM, devStateName="Local (CLI)",
             name=[e[0] for e in env], nameEnum=[e[1] for e in env], value=[e[2] for e in env])
    w.insert("ANALYSIS_DETAILS", 1, globalVid=VM, duration=int(stop - start), startTime=int(start),
             stopTime=int(stop))
    capture = [("CAPTURE_EVENT_TYPE", "NvtxEvents"), ("CAPTURE_EVENT_TYPE", "Cuda"),
               ("CUDA_TRACE_SCOPE", "ProcessTree"), ("PROCESS_0:COMMAND", "python3")]
    w.insert("META_DATA_CAPTURE", len(capture), name=[c[0] for c in capture], value=[c[1] for c in capture])
    rows = [(k, path.with_suffix(".nsys-rep").name if "INPUT_FILE" in k else path.name if "OUTPUT_FILE" in k
             or "OUTUPT_FILE" in k else v) for k, v in w.layout.export_metadata
            if "_PATH" not in k and k not in ("EXPORT_HOST", "EXPORT_TIME")]
    rows.append(("EXPORT_SIMULATED_BY", "extradeep.simulate"))
    w.insert(w.layout.metadata_table, len(rows), name=[r[0] for r in rows], value=[r[1] for r in rows])


def write_rank(path: Path, layout: Layout, rec: Records, ops: list[OpSpec], op_bytes: np.ndarray,
               rank: int, nvtx_strings: str = "text") -> None:
    """op_bytes: bytes moved per instance of each op (memcpy/memset)."""
    pid = 1000 + rank
    conn, w = new_export(path, layout)
    strings = StringTable()
    gpid, main = global_pid(pid), global_tid(pid, pid)
    r = rank

    def col(items, k):
        return np.array([it[k][r] if isinstance(it[k], np.ndarray) else it[k] for it in items])

    # CUDA runtime calls
    rt = rec.runtime
    w.insert("CUPTI_ACTIVITY_KIND_RUNTIME", len(rt), start=col(rt, 1), end=col(rt, 2), eventClass=0,
             globalTid=main, correlationId=col(rt, 3), nameId=strings.many(x[0] for x in rt), returnValue=0)
    # GPU activity by kind
    for kind, table in (("kernel", "CUPTI_ACTIVITY_KIND_KERNEL"), ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
                        ("memset", "CUPTI_ACTIVITY_KIND_MEMSET")):
        items = [g for g in rec.gpu if ops[g[0]].kind == kind]
        if items:
            _write_gpu(w, strings, table, kind, items, ops, op_bytes, r, gpid)
    # synchronisation and CUDA events
    sy = rec.sync
    w.insert("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", len(sy), start=col(sy, 2), end=col(sy, 3), deviceId=0,
             contextId=1, streamId=col(sy, 1), correlationId=col(sy, 4), globalPid=gpid,
             syncType=col(sy, 0), eventId=col(sy, 5), eventSyncId=col(sy, 6))
    ev = rec.cuda_event
    w.insert("CUPTI_ACTIVITY_KIND_CUDA_EVENT", len(ev), timestamp=col(ev, 4), deviceId=0, contextId=1,
             streamId=col(ev, 0), correlationId=col(ev, 1), globalPid=gpid, eventId=col(ev, 2),
             eventSyncId=col(ev, 3))
    nvtx = list(rec.nvtx)
    if layout.has("MPI_COLLECTIVES_EVENTS"):
        mp = rec.mpi
        w.insert("MPI_COLLECTIVES_EVENTS", len(mp), start=col(mp, 1), end=col(mp, 2), globalTid=main,
                 textId=strings.many(x[0] for x in mp), commHandle=1, rootRank=0, size=col(mp, 3),
                 recvSize=col(mp, 3))
        if mp:
            w.insert("MPI_RANKS", 1, globalTid=main, rank=rank)
    else:  # older nsys recorded MPI calls as NVTX ranges in an "MPI" domain
        nvtx += [[name, s, e, 59, None, MPI_DOMAIN, None, None] for name, s, e, _ in rec.mpi]
    write_nvtx(w, strings, nvtx, r, main, nvtx_strings)
    os_ = rec.osrt
    w.insert("OSRT_API", len(os_), start=col(os_, 1), end=col(os_, 2), eventClass=27,
             globalTid=[global_tid(pid, pid + t) for t in col(os_, 3)], nameId=strings.many(x[0] for x in os_),
             returnValue=0, nestingLevel=0, callchainId=0)
    for lib, table in (("cudnn", "CUDNN_EVENTS"), ("cublas", "CUBLAS_EVENTS")):
        items = [x for x in rec.library if x[0] == lib]
        w.insert(table, len(items), start=col(items, 2), end=col(items, 3), eventClass=LIBRARY_CLASS[lib],
                 globalTid=main, nameId=strings.many(x[1] for x in items))
    starts = [col(rt, 1).min()] if rt else [0]
    stops = [col(rt, 2).max()] if rt else [0]
    streams = {g[1] for g in rec.gpu} | {COMPUTE}
    threads = {pid + k: name for k, name in enumerate(THREAD_NAMES)}
    write_metadata(w, strings, path, pid, threads, streams, (min(starts), max(stops)))
    w.insert("StringIds", len(strings.ids), id=[i for i, _ in strings.rows()], value=[v for _, v in strings.rows()])
    conn.commit()
    conn.close()


def _write_gpu(w, strings, table, kind, items, ops, op_bytes, r, gpid) -> None:
    n = len(items)
    idx = np.array([g[0] for g in items])
    start = np.array([g[2][r] for g in items])
    end = np.array([g[3][r] for g in items])
    common = dict(start=start, end=end, deviceId=0, contextId=1, greenContextId=0,
                  streamId=np.array([g[1] for g in items]), correlationId=np.array([g[4] for g in items]),
                  globalPid=gpid)
    if kind == "kernel":
        demangled = strings.many(ops[i].demangled for i in idx)
        grid = np.array([ops[i].grid for i in idx])
        w.insert(table, n, **common, demangledName=demangled, shortName=strings.many(ops[i].name for i in idx),
                 mangledName=demangled, launchType=1, cacheConfig=1,
                 registersPerThread=np.array([ops[i].registers for i in idx]),
                 gridX=grid[:, 0], gridY=grid[:, 1], gridZ=grid[:, 2], blockX=grid[:, 3], blockY=grid[:, 4],
                 blockZ=grid[:, 5], staticSharedMemory=0, dynamicSharedMemory=0, localMemoryPerThread=0,
                 localMemoryTotal=0, gridId=np.arange(1, n + 1), sharedMemoryExecuted=0,
                 sharedMemoryLimitConfig=0, clusterX=0, clusterY=0, clusterZ=0, clusterSchedulingPolicy=0,
                 maxPotentialClusterSize=0, maxActiveClusters=0, tensorSizeMinusOneElements="[]")
    elif kind == "memcpy":
        copy_kind = np.array([ops[i].copy_kind for i in idx])
        w.insert(table, n, **common, bytes=op_bytes[idx], copyKind=copy_kind,
                 srcKind=np.where(copy_kind == 1, 1, 2), dstKind=np.where(copy_kind == 1, 2, 0),
                 srcDeviceId=0, srcContextId=1, dstDeviceId=0, dstContextId=1, copyCount=1)
    else:
        w.insert(table, n, **common, value=0, bytes=op_bytes[idx], memKind=2)


def write_nvtx(w, strings, nvtx, r, main, mode) -> None:
    """nvtx rows: [text, start, end, eventType, category, domainId, globalTid, uint64Value]; start/end
    may be per-rank arrays; globalTid None means the main thread."""
    pick = lambda v: v[r] if isinstance(v, np.ndarray) else v  # noqa: E731
    end = [None if row[2] is None else int(round(pick(row[2]))) for row in nvtx]
    texts = [row[0] for row in nvtx]
    by_id = mode == "textId"
    w.insert("NVTX_EVENTS", len(nvtx), start=np.array([pick(row[1]) for row in nvtx]), end=end,
             eventType=[row[3] for row in nvtx], category=[row[4] for row in nvtx],
             text=None if by_id else texts, textId=strings.many(texts) if by_id else None,
             globalTid=[main if row[6] is None else row[6] for row in nvtx], domainId=[row[5] for row in nvtx],
             uint64Value=[row[7] for row in nvtx])
