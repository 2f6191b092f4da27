"""An export's frames for the trace replay: ops, synchronisations, event records, steps, per process.

A rank is one process (globalPid) of one export: one file per rank as written by `nsys profile` under
MPI, or several processes in one export (the real 2-GPU slice). `replay_frames` reads them from an
open export, reusing the tables the per-step sums already read in the same pass (`extradeep.io.nsys.read`);
`extradeep.predictor.trace.load_trace` turns the frames of a run's files into ranks.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

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
from extradeep.io.frames import NULL_INT, NVTX_RANGE_TYPES, Table
from extradeep.io.nsys import events
from extradeep.io.nsys.layout import read_placement
from extradeep.io.nsys.schema import require_nsys_export
from extradeep.io.replay import frames_of, process_steps
from extradeep.io.settings import ReaderSettings
from extradeep.io.sqlite import open_readonly

# MPI calls every rank makes together; they are synchronised across ranks like NCCL collectives
MPI_COLLECTIVE = re.compile(
    r"^P?MPI_I?(?:Barrier|Allreduce|Allgatherv?|Alltoallv?|Bcast|Reduce|Reduce_scatter"
    r"(?:_block)?|Gatherv?|Scatterv?|Scan|Exscan)$"
)


def _gpu_ops(conn, tables: dict) -> pd.DataFrame:
    """Kernels (short names), memcpy and memset with pid, queue, name, kind, category and bytes."""
    parts = [
        tables["kernels"].assign(kind="kernel", bytes=0.0),
        tables["memcpy"].assign(kind="memcpy", category="memory"),
        tables["memset"].assign(kind="memset", category="memory"),
    ]
    g = (
        pd.concat(
            [p.assign(name=p[NAME].astype(str), category=p[CATEGORY].astype(str)) for p in parts if len(p)],
            ignore_index=True,
        )
        if any(len(p) for p in parts)
        else None
    )
    if g is None:
        return pd.DataFrame(
            columns=["start", "end", "pid", "queue", "correlationId", "name", "kind", "category", "bytes"]
        )
    g[QUEUE] = _gpu_queue(g)
    g[BYTES] = g[BYTES].astype(float)
    return g


def _gpu_queue(frame: pd.DataFrame) -> pd.Series:
    return "gpu" + frame["deviceId"].astype(str) + "/s" + frame["streamId"].astype(str)


def _runtime(r: pd.DataFrame) -> pd.DataFrame:
    return r.assign(name=r[NAME].astype(str), queue="cpu/t" + r["tid"].astype(str))


def _syncs(conn, runtime: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SYNCHRONIZATION rows and CUDA event records, each with the start of its CPU call."""
    call = runtime.drop_duplicates([PID, "correlationId"]).set_index([PID, "correlationId"])[START]
    out = []
    for frame in (events.synchronization(conn), events.cuda_events(conn).assign(syncType=0)):
        f = pd.DataFrame(
            {
                PID: frame[PID],
                SYNC_TYPE: frame["syncType"],
                QUEUE: _gpu_queue(frame),
                STREAM: frame["streamId"],
                EVENT_ID: frame["eventId"],
                CORR: frame["correlationId"],
            }
        )
        f[CALL_START] = call.reindex(pd.MultiIndex.from_arrays([f[PID], f[CORR]])).to_numpy()
        out.append(f.dropna(subset=["call_start"]).astype({"call_start": np.int64}))
    return out[0], out[1]


def _mpi_and_os(mpi: pd.DataFrame, osrt: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MPI collectives as CPU ops (matched across ranks like NCCL kernels), and the waits a CPU
    thread spends in other MPI and OS runtime calls (not CPU overhead)."""
    names = mpi[NAME].astype(str)
    coll = names.str.match(MPI_COLLECTIVE).to_numpy()
    m = mpi[coll]
    ops = pd.DataFrame(
        {
            PID: m[PID],
            QUEUE: "cpu/t" + m["tid"].astype(str),
            "is_gpu": False,
            KIND: "mpi",
            NAME: names[coll],
            CATEGORY: "communication",
            START: m[START],
            END: m[END],
            CORR: -1,
            BYTES: np.where(m[BYTES] == NULL_INT, 0, m[BYTES]).astype(float),
        }
    )
    # pandas 2 warns when an empty frame takes part in a concat
    waits = pd.concat([f for f in (mpi[~coll], osrt) if not f.empty] or [osrt], ignore_index=True)
    return ops, pd.DataFrame(
        {PID: waits[PID], QUEUE: "cpu/t" + waits["tid"].astype(str), START: waits[START], END: waits[END]}
    )


def _nccl_sizes(nv: pd.DataFrame) -> pd.DataFrame:
    """NCCL's own NVTX ranges (ncclAllReduce, ...) that carry the message size as a plain uint64
    payload: pid, tid, start, end, bytes. (Sizes inside NCCL's structured `binaryData` payloads
    are not decoded.)"""
    sized = nv[
        nv["eventType"].isin(NVTX_RANGE_TYPES).to_numpy()
        & (nv[END] != NULL_INT).to_numpy()
        & (nv["uint64Value"] != NULL_INT).to_numpy()
    ]
    return pd.DataFrame(
        {
            PID: sized[PID],
            "tid": sized["tid"],
            START: sized[START],
            END: sized[END],
            BYTES: sized["uint64Value"].astype(float),
        }
    )


def _attach_sizes(gpu: pd.DataFrame, runtime: pd.DataFrame, sizes: pd.DataFrame) -> pd.DataFrame:
    """Bytes of each NCCL kernel from the sized NVTX range around the call that launched it."""
    if sizes.empty or gpu.empty:
        return gpu
    nccl = gpu.index[gpu[NAME].str.startswith("nccl") & (gpu[KIND] == "kernel")]
    calls = runtime.drop_duplicates([PID, "correlationId"]).set_index([PID, "correlationId"])
    key = pd.MultiIndex.from_arrays([gpu.loc[nccl, "pid"], gpu.loc[nccl, "correlationId"]])
    t = calls[START].reindex(key).to_numpy()
    tid = calls["tid"].reindex(key).to_numpy()
    gpu = gpu.copy()
    for (pid, thread), rng in sizes.sort_values(START).groupby([PID, "tid"]):
        mine = np.flatnonzero((gpu.loc[nccl, "pid"].to_numpy() == pid) & (tid == thread))
        k = np.searchsorted(rng[START].to_numpy(), t[mine], side="right") - 1
        ok = (k >= 0) & (t[mine] <= rng[END].to_numpy()[np.maximum(k, 0)])
        gpu.loc[nccl[mine[ok]], BYTES] = rng[BYTES].to_numpy()[k[ok]]
    return gpu


def _rank_pids(gpu: pd.DataFrame, runtime: pd.DataFrame) -> tuple[list, list]:
    """(ranks, helpers): a rank is a process with GPU work (kernels, copies, sets); a process with
    runtime calls only is a helper, unless no process has GPU work (then the callers are replayed)."""
    working = sorted(set(gpu[PID]))
    calling = sorted(set(runtime[PID]))
    if not working:
        return calling, []
    return working, [p for p in calling if p not in set(working)]


def read_replay(path, settings=None) -> dict:
    """`replay_frames` of one export, on its own read-only connection (without the per-step sums)."""
    conn = open_readonly(path)
    try:
        return replay_frames(conn, path, ReaderSettings.from_any(settings))
    except InputError as exc:
        raise (InputError(path, exc.problem) if exc.source is None else exc) from None
    except (sqlite3.Error, UnicodeError) as exc:  # damage that the per-query checks did not see
        raise InputError(path, f"cannot read the export ({exc}); is the file truncated or damaged?") from None
    finally:
        conn.close()


def replay_frames(conn, path, settings, tables: dict | None = None) -> dict:
    """Raw frames of one export, keyed by process id (no rank numbers yet): gpu, runtime, syncs,
    records, steps, ranges, notes, os_calls, mpi, pids, placement (`extradeep.io.replay.FRAME_KEYS`).
    `tables`: what `extradeep.io.nsys.read.read_tables(conn, settings, replay=True)` read in the same
    pass (reused, not read again); `settings`: the reader's step conventions."""
    try:
        require_nsys_export(conn)
    except InputError as exc:
        saved = "saved by extradeep" in exc.problem
        raise InputError(
            path,
            "an extradeep experiment (saved by `extradeep model --save`), not an Nsight "
            "Systems export; give it with --experiment and RUN_DIR as the run's exports"
            if saved
            else exc.problem,
        ) from None
    tables = {k: v for k, v in (tables or {}).items() if isinstance(v, Table)}
    if "kernels" in tables and settings.kernel_names == "short":
        tables["kernels"] = events.kernel_frame(tables["kernels"])
    else:
        tables.pop("kernels", None)
    tables = {k: (v.frame() if isinstance(v, Table) else v) for k, v in tables.items()}
    if "nvtx" not in tables:
        tables["nvtx"] = events.nvtx(conn)
    if "kernels" not in tables:
        tables["kernels"] = events.kernels(conn)  # the replay matches collectives by their short names
    for kind in ("memcpy", "memset", "runtime", "osrt"):
        if kind not in tables:
            tables[kind] = getattr(events, kind)(conn)
    if "mpi" not in tables:
        tables["mpi"] = events.mpi(conn, tables["nvtx"])
    gpu, runtime = _gpu_ops(conn, tables), _runtime(tables["runtime"])
    if gpu.empty and runtime.empty:
        raise InputError(path, "no CUDA activity (kernels, memcpy, memset or runtime calls) to replay")
    pids, helpers = _rank_pids(gpu, runtime)
    notes = []
    if helpers:  # e.g. a launcher or data-loader process that made a few CUDA calls
        pid_list = ", ".join(map(str, helpers[:5]))
        notes.append(
            f"{Path(path).name}: {len(helpers)} process(es) without GPU work (pid {pid_list}) are not "
            "ranks; their runtime calls are left out"
        )
        runtime = runtime[runtime[PID].isin(pids)]
    syncs, records = _syncs(conn, runtime)
    nv = tables["nvtx"]
    steps, ranges, step_notes = process_steps(nv, path, pids, runtime, settings)
    mpi_ops, os_calls = _mpi_and_os(tables["mpi"], tables["osrt"])
    gpu = _attach_sizes(gpu, runtime, _nccl_sizes(nv))
    notes += step_notes
    return frames_of(gpu, runtime, syncs, records, steps, ranges, notes, os_calls, mpi_ops, pids, read_placement(conn))
