"""One rank of a simulated GPT run as an Nsight Systems SQLite export (the 2026.2 schema).

Written like `nsys profile -t cuda,nvtx --cuda-memory-usage=true` of a Megatron-LM/DeepSpeed/FSDP
rank with NCCL's NVTX ranges: CUDA runtime calls from the main and the autograd thread, kernels
(NCCL ones on each process group's stream), memcpy/memset, event record/wait and synchronisations,
NVTX ranges (extradeep's step marks in domain `extradeep`, the framework's ranges, NCCL's ranges in
domain `NCCL` with their payload: communicator id, message size, peer or reduction operation, and at
start-up `ncclCommInitRankConfig` with the communicator's size and this rank's place in it), and
CUDA_GPU_MEMORY_USAGE_EVENTS: the caching allocator's device allocations (segments, never freed).

``nccl_nvtx`` chooses NCCL's ranges: "payload" (NCCL 2.23+, binaryData described by
NVTX_PAYLOAD_SCHEMAS), "legacy" (older NCCL: the message size in uint64Value, no communicator) or
"none" (NCCL_NVTX_DISABLE=1). The payload is written as the little-endian bytes of NCCL's payload
struct; the one real export with NCCL payload schemas has its binaryData stripped, so that byte
format is the schema's description, not a copy of a real file.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

from extradeep.columns import BYTES, CORR, END, KIND, MEMORY_TOTAL, NAME, START, STREAM, THREAD
from extradeep.simulate.gpt import groups as grp
from extradeep.simulate.gpt.config import GPU, ParallelLayout
from extradeep.simulate.gpt.issue import AUTOGRAD
from extradeep.simulate.gpt.names import KERNELS, NCCL_CALLS, NCCL_KERNELS
from extradeep.simulate.gpt.power import METRICS_DDL, POWER_METRIC, power_samples
from extradeep.simulate.gpt.run import RankTimeline
from extradeep.simulate.schema import StringTable, load_layout
from extradeep.simulate.writer import Placement, global_pid, global_tid, new_export, write_metadata

NCCL_NVTX = ("payload", "legacy", "none")
API_VERSIONS = {
    "cudaLaunchKernel": "cudaLaunchKernel_v7000",
    "cudaLaunchKernelExC": "cudaLaunchKernelExC_v11060",
    "cudaMemsetAsync": "cudaMemsetAsync_v3020",
    "cudaMemcpyAsync": "cudaMemcpyAsync_v3020",
    "cudaEventRecord": "cudaEventRecord_v3020",
    "cudaStreamWaitEvent": "cudaStreamWaitEvent_v3020",
    "cudaStreamSynchronize": "cudaStreamSynchronize_v3020",
}
MEMORY_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
# Written in the exporter's style from NVIDIA's schema reference (no collected export has the table).
MEMORY_DDL = f"""CREATE TABLE {MEMORY_TABLE} (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    globalPid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    address                     INTEGER   NOT NULL,                    -- Virtual address of the allocation/deallocation.
    pc                          INTEGER   NOT NULL,                    -- Program counter of the allocation/deallocation.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes allocated/deallocated (B).
    memKind                     INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUDA_MEM_KIND(id)
    memoryOperationType         INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUDA_DEV_MEM_EVENT_OPER(id)
    name                        TEXT,                                  -- Variable name, if available.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    streamId                    INTEGER,                               -- Stream ID.
    localMemoryPoolAddress      INTEGER,                               -- Base address of the local memory pool used
    localMemoryPoolReleaseThreshold INTEGER,                           -- Release threshold of the local memory pool used
    localMemoryPoolSize         INTEGER,                               -- Size of the local memory pool used
    localMemoryPoolUtilizedSize INTEGER,                               -- Utilized size of the local memory pool used
    importedMemoryPoolAddress   INTEGER,                               -- Base address of the imported memory pool used
    importedMemoryPoolProcessId INTEGER                                -- Process ID of the imported memory pool used
)"""
# NCCL's payload structs (src/include/nvtx_payload_schemas.h): id, entries (name, NVTX type, offset), size
PAYLOAD_SCHEMAS = {
    "init": (
        16777218,
        [("NCCL communicator ID", 18, 0), ("No. of ranks", 5, 8), ("Rank", 5, 12), ("CUDA device", 5, 16)],
        24,
    ),
    "allgather": (16777220, [("NCCL communicator ID", 18, 0), ("Message size [bytes]", 22, 8)], 16),
    "allreduce": (
        16777223,
        [("NCCL communicator ID", 18, 0), ("Message size [bytes]", 22, 8), ("Reduction operation", 16777232, 16)],
        24,
    ),
    "reducescatter": (
        16777228,
        [("NCCL communicator ID", 18, 0), ("Message size [bytes]", 22, 8), ("Reduction operation", 16777232, 16)],
        24,
    ),
    "recv": (16777225, [("NCCL communicator ID", 18, 0), ("Message size [bytes]", 22, 8), ("Peer rank", 5, 16)], 24),
    "send": (16777226, [("NCCL communicator ID", 18, 0), ("Message size [bytes]", 22, 8), ("Peer rank", 5, 16)], 24),
}
NCCL_DOMAIN, FRAMEWORK_DOMAIN, EXTRADEEP_DOMAIN = 1, 0, 2
PID_BASE = 2000


def write_nsys_rank(
    path: Path,
    tl: RankTimeline,
    layout: ParallelLayout,
    placement: Placement,
    gpu: GPU,
    offset: float = 0.0,
    nccl_nvtx: str = "payload",
) -> None:
    """One rank's export; `offset` (ns) shifts its clock (a separate nsys session per rank)."""
    base = load_layout("2026")
    schema = replace(base, tables={**base.tables, MEMORY_TABLE: MEMORY_DDL, **METRICS_DDL})
    conn, w = new_export(path, schema)
    strings = StringTable()
    pid = PID_BASE + tl.rank
    gpid = global_pid(pid)
    tids = {0: global_tid(pid, pid), AUTOGRAD: global_tid(pid, pid + 3)}
    device = placement.device(tl.rank)

    def ts(values):
        return [int(round(v + offset)) for v in values]

    rt = tl.runtime
    w.insert(
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        len(rt),
        start=ts(r[START] for r in rt),
        end=ts(r[END] for r in rt),
        eventClass=0,
        globalTid=[tids[r[THREAD]] for r in rt],
        correlationId=[r[CORR] for r in rt],
        nameId=strings.many(API_VERSIONS[r[NAME]] for r in rt),
        returnValue=0,
    )
    _kernels(w, strings, tl, ts, gpid, device)
    _copies(w, tl, ts, gpid, device)
    _syncs(w, tl, ts, gpid, device)
    _nvtx(w, tl, ts, tids, nccl_nvtx, device, layout)
    _memory(w, tl, ts, gpid, device)
    span = (min(r[START] for r in rt), max(r[END] for r in rt))
    _power(w, tl, ts, gpu, device, span)
    threads = {pid: "python3", pid + 1: "pt_data_worker", pid + 2: "NCCL proxy", pid + 3: "pt_autograd_0"}
    streams = {r[STREAM] for r in tl.gpu}
    write_metadata(w, strings, path, pid, threads, streams, tuple(ts(span)), placement, tl.rank)
    conn.execute(
        "UPDATE TARGET_INFO_GPU SET name = ?, totalMemory = ?, memoryBandwidth = ?",
        (gpu.name, gpu.memory, int(gpu.hbm_bandwidth)),
    )
    rows = strings.rows()
    w.insert("StringIds", len(rows), id=[i for i, _ in rows], value=[v for _, v in rows])
    conn.commit()
    conn.close()


def _kernels(w, strings, tl, ts, gpid, device) -> None:
    ks = [r for r in tl.gpu if r[KIND] == "kernel"]
    names = [_kernel_names(r) for r in ks]
    w.insert(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        len(ks),
        start=ts(r[START] for r in ks),
        end=ts(r[END] for r in ks),
        deviceId=device,
        contextId=1,
        greenContextId=0,
        streamId=[r[STREAM] for r in ks],
        correlationId=[r[CORR] for r in ks],
        globalPid=gpid,
        demangledName=strings.many(n[1] for n in names),
        shortName=strings.many(n[0] for n in names),
        mangledName=strings.many(n[1] for n in names),
        launchType=0,
        cacheConfig=1,
        registersPerThread=[96 if r["comm"] else 128 for r in ks],
        gridX=[2 if r["comm"] else 108 for r in ks],
        gridY=1,
        gridZ=1,
        blockX=[640 if r["comm"] else 256 for r in ks],
        blockY=1,
        blockZ=1,
        staticSharedMemory=0,
        dynamicSharedMemory=0,
        localMemoryPerThread=0,
        localMemoryTotal=0,
        gridId=list(range(1, len(ks) + 1)),
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


def _kernel_names(r: dict) -> tuple[str, str]:
    if r["comm"]:
        name = NCCL_KERNELS[r["key"]]
        return name, name + "(ncclDevKernelArgsStorage<4096ul>)"
    return KERNELS[r["key"]]


def _copies(w, tl, ts, gpid, device) -> None:
    for kind, table in (("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"), ("memset", "CUPTI_ACTIVITY_KIND_MEMSET")):
        rows = [r for r in tl.gpu if r[KIND] == kind]
        extra = (
            {
                "copyKind": 2,
                "srcKind": 2,
                "dstKind": 0,
                "srcDeviceId": device,
                "srcContextId": 1,
                "dstDeviceId": device,
                "dstContextId": 1,
                "copyCount": 1,
            }
            if kind == "memcpy"
            else {"value": 0, "memKind": 2}
        )
        w.insert(
            table,
            len(rows),
            start=ts(r[START] for r in rows),
            end=ts(r[END] for r in rows),
            deviceId=device,
            contextId=1,
            greenContextId=0,
            streamId=[r[STREAM] for r in rows],
            correlationId=[r[CORR] for r in rows],
            globalPid=gpid,
            bytes=[int(r[BYTES]) for r in rows],
            **extra,
        )


def _syncs(w, tl, ts, gpid, device) -> None:
    sy = tl.syncs
    w.insert(
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        len(sy),
        start=ts(s[START] for s in sy),
        end=ts(s[END] for s in sy),
        deviceId=device,
        contextId=1,
        greenContextId=0,
        streamId=[s[STREAM] for s in sy],
        correlationId=[s[CORR] for s in sy],
        globalPid=gpid,
        syncType=[s["type"] for s in sy],
        eventId=[s["event"] if s["type"] == 2 else 4294967295 for s in sy],
        eventSyncId=[s["event"] for s in sy],
    )
    waits = [s for s in sy if s["type"] == 2]
    records = {r[CORR]: r for r in tl.runtime}
    w.insert(
        "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
        len(waits),
        timestamp=ts(records[s["record_corr"]][END] for s in waits),
        deviceId=device,
        contextId=1,
        greenContextId=0,
        streamId=[s["record_stream"] for s in waits],
        correlationId=[s["record_corr"] for s in waits],
        globalPid=gpid,
        eventId=[s["event"] for s in waits],
        eventSyncId=[s["event"] for s in waits],
    )


def _nvtx(w, tl, ts, tids, mode, device, layout) -> None:
    """Step and framework ranges, then NCCL's: one per collective call around its launch."""
    rows = [
        ("NCCL", tl.steps[0][START] - 3e3, None, 75, NCCL_DOMAIN, tids[0], None, None),
        ("extradeep", tl.steps[0][START] - 2e3, None, 75, EXTRADEEP_DOMAIN, tids[0], None, None),
    ]
    for r in (r for r in tl.ranges if r[KIND] in ("nvtx", "both")):
        domain = EXTRADEEP_DOMAIN if r["domain"] == "extradeep" else FRAMEWORK_DOMAIN
        rows.append((r["text"], r[START], r[END], 59, domain, tids[r[THREAD]], None, None))
    if mode != "none":
        launches = {r[CORR]: r for r in tl.runtime}
        roles = grp.role_groups(layout, tl.rank)
        configs = grp.process_groups(layout, tl.rank)
        t_init = tl.steps[0][START] - 2e6
        used = {grp.group_for(roles, r["comm"]["role"], r["comm"]["group"])["pg_name"] for r in tl.gpu if r["comm"]}
        # PyTorch creates a group's NCCL communicator on its first collective: only used groups have one
        for k, cfg in enumerate(c for c in configs if c["pg_name"] in used and c["pg_size"] > 1):
            payload = _pack("init", grp.comm_id(cfg), cfg["pg_size"], cfg["ranks"].index(tl.rank), device)
            rows.append(
                (
                    "ncclCommInitRankConfig",
                    t_init + k * 1e5,
                    t_init + k * 1e5 + 8e4,
                    59,
                    NCCL_DOMAIN,
                    tids[0],
                    payload if mode == "payload" else None,
                    None,
                )
            )
        for r in tl.gpu:
            if r["comm"]:
                rows += _nccl_ranges(r, launches[r[CORR]], tids, mode, roles)
    rows.sort(key=lambda x: x[1])
    schemas = (
        [
            (NCCL_DOMAIN, sid, name, 1, 0, len(entries), size, 8)
            for name, (sid, entries, size) in PAYLOAD_SCHEMAS.items()
        ]
        if mode == "payload"
        else []
    )
    w.insert_rows("NVTX_PAYLOAD_SCHEMAS", [(d, s, None, t, f, n, size, a) for d, s, _, t, f, n, size, a in schemas])
    entries = [
        (NCCL_DOMAIN, sid, i, 0, typ, name, None, None, off)
        for _, (sid, ents, _) in PAYLOAD_SCHEMAS.items()
        for i, (name, typ, off) in enumerate(ents)
    ]
    w.insert_rows("NVTX_PAYLOAD_SCHEMA_ENTRIES", entries if mode == "payload" else [])
    w.insert(
        "NVTX_EVENTS",
        len(rows),
        start=ts(x[1] for x in rows),
        end=[None if x[2] is None else ts([x[2]])[0] for x in rows],
        eventType=[x[3] for x in rows],
        text=[x[0] for x in rows],
        globalTid=[x[5] for x in rows],
        domainId=[x[4] for x in rows],
        binaryData=[x[6] for x in rows],
        uint64Value=[x[7] for x in rows],
    )


def _nccl_ranges(r: dict, launch: dict, tids, mode, roles) -> list[tuple]:
    comm = r["comm"]
    tid = tids[launch[THREAD]]
    s, e = launch[START] - 1_500.0, launch[END] + 500.0
    cid = grp.comm_id(grp.group_for(roles, comm["role"], comm["group"]))
    if comm["collective"] != "sendrecv":
        kind = comm["collective"].removesuffix("_f32")
        # NCCL's message size: count x type size, per rank for all-gather (send) and reduce-scatter (receive)
        nbytes = comm[BYTES] // len(comm["group"]) if kind in ("allgather", "reducescatter") else comm[BYTES]
        payload = _pack(kind, cid, nbytes, 0) if mode == "payload" else None
        legacy = nbytes if mode == "legacy" else None
        return [(NCCL_CALLS[comm["collective"]][0], s, e, 59, NCCL_DOMAIN, tid, payload, legacy)]
    out = [("ncclGroupStart", s, s + 300.0, 59, NCCL_DOMAIN, tid, None, None)]
    for k, (direction, peer, nbytes) in enumerate(comm["peers"]):
        at = s + 400.0 + 200.0 * k
        peer_in_group = comm["group"].index(peer)
        payload = _pack(direction, cid, nbytes, peer_in_group) if mode == "payload" else None
        legacy = nbytes if mode == "legacy" else None
        out.append((NCCL_CALLS[direction][0], at, at + 150.0, 59, NCCL_DOMAIN, tid, payload, legacy))
    out.append(("ncclGroupEnd", s + 400.0 + 200.0 * len(comm["peers"]), e, 59, NCCL_DOMAIN, tid, None, None))
    return out


def _pack(kind: str, *values) -> bytes:
    """NCCL's payload struct: communicator id (u64), then u64 size and int32 fields, or for
    init the int32 size, rank and device; padded to the struct size."""
    _, _, size = PAYLOAD_SCHEMAS[kind]
    if kind == "init":
        data = struct.pack("<Qiii", *values)
    elif kind == "allgather":
        data = struct.pack("<QQ", values[0], values[1])
    else:
        data = struct.pack("<QQi", *values)
    return data.ljust(size, b"\0")


def _power(w, tl, ts, gpu: GPU, device: int, span) -> None:
    """The GPU's board power sampled over the rank's span, as `nsys --gpu-metrics-devices` would."""
    stamps, watts = power_samples(gpu, tl.gpu, span[0], span[1])
    type_id = 0x10000 + device
    w.insert_rows("TARGET_INFO_GPU_METRICS", [(type_id, 1, f"GPU {device} metrics", 0, POWER_METRIC)])
    w.insert(
        "GPU_METRICS", len(stamps), typeId=type_id, timestamp=ts(stamps), metricId=0, value=[int(v) for v in watts]
    )


def _memory(w, tl, ts, gpid, device) -> None:
    """Device allocations of the caching allocator: a segment (2 MiB multiples) whenever the peak
    of allocated bytes outgrows what it holds; PyTorch keeps them, so there are no frees."""
    from extradeep.simulate.gpt.truth import reserved

    held, address, rows = 0.0, 0x7F0000000000, []
    for m in tl.memory:
        need = reserved(m[MEMORY_TOTAL])
        if need > held:
            rows.append((m["time"], address, int(need - held)))
            address += int(need - held)
            held = need
    w.insert(
        MEMORY_TABLE,
        len(rows),
        start=ts(r[0] for r in rows),
        globalPid=gpid,
        deviceId=device,
        contextId=1,
        address=[r[1] for r in rows],
        pc=0,
        bytes=[r[2] for r in rows],
        memKind=2,
        memoryOperationType=0,
        name=None,
        correlationId=0,
        streamId=7,
    )
