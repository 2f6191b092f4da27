"""ProfileFacts of an Nsight Systems export.

An export names no process groups, but NCCL's NVTX ranges do when NCCL is new enough (2.23+): the
`ncclCommInitRank*` / `ncclCommSplit` range carries the new communicator's id, its size and this
rank's place in it, and every collective's range the communicator id and message size (`binaryData`,
laid out as `NVTX_PAYLOAD_SCHEMA_ENTRIES` describes; the entries' offsets are read from that table).
Older NCCL puts only the message size in `uint64Value`. A collective range is matched to the kernel
whose launch it encloses (grouped send/recv: every range since the previous NCCL launch on that
thread). Without NCCL ranges each process group's NCCL stream stands for the group. The rank comes
from `MPI_RANKS` when the run used MPI; the recorded memory from `CUDA_GPU_MEMORY_USAGE_EVENTS`
(`--cuda-memory-usage=true`); the GPU's mean board power in the steps from `GPU_METRICS` power
samples (`extradeep.io.nsys.power`).
"""

from __future__ import annotations

import struct
from collections import Counter

import numpy as np
import pandas as pd

from extradeep.columns import BYTES, END, KIND, LAUNCH, NAME, PID, START, STREAM, THREAD
from extradeep.errors import InputError
from extradeep.io.nsys import events
from extradeep.io.nsys.power import SAMPLES, mean_power, power_samples
from extradeep.io.nsys.schema import require_nsys_export, schema_of
from extradeep.io.parallel.facts import (
    Communicator,
    ProfileFacts,
    collective_of,
    step_windows,
    thread_roles,
    whole_buffer,
)
from extradeep.io.settings import ReaderSettings
from extradeep.io.sqlite import fetch_all, open_readonly
from extradeep.io.steps import find_steps

MEMORY_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
DEVICE_MEMORY_KIND, DEALLOCATION = 2, 1
# NCCL's payload layout (src/include/nvtx_payload_schemas.h) where the export has no schema entries
DEFAULT_OFFSETS = {"NCCL communicator ID": 0, "Message size [bytes]": 8, "No. of ranks": 8, "Rank": 12, "Peer rank": 16}
_GPU_COLUMNS = ["streamId", "correlationId", "pid", "deviceId"]


def nsys_facts(path, settings=None) -> ProfileFacts:
    settings = ReaderSettings.from_any(settings)
    conn = open_readonly(path)
    try:
        require_nsys_export(conn)
        return _facts(conn, path, settings)
    except InputError as exc:
        raise InputError(path, exc.problem) if exc.source is None else exc from None
    finally:
        conn.close()


def _facts(conn, path, settings) -> ProfileFacts:
    facts = ProfileFacts(str(path), "nsys")
    nvtx = events.nvtx(conn)
    try:
        table = find_steps(nvtx, settings, path)
        facts.steps = step_windows(table)
    except InputError as exc:
        facts.notes.append(f"no training steps: {exc.problem}")
    facts.markers = Counter(nvtx[NAME].astype(str))
    runtime = events.runtime(conn)
    main_pid, main_tid = _main_thread(nvtx, facts.steps, runtime)
    kernels = _kernels(conn, runtime, main_pid, main_tid)
    pids = set(kernels["pid_"])
    facts.processes = max(len(pids), 1)
    if len(pids) > 1:
        facts.notes.append(
            f"{len(pids)} processes with GPU work in one export: read as one rank each; parts are those of "
            f"the process with the step marks (pid {main_pid})"
        )
    _nccl_ranges(conn, facts, kernels, main_pid)
    facts.kernels = kernels[kernels["pid_"] == main_pid].drop(columns="pid_").reset_index(drop=True)
    _rank(conn, facts)
    _gpu(conn, facts)
    _memory(conn, facts)
    _power(conn, facts)
    facts.notes += list(dict.fromkeys(conn.warnings))
    return facts


def _main_thread(nvtx: pd.DataFrame, steps: pd.DataFrame, runtime: pd.DataFrame) -> tuple[int, int]:
    """(pid, tid) of the thread holding the step marks, else the one with the most runtime calls."""
    if len(steps):
        rows = nvtx[nvtx[START].isin(steps[START])]
        if len(rows):
            return int(rows[PID].iloc[0]), int(rows["tid"].iloc[0])
    if len(runtime):
        top = runtime.groupby([PID, "tid"]).size().idxmax()
        return int(top[0]), int(top[1])
    return -1, -1


def _kernels(conn, runtime: pd.DataFrame, main_pid: int, main_tid: int) -> pd.DataFrame:
    short = events.kernels(conn, "short", columns=_GPU_COLUMNS)
    full = events.kernels(conn, "demangled", columns=[])
    parts = [short.assign(kind="kernel", name=full[NAME].astype(str).to_numpy(), short=short[NAME].astype(str))]
    for kind, frame in (
        ("memcpy", events.memcpy(conn, columns=_GPU_COLUMNS)),
        ("memset", events.memset(conn, columns=_GPU_COLUMNS)),
    ):
        parts.append(frame.assign(kind=kind, name=frame[NAME].astype(str), short=frame[NAME].astype(str)))
    gpu = pd.concat(
        [
            p[
                ["start", "end", "streamId", "correlationId", "pid", "kind", "name", "short"]
                + (["bytes"] if "bytes" in p else [])
            ]
            for p in parts
        ],
        ignore_index=True,
    )
    gpu[BYTES] = gpu[BYTES].fillna(0).astype(np.int64) if "bytes" in gpu else 0
    calls = runtime.drop_duplicates([PID, "correlationId"]).set_index([PID, "correlationId"])
    key = pd.MultiIndex.from_arrays([gpu[PID], gpu["correlationId"]])
    launch = calls[START].reindex(key).to_numpy()
    tid = pd.Series(calls["tid"].reindex(key).to_numpy(), index=gpu.index)
    tid[gpu[PID] != main_pid] = -2
    is_comm = gpu["short"].str.lower().str.startswith(("nccl", "rccl")) & (gpu[KIND] == "kernel")
    out = pd.DataFrame(
        {
            START: gpu[START].to_numpy(),
            END: gpu[END].to_numpy(),
            LAUNCH: np.nan_to_num(launch, nan=-1).astype(np.int64),
            THREAD: thread_roles(tid, main_tid).to_numpy(),
            KIND: gpu[KIND].to_numpy(),
            NAME: gpu[NAME].to_numpy(),
            STREAM: gpu["streamId"].to_numpy(),
            "collective": [collective_of(n) if c else "" for n, c in zip(gpu["short"], is_comm)],
            "comm": np.where(is_comm, "stream " + gpu["streamId"].astype(str), ""),
            BYTES: np.where(is_comm, 0, gpu[BYTES]).astype(np.int64),
            "pid_": gpu[PID].to_numpy(),
            "tid_": tid.to_numpy(),
        }
    )
    return out.sort_values(START, kind="stable").reset_index(drop=True)


def _payload_offsets(conn) -> dict[str, int]:
    offsets = dict(DEFAULT_OFFSETS)
    if schema_of(conn).has("NVTX_PAYLOAD_SCHEMA_ENTRIES"):
        rows = fetch_all(conn, "SELECT name, offset FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE offset IS NOT NULL")
        for name, offset in rows:
            if name in offsets and name not in ("No. of ranks", "Message size [bytes]"):
                offsets[name] = int(offset)
    return offsets


def _nccl_ranges(conn, facts: ProfileFacts, kernels: pd.DataFrame, main_pid: int) -> None:
    """Communicators and per-kernel communicator ids / sizes from NCCL's NVTX ranges."""
    domains = {name: i for i, name in events.nvtx_domains(conn).items()}
    if "NCCL" not in domains:
        return
    sch = schema_of(conn)
    binary = "n.binaryData" if sch.has_column("NVTX_EVENTS", "binaryData") else "NULL"
    rows = fetch_all(
        conn,
        f"SELECT n.start, n.end, n.globalTid, coalesce(n.text, s.value), {binary}, n.uint64Value "
        "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        f"WHERE n.domainId = {int(domains['NCCL'])} AND n.eventType IN (59, 60) ORDER BY n.start",
    )
    offsets = _payload_offsets(conn)
    calls = []
    for start, _end, gtid, name, data, size in rows:
        pid, tid = (int(gtid) >> 24) & 0xFFFFFF, int(gtid) & 0xFFFFFF
        payload = _decode(data)
        name = str(name or "")
        if name.startswith(("ncclCommInit", "ncclCommSplit")) and payload and pid == main_pid:
            cid = _u64(payload, offsets["NCCL communicator ID"])
            nranks = _i32(payload, offsets["No. of ranks"] if "Split" not in name else 16)
            rank = _i32(payload, offsets["Rank"] if "Split" not in name else 20)
            key = f"{cid:016x}"
            facts.comms[key] = Communicator(key, None, nranks, rank, "", f"NCCL NVTX payload ({name})")
            continue
        kind = collective_of(name)
        if kind and pid == main_pid:
            cid = _u64(payload, offsets["NCCL communicator ID"]) if payload else None
            nbytes = _u64(payload, offsets["Message size [bytes]"]) if payload else (size if size and size > 0 else 0)
            calls.append((tid, start, cid, nbytes, kind))
    _match(kernels, calls)
    sizes = {key: c.size for key, c in facts.comms.items()}
    per_rank = kernels["collective"].isin(["allgather", "reducescatter"]) & kernels["comm"].isin(sizes)
    if per_rank.any():
        kernels.loc[per_rank, "bytes"] = [
            whole_buffer(k, b, sizes[c])
            for k, b, c in kernels.loc[per_rank, ["collective", "bytes", "comm"]].to_numpy()
        ]


def _match(kernels: pd.DataFrame, calls: list[tuple]) -> None:
    """Give each NCCL kernel the NCCL calls that start on its launching thread after the previous
    NCCL launch and no later than its own (a collective's range encloses its launch; grouped sends
    and receives are enqueued before the group's end launches one kernel): communicator id, bytes
    (summed) and collective."""
    comm = kernels["collective"] != ""
    by_tid: dict[int, list] = {}
    for call in calls:
        by_tid.setdefault(call[0], []).append(call)
    for tid, group in by_tid.items():
        mine = kernels.loc[comm & (kernels["tid_"] == tid), "launch"].sort_values()
        if mine.empty:
            continue
        owner = np.searchsorted(mine.to_numpy(), [c[1] for c in group], side="left")
        taken: dict[int, list] = {}
        for k, call in zip(owner, group):
            if k < len(mine):
                taken.setdefault(int(k), []).append(call)
        for k, items in taken.items():
            i = mine.index[k]
            ids = [c[2] for c in items if c[2] is not None]
            if ids:
                kernels.at[i, "comm"] = f"{ids[0]:016x}"
            kernels.at[i, "bytes"] = int(sum(c[3] for c in items))
            kinds = {c[4] for c in items}
            if len(kinds) == 1 and kernels.at[i, "collective"] in ("", "sendrecv"):
                kernels.at[i, "collective"] = kinds.pop()
            elif kinds <= {"send", "recv"}:
                kernels.at[i, "collective"] = "coalesced"


def _decode(data) -> bytes | None:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str) and data and all(c in "0123456789abcdefABCDEF" for c in data):
        try:
            return bytes.fromhex(data)
        except ValueError:
            return None
    return None


def _u64(data: bytes, offset: int) -> int:
    return struct.unpack_from("<Q", data, offset)[0] if len(data) >= offset + 8 else 0


def _i32(data: bytes, offset: int) -> int | None:
    return struct.unpack_from("<i", data, offset)[0] if len(data) >= offset + 4 else None


def _rank(conn, facts: ProfileFacts) -> None:
    if schema_of(conn).has("MPI_RANKS"):
        rows = fetch_all(conn, "SELECT rank FROM MPI_RANKS LIMIT 1")
        if rows and rows[0][0] is not None:
            facts.rank, facts.rank_source = int(rows[0][0]), "nsys MPI_RANKS"


def _gpu(conn, facts: ProfileFacts) -> None:
    sch = schema_of(conn)
    if sch.has("TARGET_INFO_GPU") and sch.has_column("TARGET_INFO_GPU", "totalMemory"):
        rows = fetch_all(conn, "SELECT name, totalMemory FROM TARGET_INFO_GPU WHERE totalMemory > 0 LIMIT 1")
        if rows:
            facts.gpu_name, facts.gpu_memory = str(rows[0][0]), int(rows[0][1])


def _memory(conn, facts: ProfileFacts) -> None:
    sch = schema_of(conn)
    if not sch.has(MEMORY_TABLE):
        return
    rows = fetch_all(conn, f"SELECT start, bytes, memoryOperationType, memKind FROM {MEMORY_TABLE} ORDER BY start")
    device = [(b, op) for _, b, op, kind in rows if kind == DEVICE_MEMORY_KIND and b is not None]
    if not device:
        return
    signed = np.array([-b if op == DEALLOCATION else b for b, op in device], dtype=np.float64)
    facts.memory = {
        "allocated": None,
        "reserved": int(np.cumsum(signed).max()),
        "source": f"nsys {MEMORY_TABLE} ({len(device)} device allocations): peak of what CUDA allocated, "
        "the caching allocator's reserved segments",
    }


def _power(conn, facts: ProfileFacts) -> None:
    found = mean_power(power_samples(conn), facts.steps)
    if found is not None:
        watts, count = found
        facts.power = {
            "watts": watts,
            "samples": count,
            "source": f"nsys {SAMPLES} ({count} power samples in the steps)",
        }
