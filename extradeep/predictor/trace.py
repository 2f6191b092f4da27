"""One run's per-rank traces as tidy frames: ops, synchronisations, event records, steps.

A rank is one process (globalPid) of one export: one file per rank as written by `nsys profile`
under MPI, or several processes in one export (the real 2-GPU slice). The files are read by
`extradeep.io.read.read_replay_frames` (nsys exports and Kineto traces, by content); here their frames
become ranks, and times stay integer ns on each file's clock, shifted by one offset per file from
collective end times when files come from separate sessions (`collectives.clock_offsets`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    CATEGORY,
    CORR,
    END,
    IS_GPU,
    KIND,
    NAME,
    OFFSET_NS,
    PATH,
    PID,
    QUEUE,
    RANK,
    START,
    STEP_ID,
    STREAM,
)
from extradeep.errors import InputError
from extradeep.io.read import read_replay_frames

OP_COLUMNS = [RANK, QUEUE, IS_GPU, KIND, NAME, CATEGORY, START, END, CORR, BYTES]


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
    placements: dict = field(default_factory=dict)  # path -> its placement (extradeep.io.placement)


def _read_or_problem(path: Path, settings=None):
    try:
        return read_replay_frames(path, settings)
    except InputError as exc:  # skip the file, go on, report at the end
        return f"skipped {exc}"


def _read_files(paths: list[Path], jobs: int | None, settings=None) -> list:
    """The replay frames of every path, in worker processes when there are several files and cores."""
    from extradeep.processes import process_pool, usable_cpus

    jobs = max(1, min(jobs or usable_cpus(), len(paths)))
    if jobs == 1 or len(paths) < 4:
        return [_read_or_problem(p, settings) for p in paths]
    with process_pool(jobs) as pool:
        return list(pool.map(_read_or_problem, paths, [settings] * len(paths)))


def load_trace(paths, jobs: int | None = None, settings=None, frames: dict | None = None) -> RunTrace:
    """RunTrace of the exports of one run (one file per rank, or several processes per file);
    `jobs` worker processes read the files (default: one per core); `settings`: the step
    conventions (`extradeep.io.settings.ReaderSettings`, dict or None for the defaults). `frames`:
    {path: replay frames} already read (`extradeep.io.read.read_once(..., replay=True)`); only the
    other paths are read."""
    from extradeep.predictor.collectives import clock_offsets

    paths = sorted((Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)), key=_natural_key)
    given = {str(p): raw for p, raw in (frames or {}).items()}
    missing = [p for p in paths if str(p) not in given]
    given.update(zip(map(str, missing), _read_files(missing, jobs, settings)))
    ops, syncs, records, steps, ranges, os_calls, files, problems = [], [], [], [], [], [], [], []
    placements = {}
    for path in paths:
        raw = given[str(path)]
        if isinstance(raw, str):
            problems.append(raw)
            continue
        problems += raw["notes"]
        placements[str(path)] = raw.get("placement")
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
                out.append(f[f[PID] == pid].drop(columns=[PID]).assign(rank=rank))
    if not ops:
        raise InputError(None, "no usable export: " + "; ".join(problems))
    ops = pd.concat(ops, ignore_index=True)[OP_COLUMNS]
    syncs, records = (_rank_queues(pd.concat(f, ignore_index=True), ops) for f in (syncs, records))
    files = pd.DataFrame(files)
    offsets = clock_offsets(ops, dict(zip(files[RANK], files[PATH])))
    files[OFFSET_NS] = files[PATH].map(offsets).astype(np.int64)
    shift = files.set_index(RANK)[OFFSET_NS]
    ops[START] -= shift.reindex(ops[RANK]).to_numpy()
    ops[END] -= shift.reindex(ops[RANK]).to_numpy()
    steps = _aligned(pd.concat(steps, ignore_index=True), shift, ("start", "end"))
    steps[STEP_ID] = np.arange(len(steps))
    return RunTrace(
        ops=ops,
        syncs=_aligned(syncs, shift, ("call_start",)),
        records=_aligned(records, shift, ("call_start",)),
        steps=steps,
        ranges=_aligned(pd.concat(ranges, ignore_index=True), shift, ("start", "end")),
        os_calls=_aligned(pd.concat(os_calls, ignore_index=True), shift, ("start", "end")),
        files=files,
        problems=problems,
        placements=placements,
    )


def _rank_queues(frame: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """Name sync/record streams like the rank's GPU queues: their deviceId is not always the
    kernels' (the real 2-GPU slice reports device 0 for both processes), the stream id is."""
    gpu = ops[ops[IS_GPU]].drop_duplicates([RANK, QUEUE])
    by_stream = dict(zip(zip(gpu[RANK], gpu[QUEUE].str.rsplit("/s", n=1).str[1].astype(int)), gpu[QUEUE]))
    keys = zip(frame[RANK], frame[STREAM].astype(int))
    return frame.assign(queue=[by_stream.get(k, q) for k, q in zip(keys, frame[QUEUE])])


def _aligned(frame: pd.DataFrame, shift: pd.Series, cols) -> pd.DataFrame:
    frame = frame.copy()
    for c in cols:
        frame[c] = frame[c].astype(np.int64) - shift.reindex(frame[RANK]).to_numpy()
    return frame


def _rank_ops(raw: dict, pid: int, rank: int) -> list[pd.DataFrame]:
    g = raw["gpu"][raw["gpu"][PID] == pid]
    r = raw["runtime"][raw["runtime"][PID] == pid]
    gpu = g.assign(rank=rank, is_gpu=True, name=g[NAME].fillna("?"))
    cpu = r.assign(rank=rank, is_gpu=False, kind="runtime", category="cuda_api", bytes=0.0, name=r[NAME].fillna("?"))
    mpi = raw["mpi"][raw["mpi"][PID] == pid].assign(rank=rank)
    return [gpu[OP_COLUMNS], cpu[OP_COLUMNS], mpi[OP_COLUMNS]]


def _natural_key(path: Path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]
