"""One run's per-rank traces as tidy frames: ops, synchronisations, event records, steps.

A rank is one process (globalPid) of one export: one file per rank as written by `nsys profile`
under MPI, or several processes in one export (the real 2-GPU slice). Times stay integer ns on
each file's clock, shifted by one offset per file from collective end times when files come from
separate sessions (`collectives.clock_offsets`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.nsys.categories import MEMSET_NAME, kernel_categories, memcpy_label
from extradeep.nsys.connect import open_readonly, query
from extradeep.nsys.schema import schema_of

OP_COLUMNS = ["rank", "queue", "is_gpu", "kind", "name", "category", "start", "end", "corr", "bytes"]
_STEP = re.compile(r"^(?:(?P<train>train(?:ing)?[_ ]step|ProfilerStep#?)|(?P<val>(?:test|val|testing|validation)[_ ]step))\s*#?\s*(?P<n>\d+)$",
                   re.IGNORECASE)
_EPOCH = re.compile(r"^epoch[_ :]?\s*(?P<n>\d+)$", re.IGNORECASE)


@dataclass
class RunTrace:
    """Everything the graph builder needs from one run, as DataFrames (times in ns)."""

    ops: pd.DataFrame        # OP_COLUMNS: runtime calls (CPU) and kernels/memcpy/memset (GPU)
    syncs: pd.DataFrame      # rank, sync_type, queue, event_id, corr, call_start
    records: pd.DataFrame    # rank, queue, event_id, corr, call_start (CUDA event records)
    steps: pd.DataFrame      # rank, epoch, phase, step, start, end, queue, step_id
    files: pd.DataFrame = field(default_factory=pd.DataFrame)  # rank, path, pid, offset_ns


def _pid(gid) -> np.ndarray:
    return (np.asarray(gid, dtype=np.int64) >> 24) & 0xFFFFFF


def _tid(gid) -> np.ndarray:
    return np.asarray(gid, dtype=np.int64) & 0xFFFFFF


def _frame(conn, sql: str, columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(query(conn, sql).fetchall(), columns=columns)


def _gpu_ops(conn, schema) -> pd.DataFrame:
    """Kernels, memcpy and memset with pid, queue, name, category and bytes."""
    parts = []
    cols = ["start", "end", "dev", "stream", "corr", "gpid"]
    base = "start, end, deviceId, streamId, correlationId, globalPid"
    if schema.has("CUPTI_ACTIVITY_KIND_KERNEL"):
        k = _frame(conn, f"SELECT {base}, s.value "
                         "FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.shortName",
                   cols + ["name"])
        parts.append(k.assign(kind="kernel", category=kernel_categories(k["name"].fillna("?")), bytes=0.0))
    if schema.has("CUPTI_ACTIVITY_KIND_MEMCPY"):
        m = _frame(conn, f"SELECT {base}, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY", cols + ["bytes", "ck"])
        m["name"] = [memcpy_label(int(c)) for c in m.pop("ck")]
        parts.append(m.assign(kind="memcpy", category="memory"))
    if schema.has("CUPTI_ACTIVITY_KIND_MEMSET"):
        m = _frame(conn, f"SELECT {base}, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET", cols + ["bytes"])
        parts.append(m.assign(kind="memset", category="memory", name=MEMSET_NAME))
    if not parts:
        return pd.DataFrame(columns=cols + ["name", "kind", "category", "bytes", "pid", "queue"])
    g = pd.concat(parts, ignore_index=True)
    g["pid"] = _pid(g["gpid"])
    g["queue"] = "gpu" + g["dev"].astype(str) + "/s" + g["stream"].astype(str)
    g["bytes"] = g["bytes"].astype(float)
    return g


def _runtime(conn, schema) -> pd.DataFrame:
    if not schema.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return pd.DataFrame(columns=["start", "end", "gtid", "corr", "name", "pid", "queue"])
    r = _frame(conn, "SELECT r.start, r.end, r.globalTid, r.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                     "LEFT JOIN StringIds s ON s.id = r.nameId", ["start", "end", "gtid", "corr", "name"])
    r["pid"] = _pid(r["gtid"])
    r["queue"] = "cpu/t" + pd.Series(_tid(r["gtid"]), index=r.index).astype(str)
    return r


def _syncs(conn, schema, runtime: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SYNCHRONIZATION rows and CUDA event records, each with the start of its CPU call."""
    call = runtime.drop_duplicates(["pid", "corr"]).set_index(["pid", "corr"])["start"]
    out = []
    for table, extra in (("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "syncType"), ("CUPTI_ACTIVITY_KIND_CUDA_EVENT", "0")):
        if not schema.has(table):
            out.append(pd.DataFrame(columns=["pid", "sync_type", "queue", "event_id", "corr", "call_start"]))
            continue
        f = _frame(conn, f"SELECT deviceId, streamId, correlationId, globalPid, eventId, {extra} FROM {table}",
                   ["dev", "stream", "corr", "gpid", "event_id", "sync_type"])
        f["pid"] = _pid(f["gpid"])
        f["queue"] = "gpu" + f["dev"].astype(str) + "/s" + f["stream"].astype(str)
        f["call_start"] = call.reindex(pd.MultiIndex.from_arrays([f["pid"], f["corr"]])).to_numpy()
        out.append(f.dropna(subset=["call_start"]).astype({"call_start": np.int64}))
    return out[0], out[1]


def _step_ranges(conn, schema) -> pd.DataFrame:
    """NVTX step ranges (train/val step N, ProfilerStep#N) with their epoch, pid and thread."""
    cols = ["start", "end", "gtid", "name"]
    if not schema.has("NVTX_EVENTS"):
        return pd.DataFrame(columns=cols)
    n = _frame(conn, "SELECT n.start, n.end, n.globalTid, coalesce(n.text, s.value) FROM NVTX_EVENTS n "
                     "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL",
               cols)
    names = n["name"].fillna("")
    return n[names.str.match(_STEP) | names.str.match(_EPOCH)]


def _steps_of(ranges: pd.DataFrame) -> pd.DataFrame:
    names = ranges["name"].fillna("")
    epochs = ranges[names.str.match(_EPOCH)]
    parsed = names.str.extract(_STEP)
    steps = ranges[parsed["n"].notna()].copy()
    steps["phase"] = np.where(parsed.loc[steps.index, "val"].notna(), "val", "train")
    steps["step"] = parsed.loc[steps.index, "n"].astype(int)
    steps["epoch"] = 0
    for e in epochs.itertuples(index=False):
        inside = (steps["start"] >= e.start) & (steps["end"] <= e.end) & (steps["pid"] == _pid(e.gtid))
        steps.loc[inside, "epoch"] = int(_EPOCH.match(e.name)["n"])
    steps["queue"] = "cpu/t" + pd.Series(_tid(steps["gtid"]), index=steps.index).astype(str)
    return steps[["pid", "epoch", "phase", "step", "start", "end", "queue"]]


def read_file(path: str | Path) -> dict:
    """Raw frames of one export, keyed by process id (no rank numbers yet)."""
    conn = open_readonly(path)
    try:
        schema = schema_of(conn)
        gpu, runtime = _gpu_ops(conn, schema), _runtime(conn, schema)
        if gpu.empty and runtime.empty:
            raise InputError(path, "no CUDA activity (kernels, memcpy, memset or runtime calls) to replay")
        syncs, records = _syncs(conn, schema, runtime)
        ranges = _step_ranges(conn, schema)
        ranges["pid"] = _pid(ranges["gtid"])
        steps = _steps_of(ranges)
    finally:
        conn.close()
    if (gpu["end"] < gpu["start"]).any() or (runtime["end"] < runtime["start"]).any():
        raise InputError(path, "events with negative durations (end before start)")
    return {"gpu": gpu, "runtime": runtime, "syncs": syncs, "records": records, "steps": steps}


def load_trace(paths) -> RunTrace:
    """RunTrace of the exports of one run (one file per rank, or several processes per file)."""
    from extradeep.predictor.collectives import clock_offsets

    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    ops, syncs, records, steps, files = [], [], [], [], []
    for path in sorted(paths, key=_natural_key):
        raw = read_file(path)
        pids = sorted(set(raw["gpu"]["pid"]) | set(raw["runtime"]["pid"]))
        for pid in pids:
            rank = len(files)
            files.append({"rank": rank, "path": str(path), "pid": int(pid)})
            ops += _rank_ops(raw, pid, rank)
            for key, out in (("syncs", syncs), ("records", records), ("steps", steps)):
                f = raw[key]
                out.append(f[f["pid"] == pid].drop(columns=["pid"]).assign(rank=rank))
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
    return RunTrace(ops=ops, syncs=_aligned(syncs, shift, ("call_start",)),
                    records=_aligned(records, shift, ("call_start",)),
                    steps=steps, files=files)


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
    cpu = r.assign(rank=rank, is_gpu=False, kind="runtime", category="cuda_api", bytes=0.0,
                   name=r["name"].fillna("?"))
    return [gpu[OP_COLUMNS], cpu[OP_COLUMNS]]


def _natural_key(path: Path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]
