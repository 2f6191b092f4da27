"""One rank of a simulated GPT run as a PyTorch profiler (Kineto) trace, as `profile_memory=True` writes it.

`distributedInfo` carries the backend, rank, world size, `pg_count` and `pg_config` (the groups this
rank belongs to, with names and descriptions as the framework created them). Every NCCL kernel and
its `record_param_comms` CPU op carry PyTorch's collective metadata: `Collective name`,
`In msg nelems`, `Out msg nelems`, `Group size`, `dtype`, `In split size`, `Out split size`,
`Process Group Name`, `Process Group Description`, `Process Group Ranks`. c10d ops appear as
`nccl:*` annotations, steps as `ProfilerStep#N`, FSDP's and the optimizer's `record_function` ranges
as user annotations (NVTX-only ranges of Megatron-LM and DeepSpeed do not reach Kineto). Memory:
`[memory]` instant events with `Total Allocated`, `Total Reserved`, `Bytes`, `Addr`, `Device Type`
and `Device Id`. Runtime calls of the backward pass come from the autograd thread's tid.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from extradeep.columns import BYTES, CORR, END, KIND, MEMORY_TOTAL, NAME, START, STREAM, THREAD
from extradeep.simulate.gpt import groups as grp
from extradeep.simulate.gpt.config import GPU, ParallelLayout
from extradeep.simulate.gpt.issue import AUTOGRAD
from extradeep.simulate.gpt.names import KERNELS, NCCL_CALLS, NCCL_KERNELS
from extradeep.simulate.gpt.run import RankTimeline
from extradeep.simulate.gpt.truth import reserved
from extradeep.simulate.kineto_writer import SYNC_KINDS
from extradeep.simulate.writer import Placement

PID_BASE = 2000
NCCL_VERSION = "2.21.5"
DTYPE = "BFloat16"


def _us(ns: float) -> float:
    return round(ns / 1000.0, 3)


def write_kineto_rank(
    path: Path,
    tl: RankTimeline,
    layout: ParallelLayout,
    placement: Placement,
    gpu: GPU,
    offset: float = 0.0,
    flows: bool = True,
) -> None:
    """One rank's trace (gzip JSON); `offset` shifts its clock (ns)."""
    configs = grp.process_groups(layout, tl.rank)
    world = layout.world
    pid = PID_BASE + tl.rank
    tids = {0: pid, AUTOGRAD: pid + 3}
    device = placement.device(tl.rank)
    events: list[dict] = []

    def x(cat, name, start, end, tid, args, p=pid):
        # duration from the rounded ends, so touching ranges (steps) still touch after rounding
        ts, te = _us(start + offset), _us(end + offset)
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": p,
                "tid": tid,
                "ts": ts,
                "dur": round(te - ts, 3),
                "args": args,
            }
        )

    launches = {r[CORR]: r for r in tl.runtime}
    roles = grp.role_groups(layout, tl.rank)
    for r in tl.runtime:
        x("cuda_runtime", r[NAME], r[START], r[END], tids[r[THREAD]], {"correlation": r[CORR]})
        if flows and r[NAME] in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemsetAsync", "cudaMemcpyAsync"):
            events.append(
                {
                    "ph": "s",
                    "id": r[CORR],
                    "pid": pid,
                    "tid": tids[r[THREAD]],
                    "ts": _us(r[START] + offset),
                    "cat": "ac2g",
                    "name": "ac2g",
                }
            )
    for r in tl.gpu:
        args = {"device": device, "stream": r[STREAM], "correlation": r[CORR]}
        if r[KIND] == "kernel":
            cat = "kernel"
            name = (
                (NCCL_KERNELS[r["key"]] + "(ncclDevKernelArgsStorage<4096ul>)") if r["comm"] else KERNELS[r["key"]][1]
            )
            if r["comm"]:
                meta = _comm_args(r["comm"], roles)
                args.update(meta)
                launch = launches[r[CORR]]
                x(
                    "cpu_op",
                    "record_param_comms",
                    launch[START] - 2_000.0,
                    launch[START] - 500.0,
                    tids[launch[THREAD]],
                    dict(meta),
                )
                for label in _annotations(r["comm"]):
                    x(
                        "user_annotation",
                        label,
                        launch[START] - 4_000.0,
                        launch[END] + 300.0,
                        tids[launch[THREAD]],
                        {},
                    )
        elif r[KIND] == "memcpy":
            cat, name = "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)"
            args["bytes"] = int(r[BYTES])
        else:
            cat, name = "gpu_memset", "Memset (Device)"
            args["bytes"] = int(r[BYTES])
        x(cat, name, r[START], r[END], r[STREAM], args, p=device)
        if flows:
            events.append(
                {
                    "ph": "f",
                    "id": r[CORR],
                    "pid": device,
                    "tid": r[STREAM],
                    "ts": _us(r[START] + offset),
                    "cat": "ac2g",
                    "name": "ac2g",
                    "bp": "e",
                }
            )
    for s in tl.syncs:
        kind = SYNC_KINDS[s["type"]]
        args = {"cuda_sync_kind": kind, "stream": s[STREAM], "correlation": s[CORR], "device": device}
        if s["type"] == 2:
            args |= {
                "wait_on_stream": s["record_stream"],
                "wait_on_cuda_event_record_corr_id": s["record_corr"],
                "wait_on_cuda_event_id": s["event"],
            }
        x("cuda_sync", kind, s[START], s[END], s[STREAM], args, p=device)
    for r in tl.ranges:
        if r[KIND] in ("user_annotation", "both"):
            x("user_annotation", r["text"], r[START], r[END], tids[r[THREAD]], {})
    address, peak = 0x7F0000000000, 0.0
    for m in tl.memory:  # the caching allocator keeps what it reserved: segments for the peak so far
        address += 512
        peak = max(peak, m[MEMORY_TOTAL])
        events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": pid,
                "tid": pid,
                "ts": _us(m["time"] + offset),
                "args": {
                    "Total Reserved": int(reserved(peak)),
                    "Total Allocated": int(m[MEMORY_TOTAL]),
                    "Bytes": int(m["delta"]),
                    "Addr": address,
                    "Device Type": 1,
                    "Device Id": device,
                },
            }
        )
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": device,
                "name": gpu.name,
                "totalGlobalMem": gpu.memory,
                "computeMajor": 8,
                "computeMinor": 0,
                "numSms": 108,
                "warpSize": 32,
            }
        ],
        "distributedInfo": {
            "backend": "nccl",
            "rank": tl.rank,
            "world_size": world,
            "pg_count": len(configs),
            "pg_config": configs,
            "nccl_version": NCCL_VERSION,
        },
        "traceEvents": events,
        "traceName": Path(path).name,
        "displayTimeUnit": "ms",
    }
    data = orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)  # 8x the json module's speed
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as fh:
        fh.write(data)  # mtime 0: the same simulation gives the same bytes


def _comm_args(comm: dict, roles: dict) -> dict:
    """PyTorch's collective metadata of one NCCL kernel."""
    group = grp.group_for(roles, comm["role"], comm["group"])
    kind = comm["collective"]
    nelems = int(comm[BYTES]) // 2 if kind != "allreduce_f32" else int(comm[BYTES]) // 4
    if kind == "sendrecv":
        directions = {d for d, _, _ in comm["peers"]}
        name = directions.pop() if len(directions) == 1 else "coalesced"
    else:
        name = NCCL_CALLS[kind][2]
    size = len(comm["group"])
    in_elems, out_elems = nelems, nelems
    if kind == "reducescatter":
        out_elems = nelems // size
    elif kind == "allgather":
        in_elems = nelems // size
    return {
        "Collective name": name,
        "In msg nelems": in_elems,
        "Out msg nelems": out_elems,
        "Group size": size,
        "dtype": "Float" if kind == "allreduce_f32" else DTYPE,
        "In split size": "[]",
        "Out split size": "[]",
        "Process Group Name": group["pg_name"],
        "Process Group Description": group["pg_desc"],
        "Process Group Ranks": str(list(comm["group"])),
    }


def _annotations(comm: dict) -> list[str]:
    if comm["collective"] == "sendrecv":
        return [NCCL_CALLS[d][1] for d, _, _ in comm["peers"]]
    return [NCCL_CALLS[comm["collective"]][1]]
