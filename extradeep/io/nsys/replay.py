"""One run's per-rank traces as tidy frames: ops, synchronisations, event records, steps.

A rank is one process (globalPid) of one export: one file per rank as written by `nsys profile`
under MPI, or several processes in one export (the real 2-GPU slice). Times stay integer ns on
each file's clock, shifted by one offset per file from collective end times when files come from
separate sessions (`collectives.clock_offsets`).
"""

from __future__ import annotations

import os
import re
import sqlite3
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.io.nsys import events
from extradeep.io.nsys.connect import open_readonly
from extradeep.io.nsys.events import NULL_INT
from extradeep.io.nsys.schema import NVTX_RANGE_TYPES, require_nsys_export
from extradeep.io.nsys.steps import find_steps
from extradeep.io.read import KINETO, profile_format
from extradeep.predictor.kineto_trace import read_trace_file

OP_COLUMNS = ["rank", "queue", "is_gpu", "kind", "name", "category", "start", "end", "corr", "bytes"]
# MPI calls every rank makes together; they are synchronised across ranks like NCCL collectives
MPI_COLLECTIVE = re.compile(
    r"^P?MPI_I?(?:Barrier|Allreduce|Allgatherv?|Alltoallv?|Bcast|Reduce|Reduce_scatter"
    r"(?:_block)?|Gatherv?|Scatterv?|Scan|Exscan)$"
)


@dataclass
class RunTrace:
    """Everything the graph builder needs from one run, as DataFrames (times in ns)."""

    ops: pd.DataFrame  # OP_COLUMNS: runtime calls (CPU) and kernels/memcpy/memset (GPU)
    syncs: pd.DataFrame  # rank, sync_type, queue, event_id, corr, call_start
    records: pd.DataFrame  # rank, queue, event_id, corr, call_start (CUDA event records)
    steps: pd.DataFrame  # rank, warmup, epoch, phase, step, start, end, queue, step_id
    ranges: pd.DataFrame  # rank, queue, name, start, end: NVTX ranges other than step marks
    os_calls: pd.DataFrame  # rank, queue, start, end: OS runtime calls (waits, I/O) on CPU threads
    files: pd.DataFrame = field(default_factory=pd.DataFrame)  # rank, path, pid, offset_ns
    problems: list[str] = field(default_factory=list)  # skipped files, unusable marks


def _gpu_ops(conn) -> pd.DataFrame:
    """Kernels, memcpy and memset with pid, queue, name, kind, category and bytes."""
    k = events.kernels(conn)
    parts = [
        k.assign(kind="kernel", bytes=0.0),
        events.memcpy(conn).assign(kind="memcpy", category="memory"),
        events.memset(conn).assign(kind="memset", category="memory"),
    ]
    g = (
        pd.concat(
            [p.assign(name=p["name"].astype(str), category=p["category"].astype(str)) for p in parts if len(p)],
            ignore_index=True,
        )
        if any(len(p) for p in parts)
        else None
    )
    if g is None:
        return pd.DataFrame(
            columns=["start", "end", "pid", "queue", "correlationId", "name", "kind", "category", "bytes"]
        )
    g["queue"] = _gpu_queue(g)
    g["bytes"] = g["bytes"].astype(float)
    return g


def _gpu_queue(frame: pd.DataFrame) -> pd.Series:
    return "gpu" + frame["deviceId"].astype(str) + "/s" + frame["streamId"].astype(str)


def _runtime(conn) -> pd.DataFrame:
    r = events.runtime(conn)
    return r.assign(name=r["name"].astype(str), queue="cpu/t" + r["tid"].astype(str))


def _syncs(conn, runtime: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SYNCHRONIZATION rows and CUDA event records, each with the start of its CPU call."""
    call = runtime.drop_duplicates(["pid", "correlationId"]).set_index(["pid", "correlationId"])["start"]
    out = []
    for frame in (events.synchronization(conn), events.cuda_events(conn).assign(syncType=0)):
        f = pd.DataFrame(
            {
                "pid": frame["pid"],
                "sync_type": frame["syncType"],
                "queue": _gpu_queue(frame),
                "stream": frame["streamId"],
                "event_id": frame["eventId"],
                "corr": frame["correlationId"],
            }
        )
        f["call_start"] = call.reindex(pd.MultiIndex.from_arrays([f["pid"], f["corr"]])).to_numpy()
        out.append(f.dropna(subset=["call_start"]).astype({"call_start": np.int64}))
    return out[0], out[1]


def _steps(nv: pd.DataFrame, path, pids, runtime: pd.DataFrame, settings=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Kept NVTX steps per process (extradeep.io.nsys.steps), with the thread that marked them, and
    the other NVTX ranges (framework ops, for the T1-T3 overheads).

    An export without step marks gives no steps: the replay then compares whole-trace spans.
    """
    parts, others, notes = [], [], []
    for pid in pids:
        mine = nv[nv["pid"] == pid].reset_index(drop=True)
        is_range = mine["eventType"].isin(NVTX_RANGE_TYPES).to_numpy() & (mine["end"] != NULL_INT).to_numpy()
        try:
            table = find_steps(mine, settings, source=path)
        except InputError as exc:
            table = None
            if not exc.problem.startswith(("no step marks", "no NVTX ranges")):
                notes.append(f"{path} (pid {pid}): step marks not used ({exc.problem})")
        used = np.zeros(len(mine), dtype=bool)
        if table is not None:
            used[table.mark_rows] = True
        op = mine[is_range & ~used]
        others.append(
            pd.DataFrame(
                {
                    "pid": pid,
                    "queue": "cpu/t" + op["tid"].astype(str),
                    "name": op["name"].astype(str),
                    "start": op["start"],
                    "end": op["end"],
                }
            )
        )
        if table is None:
            continue
        rows = mine.iloc[table.mark_rows]
        tid_at = dict(zip(rows["start"], rows["tid"]))
        main = _main_thread(runtime[runtime["pid"] == pid], pid)
        st = pd.concat([table.steps.assign(warmup=False), table.warmup.assign(warmup=True)], ignore_index=True)
        st = st.assign(pid=pid)
        st["queue"] = ["cpu/t" + str(tid_at.get(t, main)) for t in st["start"]]
        parts.append(st)
    cols = ["pid", "warmup", "epoch", "phase", "step", "start", "end", "queue"]
    steps = pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
    return steps, pd.concat(others, ignore_index=True), notes


def _main_thread(runtime: pd.DataFrame, pid: int) -> int:
    return int(runtime["tid"].value_counts().idxmax()) if len(runtime) else int(pid)


def _mpi_and_os(conn) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MPI collectives as CPU ops (matched across ranks like NCCL kernels), and the waits a CPU
    thread spends in other MPI and OS runtime calls (not CPU overhead)."""
    mpi, osrt = events.mpi(conn), events.osrt(conn)
    names = mpi["name"].astype(str)
    coll = names.str.match(MPI_COLLECTIVE).to_numpy()
    m = mpi[coll]
    ops = pd.DataFrame(
        {
            "pid": m["pid"],
            "queue": "cpu/t" + m["tid"].astype(str),
            "is_gpu": False,
            "kind": "mpi",
            "name": names[coll],
            "category": "communication",
            "start": m["start"],
            "end": m["end"],
            "corr": -1,
            "bytes": np.where(m["bytes"] == NULL_INT, 0, m["bytes"]).astype(float),
        }
    )
    waits = pd.concat([mpi[~coll], osrt], ignore_index=True)
    return ops, pd.DataFrame(
        {"pid": waits["pid"], "queue": "cpu/t" + waits["tid"].astype(str), "start": waits["start"], "end": waits["end"]}
    )


def _nccl_sizes(nv: pd.DataFrame) -> pd.DataFrame:
    """NCCL's own NVTX ranges (ncclAllReduce, ...) that carry the message size as a plain uint64
    payload: pid, tid, start, end, bytes. (Sizes inside NCCL's structured `binaryData` payloads
    are not decoded.)"""
    sized = nv[
        nv["eventType"].isin(NVTX_RANGE_TYPES).to_numpy()
        & (nv["end"] != NULL_INT).to_numpy()
        & (nv["uint64Value"] != NULL_INT).to_numpy()
    ]
    return pd.DataFrame(
        {
            "pid": sized["pid"],
            "tid": sized["tid"],
            "start": sized["start"],
            "end": sized["end"],
            "bytes": sized["uint64Value"].astype(float),
        }
    )


def _attach_sizes(gpu: pd.DataFrame, runtime: pd.DataFrame, sizes: pd.DataFrame) -> pd.DataFrame:
    """Bytes of each NCCL kernel from the sized NVTX range around the call that launched it."""
    if sizes.empty or gpu.empty:
        return gpu
    nccl = gpu.index[gpu["name"].str.startswith("nccl") & (gpu["kind"] == "kernel")]
    calls = runtime.drop_duplicates(["pid", "correlationId"]).set_index(["pid", "correlationId"])
    key = pd.MultiIndex.from_arrays([gpu.loc[nccl, "pid"], gpu.loc[nccl, "correlationId"]])
    t = calls["start"].reindex(key).to_numpy()
    tid = calls["tid"].reindex(key).to_numpy()
    gpu = gpu.copy()
    for (pid, thread), rng in sizes.sort_values("start").groupby(["pid", "tid"]):
        mine = np.flatnonzero((gpu.loc[nccl, "pid"].to_numpy() == pid) & (tid == thread))
        k = np.searchsorted(rng["start"].to_numpy(), t[mine], side="right") - 1
        ok = (k >= 0) & (t[mine] <= rng["end"].to_numpy()[np.maximum(k, 0)])
        gpu.loc[nccl[mine[ok]], "bytes"] = rng["bytes"].to_numpy()[k[ok]]
    return gpu


def _rank_pids(gpu: pd.DataFrame, runtime: pd.DataFrame) -> tuple[list, list]:
    """(ranks, helpers): a rank is a process with GPU work (kernels, copies, sets); a process with
    runtime calls only is a helper, unless no process has GPU work (then the callers are replayed)."""
    working = sorted(set(gpu["pid"]))
    calling = sorted(set(runtime["pid"]))
    if not working:
        return calling, []
    return working, [p for p in calling if p not in set(working)]


def read_file(path: str | Path, settings=None) -> dict:
    """Raw frames of one export, keyed by process id (no rank numbers yet); `settings`: the
    reader's step conventions (`extradeep.io.nsys.settings.ReaderSettings`, dict or None). Kineto
    traces (by content) give the same frames (`extradeep.predictor.kineto_trace`)."""
    if profile_format(path) == KINETO:
        return read_trace_file(path, settings, _steps)
    conn = open_readonly(path)
    try:
        return _raw_frames(conn, path, settings)
    except InputError as exc:
        raise (InputError(path, exc.problem) if exc.source is None else exc) from None
    except (sqlite3.Error, UnicodeError) as exc:  # damage that the per-query checks did not see
        raise InputError(path, f"cannot read the export ({exc}); is the file truncated or damaged?") from None
    finally:
        conn.close()


def _raw_frames(conn, path, settings) -> dict:
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
    gpu, runtime = _gpu_ops(conn), _runtime(conn)
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
        runtime = runtime[runtime["pid"].isin(pids)]
    syncs, records = _syncs(conn, runtime)
    nv = events.nvtx(conn)
    steps, ranges, step_notes = _steps(nv, path, pids, runtime, settings)
    mpi_ops, os_calls = _mpi_and_os(conn)
    gpu = _attach_sizes(gpu, runtime, _nccl_sizes(nv))
    return {
        "gpu": gpu.rename(columns={"correlationId": "corr"}),
        "runtime": runtime.rename(columns={"correlationId": "corr"}),
        "syncs": syncs,
        "records": records,
        "steps": steps,
        "ranges": ranges,
        "notes": notes + step_notes,
        "os_calls": os_calls,
        "mpi": mpi_ops,
        "pids": pids,
    }


def _read_or_problem(path: Path, settings=None):
    try:
        return read_file(path, settings)
    except InputError as exc:  # skip the file, go on, report at the end
        return f"skipped {exc}"


def _read_files(paths: list[Path], jobs: int | None, settings=None) -> list:
    """read_file of every path, in worker processes when there are several files and cores."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(paths)))
    if jobs == 1 or len(paths) < 4:
        return [_read_or_problem(p, settings) for p in paths]
    from extradeep.io.execute import pool_context

    with ProcessPoolExecutor(max_workers=jobs, mp_context=pool_context()) as pool:
        return list(pool.map(_read_or_problem, paths, [settings] * len(paths)))


def load_trace(paths, jobs: int | None = None, settings=None) -> RunTrace:
    """RunTrace of the exports of one run (one file per rank, or several processes per file);
    `jobs` worker processes read the files (default: one per core); `settings`: the step
    conventions (`extradeep.io.nsys.settings.ReaderSettings`, dict or None for the defaults)."""
    from extradeep.predictor.collectives import clock_offsets

    paths = sorted((Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)), key=_natural_key)
    ops, syncs, records, steps, ranges, os_calls, files, problems = [], [], [], [], [], [], [], []
    for path, raw in zip(paths, _read_files(paths, jobs, settings)):
        if isinstance(raw, str):
            problems.append(raw)
            continue
        problems += raw["notes"]
        for pid in raw["pids"]:
            rank = len(files)
            files.append({"rank": rank, "path": str(path), "pid": int(pid)})
            ops += _rank_ops(raw, pid, rank)
            for key, out in (
                ("syncs", syncs),
                ("records", records),
                ("steps", steps),
                ("ranges", ranges),
                ("os_calls", os_calls),
            ):
                f = raw[key]
                out.append(f[f["pid"] == pid].drop(columns=["pid"]).assign(rank=rank))
    if not ops:
        raise InputError(None, "no usable export: " + "; ".join(problems))
    ops = pd.concat(ops, ignore_index=True)[OP_COLUMNS]
    syncs, records = (_rank_queues(pd.concat(f, ignore_index=True), ops) for f in (syncs, records))
    files = pd.DataFrame(files)
    offsets = clock_offsets(ops, dict(zip(files["rank"], files["path"])))
    files["offset_ns"] = files["path"].map(offsets).astype(np.int64)
    shift = files.set_index("rank")["offset_ns"]
    ops["start"] -= shift.reindex(ops["rank"]).to_numpy()
    ops["end"] -= shift.reindex(ops["rank"]).to_numpy()
    steps = _aligned(pd.concat(steps, ignore_index=True), shift, ("start", "end"))
    steps["step_id"] = np.arange(len(steps))
    return RunTrace(
        ops=ops,
        syncs=_aligned(syncs, shift, ("call_start",)),
        records=_aligned(records, shift, ("call_start",)),
        steps=steps,
        ranges=_aligned(pd.concat(ranges, ignore_index=True), shift, ("start", "end")),
        os_calls=_aligned(pd.concat(os_calls, ignore_index=True), shift, ("start", "end")),
        files=files,
        problems=problems,
    )


def _rank_queues(frame: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """Name sync/record streams like the rank's GPU queues: their deviceId is not always the
    kernels' (the real 2-GPU slice reports device 0 for both processes), the stream id is."""
    gpu = ops[ops["is_gpu"]].drop_duplicates(["rank", "queue"])
    by_stream = dict(zip(zip(gpu["rank"], gpu["queue"].str.rsplit("/s", n=1).str[1].astype(int)), gpu["queue"]))
    keys = zip(frame["rank"], frame["stream"].astype(int))
    return frame.assign(queue=[by_stream.get(k, q) for k, q in zip(keys, frame["queue"])])


def _aligned(frame: pd.DataFrame, shift: pd.Series, cols) -> pd.DataFrame:
    frame = frame.copy()
    for c in cols:
        frame[c] = frame[c].astype(np.int64) - shift.reindex(frame["rank"]).to_numpy()
    return frame


def _rank_ops(raw: dict, pid: int, rank: int) -> list[pd.DataFrame]:
    g = raw["gpu"][raw["gpu"]["pid"] == pid]
    r = raw["runtime"][raw["runtime"]["pid"] == pid]
    gpu = g.assign(rank=rank, is_gpu=True, name=g["name"].fillna("?"))
    cpu = r.assign(rank=rank, is_gpu=False, kind="runtime", category="cuda_api", bytes=0.0, name=r["name"].fillna("?"))
    mpi = raw["mpi"][raw["mpi"]["pid"] == pid].assign(rank=rank)
    return [gpu[OP_COLUMNS], cpu[OP_COLUMNS], mpi[OP_COLUMNS]]


def _natural_key(path: Path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]
