"""Write one rank's share of the simulated records as a PyTorch profiler (Kineto) Chrome-trace JSON.

The same records as the nsys export of that rank (`writer.write_rank`), in the form PyTorch's
profiler writes them: complete events (`ph: "X"`) with `ts`/`dur` in microseconds (fractional, ns
precision), kernels under their demangled names, `Memcpy HtoD (Host -> Device)` / `Memset (Device)`,
runtime calls without nsys's `_v7000` version suffix, correlation ids in `args.correlation` plus the
`ac2g` flow pair, NVTX ranges as `user_annotation` (step and epoch ranges keep their names, so the
plain-name convention finds them), `distributedInfo` and `deviceProperties`. CUDA synchronisations
become `cuda_sync` rows as PyTorch writes them (pid = device, tid = stream or -1, `cuda_sync_kind`,
the waited event's record correlation id and stream, a flow from the runtime call). MPI calls have no
Kineto counterpart and are left out.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np

from extradeep.io.categories import MEMCPY_LABELS
from extradeep.simulate.program import MPI_DOMAIN
from extradeep.simulate.writer import GPU_NAME, RunColumns

_VERSION_SUFFIX = re.compile(r"_v\d+$")
# CUPTI syncType -> PyTorch's cuda_sync_kind
SYNC_KINDS = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_COLLECTIVES = (("allreduce", "allreduce"), ("allgather", "allgather"), ("broadcast", "broadcast"))
_COPY_TEXT = {"HtoD": "Host -> Device", "DtoH": "Device -> Host", "DtoD": "Device -> Device"}


def _us(ns) -> float:
    return round(float(ns) / 1000.0, 3)


def kineto_name(nsys_name: str) -> str:
    """File name of the Kineto trace beside an nsys export name (`a.p2.r1.mpi0.sqlite` ->
    `a.p2.r1.mpi0.pt.trace.json.gz`)."""
    return nsys_name.removesuffix(".sqlite") + ".pt.trace.json.gz"


def write_kineto_rank(path: Path, cols: RunColumns, rank: int, world_size: int) -> None:
    """One rank's trace (gzip-compressed JSON); cols = RunColumns of the run (shared by its ranks)."""
    pid = 1000 + rank
    events = []
    runtime = cols.subsets["runtime"]
    if runtime:
        start, end, corr = cols("runtime", 1, rank), cols("runtime", 2, rank), cols("runtime", 3, rank)
        for item, s, e, c in zip(runtime, start, end, corr):
            name = _VERSION_SUFFIX.sub("", str(item[0]))
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": name,
                    "pid": pid,
                    "tid": pid,
                    "ts": _us(s),
                    "dur": _us(e - s),
                    "args": {"correlation": int(c)},
                }
            )
            events.append(
                {"ph": "s", "id": int(c), "pid": pid, "tid": pid, "ts": _us(s), "cat": "ac2g", "name": "ac2g"}
            )
    for kind in ("kernel", "memcpy", "memset"):
        events += _gpu_events(cols, kind, rank, world_size)
    events += _syncs(cols, rank, pid)
    events += _annotations(cols, rank, pid)
    events += _autograd_ops(cols, rank, pid)
    events += _memory_events(cols, rank, pid)
    placement = cols.placement
    listed = 1 if placement is None else len(placement.uuids(rank))
    doc = {
        "schemaVersion": 1,
        # the GPUs the process sees: its node's (or only its own, where the exports list only that)
        "deviceProperties": [
            {
                "id": k,
                "name": GPU_NAME,
                "totalGlobalMem": 42505273344,
                "computeMajor": 8,
                "computeMinor": 0,
                "numSms": 108,
                "warpSize": 32,
            }
            for k in range(listed)
        ],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size},
        "traceEvents": events,
        "traceName": str(path),
        "displayTimeUnit": "ms",
    }
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(json.dumps(doc).encode())


def _gpu_events(cols: RunColumns, kind: str, rank: int, world_size: int) -> list[dict]:
    items = cols.subsets[kind]
    if not items:
        return []
    ops = cols.ops
    device = 0 if cols.placement is None else cols.placement.device(rank)
    idx, stream = cols(kind, 0, rank), cols(kind, 1, rank)
    start, end, corr = cols(kind, 2, rank), cols(kind, 3, rank), cols(kind, 4, rank)
    out = []
    for i, sid, s, e, c in zip(idx, stream, start, end, corr):
        op = ops[int(i)]
        args = {"device": device, "stream": int(sid), "correlation": int(c)}
        if kind == "kernel":
            name, cat = op.demangled, "kernel"
            if op.category == "communication":
                args |= _collective_args(op.name, cols.rec.coll_bytes.get(int(c), cols.op_bytes[int(i)]), world_size)
        elif kind == "memcpy":
            label = MEMCPY_LABELS.get(op.copy_kind, "[CUDA memcpy Unknown]")[len("[CUDA memcpy ") : -1]
            name, cat = f"Memcpy {label} ({_COPY_TEXT.get(label, label)})", "gpu_memcpy"
            args["bytes"] = int(cols.op_bytes[int(i)])
        else:
            name, cat = "Memset (Device)", "gpu_memset"
            args["bytes"] = int(cols.op_bytes[int(i)])
        out.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": device,
                "tid": int(sid),
                "ts": _us(s),
                "dur": _us(e - s),
                "args": args,
            }
        )
        out.append(
            {
                "ph": "f",
                "id": int(c),
                "pid": device,
                "tid": int(sid),
                "ts": _us(s),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
    return out


def _collective_args(name: str, nbytes, world_size: int) -> dict:
    """The collective metadata PyTorch (2.1+) records on an NCCL kernel (float32 messages)."""
    low = name.lower()
    coll = next((c for key, c in _COLLECTIVES if key in low), "unknown")
    nelems = int(nbytes) // 4
    return {
        "Collective name": coll,
        "In msg nelems": nelems,
        "Out msg nelems": nelems,
        "Group size": world_size,
        "dtype": "Float",
    }


def _autograd_ops(cols: RunColumns, rank: int, pid: int) -> list[dict]:
    """AccumulateGrad as PyTorch's profiler records it with record_shapes: the engine's outer
    `evaluate_function` op and the inner op with the gradient's shape."""
    offset = 0.0 if cols.offsets is None else float(cols.offsets[rank])
    out = []
    for name, start, end, dims in cols.rec.autograd:
        s, e = float(start[rank]) + offset, float(end[rank]) + offset
        base = {"ph": "X", "cat": "cpu_op", "pid": pid, "tid": pid}
        out.append(
            base | {"name": f"autograd::engine::evaluate_function: {name}", "ts": _us(s), "dur": _us(e - s), "args": {}}
        )
        inner = {"Input Dims": dims, "Input type": ["float"]}
        out.append(base | {"name": name, "ts": _us(s + 200.0), "dur": _us(e - s - 400.0), "args": inner})
    return out


def _memory_events(cols: RunColumns, rank: int, pid: int) -> list[dict]:
    """GPU memory as PyTorch's profiler records it with profile_memory=True: instant `[memory]`
    events with the allocation's size and the device's total allocated bytes."""
    offset = 0.0 if cols.offsets is None else float(cols.offsets[rank])
    out, before = [], None
    for when, total in cols.rec.memory:
        t = float(when[rank]) + offset
        change = int(total - (before if before is not None else 0.0))
        before = total
        args = {"Device Type": 1, "Device Id": 0, "Addr": 0, "Bytes": change, "Total Allocated": int(total)}
        out.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": pid,
                "tid": pid,
                "ts": _us(t),
                "args": args | {"Total Reserved": int(total)},
            }
        )
    return out


def _syncs(cols: RunColumns, rank: int, pid: int) -> list[dict]:
    """cuda_sync rows; a wait names the cudaEventRecord (correlation id, stream) of its event."""
    if not cols.subsets["sync"]:
        return []
    recorded = {}
    if cols.subsets["cuda_event"]:
        for sid, corr, event in zip(
            cols("cuda_event", 0, rank), cols("cuda_event", 1, rank), cols("cuda_event", 2, rank)
        ):
            recorded[int(event)] = (int(corr), int(sid))
    out = []
    device = 0 if cols.placement is None else cols.placement.device(rank)
    for kind, sid, s, e, c, event in zip(*(cols("sync", k, rank) for k in range(6))):
        kind, event = int(kind), int(event)
        stream = int(sid) if kind in (2, 3) else -1
        record_corr, record_stream = recorded.get(event, (-1, -1))
        args = {
            "cuda_sync_kind": SYNC_KINDS.get(kind, "Unknown"),
            "stream": stream,
            "correlation": int(c),
            "device": device,
            "context": 1,
        }
        if kind in (1, 2):
            args |= {
                "wait_on_stream": record_stream,
                "wait_on_cuda_event_record_corr_id": record_corr,
                "wait_on_cuda_event_id": event,
            }
        out.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": args["cuda_sync_kind"],
                "pid": device,
                "tid": stream,
                "ts": _us(s),
                "dur": _us(e - s),
                "args": args,
            }
        )
        out.append(
            {
                "ph": "f",
                "id": int(c),
                "pid": device,
                "tid": stream,
                "ts": _us(s),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
    return out


def _annotations(cols: RunColumns, rank: int, pid: int) -> list[dict]:
    """NVTX push/pop ranges (eventType 59/60) as user annotations on the main thread; MPI-domain
    ranges and instant marks are left out (a Kineto trace has neither)."""
    offset = 0.0 if cols.offsets is None else float(cols.offsets[rank])

    def pick(v) -> float:
        return float(v[rank] if isinstance(v, np.ndarray) else v) + offset

    out = []
    for text, start, end, event_type, _category, domain, _tid, _payload in cols.rec.nvtx:
        if end is None or event_type not in (59, 60) or domain == MPI_DOMAIN:
            continue
        s, e = pick(start), pick(end)
        out.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": str(text),
                "pid": pid,
                "tid": pid,
                "ts": _us(s),
                "dur": _us(e - s),
                "args": {},
            }
        )
    return out
