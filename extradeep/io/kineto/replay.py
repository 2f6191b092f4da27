"""One Kineto trace as the replay's raw frames, the same as `extradeep.io.nsys.replay` gives for an export.

Launches join their GPU work by correlation id; GPU ops keep their stream order; `cuda_sync` rows give
the synchronisations (event sync, stream wait event, stream sync, context sync) and, through
`wait_on_cuda_event_record_corr_id`, the cudaEventRecord call and stream each wait refers to. NCCL
kernels carry their message size where PyTorch recorded the collective's metadata ("In msg nelems"
x dtype size), so collectives match across ranks by order and name and fit alpha-beta models by size.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    CALL_START,
    CATEGORY,
    CORR,
    END,
    EVENT_ID,
    KIND,
    NAME,
    PID,
    QUEUE,
    START,
    STREAM,
    SYNC_TYPE,
)
from extradeep.errors import InputError
from extradeep.io import categories as cat
from extradeep.io.kineto import tables as kt
from extradeep.io.kineto.load import NO_INT, KinetoTrace, load
from extradeep.io.kineto.placement import trace_placement
from extradeep.io.replay import frames_of, process_steps
from extradeep.io.settings import ReaderSettings

MPI_DTYPES = {
    "pid": np.int64,
    "queue": object,
    "is_gpu": bool,
    "kind": object,
    "name": object,
    "category": object,
    "start": np.int64,
    "end": np.int64,
    "corr": np.int64,
    "bytes": float,
}
_GPU_COLUMNS = ["start", "end", "pid", "queue", "correlationId", "name", "kind", "category", "bytes"]


def read_replay(path, settings=None) -> dict:
    """`replay_frames` of one trace file (loaded and parsed once)."""
    return replay_frames(load(path), path, ReaderSettings.from_any(settings))


def replay_frames(trace: KinetoTrace, path, settings) -> dict:
    """The replay's raw frames of one loaded trace (`extradeep.io.replay.FRAME_KEYS`); the placement is
    the trace's node signals (`extradeep.io.kineto.placement.trace_placement`)."""
    pid = _main_pid(trace)
    gpu, runtime = _gpu(trace, pid), _runtime(trace)
    if gpu.empty and runtime.empty:
        raise InputError(
            path,
            "no GPU activity (kernels, memcpy, memset or runtime calls) to replay: "
            "a CPU-only trace; `extradeep inspect` shows what it holds",
        )
    runtime = runtime.assign(pid=pid)
    syncs, records = _syncs(trace, runtime, pid)
    nvtx = kt.nvtx_table(trace).assign(pid=pid)
    steps, ranges, notes = process_steps(nvtx, path, [pid], runtime, settings)
    empty_cpu = pd.DataFrame(
        {
            PID: pd.Series([], dtype=np.int64),
            QUEUE: pd.Series([], dtype=object),
            START: pd.Series([], dtype=np.int64),
            END: pd.Series([], dtype=np.int64),
        }
    )
    mpi = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in MPI_DTYPES.items()})
    notes = list(trace.notes) + notes
    return frames_of(gpu, runtime, syncs, records, steps, ranges, notes, empty_cpu, mpi, [pid], trace_placement(trace))


def _main_pid(trace: KinetoTrace) -> int:
    """The traced process: PyTorch's profiler writes one per trace (GPU rows carry the device as pid)."""
    pids = pd.concat([trace.runtime[PID], trace.cpu[PID]])
    return int(pids.value_counts().idxmax()) if len(pids) else 0


def _queue(device: pd.Series | np.ndarray, stream: pd.Series | np.ndarray) -> pd.Series:
    return "gpu" + pd.Series(device).astype(str).to_numpy() + "/s" + pd.Series(stream).astype(str).to_numpy()


def _gpu(trace: KinetoTrace, pid: int) -> pd.DataFrame:
    """Kernels (short names, as the nsys predictor reads them), memcpy and memset of one trace."""
    g = trace.gpu
    if g.empty:
        return pd.DataFrame({c: [] for c in _GPU_COLUMNS})
    kernel = (g[KIND] == "kernel").to_numpy()
    names = np.where(
        kernel,
        kt.per_distinct_name(kt.short_kernel_name, g[NAME]),
        np.where(g[KIND] == "memcpy", kt.per_distinct_name(kt.memcpy_region, g[NAME]), cat.MEMSET_NAME),
    )
    category = np.where(kernel, cat.kernel_categories(names), cat.MEMORY)
    nccl_bytes = np.where(kernel & (category == cat.COMMUNICATION), g["msg_bytes"], 0)
    out = pd.DataFrame(
        {
            START: g[START].to_numpy(np.int64),
            END: g[END].to_numpy(np.int64),
            PID: pid,
            QUEUE: _queue(g["device"], g[STREAM]),
            "correlationId": g[CORR].to_numpy(np.int64),
            NAME: names.astype(object),
            KIND: g[KIND].to_numpy(object),
            CATEGORY: category.astype(object),
            BYTES: np.where(kernel, nccl_bytes, g[BYTES]).astype(float),
            "deviceId": g["device"].to_numpy(np.int64),
            "streamId": g[STREAM].to_numpy(np.int64),
        }
    )
    return out.sort_values(START, kind="stable", ignore_index=True)


def _runtime(trace: KinetoTrace) -> pd.DataFrame:
    r = trace.runtime
    return pd.DataFrame(
        {
            START: r[START].to_numpy(np.int64),
            END: r[END].to_numpy(np.int64),
            PID: r[PID].to_numpy(np.int64),
            "tid": r["tid"].to_numpy(np.int64),
            "correlationId": r[CORR].to_numpy(np.int64),
            NAME: r[NAME].to_numpy(object),
            QUEUE: "cpu/t" + r["tid"].astype(str),
        }
    )


def _syncs(trace: KinetoTrace, runtime: pd.DataFrame, pid: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(syncs, records) as trace._syncs builds them from the CUPTI tables: each with the start of its
    CPU call; a record row per distinct cudaEventRecord that some wait refers to."""
    s = trace.syncs
    call = runtime.drop_duplicates("correlationId").set_index("correlationId")[START]
    cols = ["pid", "sync_type", "queue", "stream", "event_id", "corr", "call_start"]
    if s.empty:
        empty = pd.DataFrame({c: pd.Series([], dtype=np.int64 if c not in ("queue",) else object) for c in cols})
        return empty, empty.copy()
    syncs = pd.DataFrame(
        {
            PID: pid,
            SYNC_TYPE: s[SYNC_TYPE].to_numpy(np.int64),
            QUEUE: _queue(s["device"], s[STREAM]),
            STREAM: s[STREAM].to_numpy(np.int64),
            EVENT_ID: _event_ids(s),
            CORR: s[CORR].to_numpy(np.int64),
        }
    )
    syncs[CALL_START] = call.reindex(syncs[CORR]).to_numpy()
    rec = s[s["record_corr"].to_numpy() != NO_INT].drop_duplicates("record_corr")
    records = pd.DataFrame(
        {
            PID: pid,
            SYNC_TYPE: 0,
            QUEUE: _queue(rec["device"], rec["record_stream"]),
            STREAM: rec["record_stream"].to_numpy(np.int64),
            EVENT_ID: _event_ids(rec),
            CORR: rec["record_corr"].to_numpy(np.int64),
        }
    )
    records[CALL_START] = call.reindex(records[CORR]).to_numpy()
    out = []
    for f in (syncs, records):
        out.append(f.dropna(subset=["call_start"]).astype({"call_start": np.int64})[cols].reset_index(drop=True))
    return out[0], out[1]


def _event_ids(s: pd.DataFrame) -> np.ndarray:
    """The CUDA event a wait refers to: the record's correlation id where known (unique per record,
    unlike event ids, which CUDA reuses), else the event id."""
    return np.where(s["record_corr"].to_numpy() != NO_INT, s["record_corr"].to_numpy(), s[EVENT_ID].to_numpy())
