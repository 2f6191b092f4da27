"""Raw events of one export: one columnar SELECT per table, names resolved, times in integer ns.

Every function takes a connection from `extradeep.io.sqlite.open_readonly`. The `*_table` functions
return `extradeep.io.frames.Table`s (NumPy columns, names as codes), what the per-file pass works on:
on a small export, building DataFrames would cost more than reading it. The others return the same as
DataFrames (empty, with the same columns, when the export lacks the table), names as pandas
Categoricals, so millions of rows share a few thousand strings. Integer columns that the export leaves
NULL (or that an older version lacks) hold `NULL_INT`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import CATEGORY, END, NAME, PID, START
from extradeep.io import categories as cat
from extradeep.io.frames import (
    CPU_COLUMNS,
    NULL_INT,
    NVTX_COLUMNS,
    NVTX_PAYLOADS,
    Names,
    Table,
    concat_names,
    concat_tables,
    is_range,
    unique_names,
)
from extradeep.io.nsys.fetch import (
    check_durations,
    col,
    enum_labels,
    int_columns,
    launch_key_column,
    pid_column,
    pid_of,
    strings,
    table_columns,
    tid_column,
    tid_of,
)
from extradeep.io.nsys.schema import NVTX_CATEGORY, NVTX_DOMAIN_CREATE, NVTX_DOMAIN_DESTROY, schema_of
from extradeep.io.sqlite import ExportConnection, fetch_all

UNNAMED_NVTX = "<unnamed NVTX event>"

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
NVTX_TABLE = "NVTX_EVENTS"
OSRT_TABLE = "OSRT_API"
LIBRARY_TABLES = {"cublas": "CUBLAS_EVENTS", "cudnn": "CUDNN_EVENTS"}
MPI_TABLES = ("MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_START_WAIT_EVENTS", "MPI_OTHER_EVENTS")
GPU_COLUMNS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "pid"]
_NO_NAMES = Names(np.empty(0, np.int64), [])


def _chosen(standard: list[str], columns) -> list[str]:
    """The standard columns restricted to `columns` (start and end always), in standard order, plus
    `launchKey` when asked for (it is not in the default output)."""
    if columns is None:
        return standard
    return [c for c in standard if c in columns or c in ("start", "end")] + [c for c in ("launchKey",) if c in columns]


def _table(cols: dict | None, columns: list[str], names: Names | None = None) -> Table:
    """Table of `columns` (plus `name` when given); an absent table (`cols` None) gives an empty one."""
    if cols is None:
        out = Table({c: np.empty(0, np.int64) for c in columns}, 0)
        return out.with_columns(name=_NO_NAMES) if names is not None else out
    out = Table({c: cols[c] for c in columns}, len(cols[START]))
    return out.with_columns(name=names) if names is not None else out


# ---------------------------------------------------------------------------------------------
# GPU activity


def _gpu_activity(
    conn, table: str, extra: dict[str, str], columns=None, times=("start", "end"), required=("start",)
) -> dict[str, np.ndarray] | None:
    if not schema_of(conn).has(table):
        return None
    spec = {
        "start": col(times[0]),
        "end": col(times[1]),
        **{c: col(c) for c in ("deviceId", "streamId", "correlationId", "globalPid")},
        "pid": pid_column("globalPid"),
        "launchKey": launch_key_column("globalPid"),
        **{name: col(column) for name, column in extra.items()},
    }
    cols = table_columns(conn, table, spec, required, columns)
    check_durations(conn, table, cols[START], cols[END])
    return cols


def kernel_table(conn: ExportConnection, names: str = "short", columns=None) -> Table:
    """`kernels` as a Table, without the category column (`categories.kernel_categories` of the names)."""
    column = {"short": "shortName", "demangled": "demangledName"}[names]
    cols = _gpu_activity(conn, KERNEL_TABLE, {"nameId": column}, columns)
    chosen = _chosen(GPU_COLUMNS, columns)
    return _table(cols, chosen, _NO_NAMES if cols is None else strings(conn).names(cols["nameId"]))


def kernels(conn: ExportConnection, names: str = "short", columns=None) -> pd.DataFrame:
    """CUDA kernels: start, end, deviceId, streamId, correlationId, globalPid, pid, name, category.

    `names="short"` uses shortName (`ncclDevKernel_SendRecv`), `"demangled"` the full signature.
    category is communication for NCCL kernels, computation otherwise. `columns` (a subset of the
    integer columns; start and end always come) reads less, for millions of rows; so for every
    function here.
    """
    table = kernel_table(conn, names, columns)
    if not schema_of(conn).has(KERNEL_TABLE):
        return table.frame().assign(category=pd.Categorical([]))
    return kernel_frame(table)


def kernel_frame(table: Table) -> pd.DataFrame:
    """A `kernel_table` as `kernels` returns it: with the category of each kernel."""
    df = table.frame()
    per_name = cat.kernel_categories(table[NAME].categories)
    df[CATEGORY] = pd.Categorical(per_name[table[NAME].codes], categories=[cat.COMPUTATION, cat.COMMUNICATION])
    return df


def memcpy_table(conn: ExportConnection, columns=None) -> Table:
    columns = _chosen(GPU_COLUMNS + ["bytes"], columns) + ["copyKind"]
    cols = _gpu_activity(conn, MEMCPY_TABLE, {"bytes": "bytes", "copyKind": "copyKind"}, columns)
    if cols is None:
        return _table(None, columns, _NO_NAMES)
    kinds, codes = np.unique(cols["copyKind"], return_inverse=True)
    labels = memcpy_labels(conn, kinds)
    names = np.array([cat.memcpy_label(int(k), labels) for k in kinds], dtype=object)
    return _table(cols, columns, unique_names(codes, names))


def memcpy_labels(conn: ExportConnection, copy_kinds) -> dict[int, str]:
    """The export's own copy-kind labels, read only when a kind is not one nsys has always named."""
    if all(int(k) in cat.MEMCPY_LABELS for k in copy_kinds):
        return {}
    return enum_labels(conn, "ENUM_CUDA_MEMCPY_OPER", "MemcpyOperationStrings")


def memcpy(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """Memory copies: the GPU columns plus bytes, copyKind and name (`[CUDA memcpy HtoD]` ...)."""
    return memcpy_table(conn, columns).frame()


def memset_table(conn: ExportConnection, columns=None) -> Table:
    columns = _chosen(GPU_COLUMNS + ["bytes"], columns)
    cols = _gpu_activity(conn, MEMSET_TABLE, {"bytes": "bytes"}, columns)
    if cols is None:
        return _table(None, columns, _NO_NAMES)
    return _table(cols, columns, Names(np.zeros(len(cols[START]), np.int64), [cat.MEMSET_NAME]))


def memset(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """Memory sets: the GPU columns plus bytes and name `[CUDA memset]`."""
    return memset_table(conn, columns).frame()


# ---------------------------------------------------------------------------------------------
# CPU-side calls


def _cpu_calls(conn, table: str, name_column: str, extra: dict[str, str] | None = None, columns=None) -> Table:
    """Calls on CPU threads (runtime API, OS runtime, libraries): start, end, globalTid, pid, tid, name."""
    extra = extra or {}
    chosen = _chosen(CPU_COLUMNS + list(extra), columns)
    if not schema_of(conn).has(table):
        return _table(None, chosen, _NO_NAMES)
    spec = {
        "start": col("start"),
        "end": col("end"),
        "globalTid": col("globalTid"),
        "pid": pid_column("globalTid"),
        "tid": tid_column("globalTid"),
        "launchKey": launch_key_column("globalTid"),
        "nameId": col(name_column),
        **{name: col(column) for name, column in extra.items()},
    }
    cols = table_columns(conn, table, spec, ("start", "end", name_column), chosen)
    check_durations(conn, table, cols[START], cols[END])
    return _table(cols, chosen, strings(conn).names(cols["nameId"]))


def runtime_table(conn: ExportConnection, columns=None) -> Table:
    return _cpu_calls(conn, RUNTIME_TABLE, "nameId", {"correlationId": "correlationId"}, columns)


def runtime(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """CUDA runtime API calls: start, end, globalTid, pid, tid, correlationId, name."""
    return runtime_table(conn, columns).frame()


def osrt_table(conn: ExportConnection, columns=None) -> Table:
    return _cpu_calls(conn, OSRT_TABLE, "nameId", columns=columns)


def osrt(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """OS runtime calls (read, poll, pthread_*...): start, end, globalTid, pid, tid, name."""
    return osrt_table(conn, columns).frame()


def library_tables(conn: ExportConnection, columns=None) -> dict[str, Table]:
    """cuBLAS and cuDNN API events, one Table per library ("cublas", "cudnn")."""
    return {library: _cpu_calls(conn, table, "nameId", columns=columns) for library, table in LIBRARY_TABLES.items()}


def library_events(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """cuBLAS and cuDNN API events: start, end, globalTid, pid, tid, name, library ("cublas"/"cudnn")."""
    tables = library_tables(conn, columns)
    out = pd.concat(
        [t.frame().drop(columns=NAME).assign(library=name) for name, t in tables.items()], ignore_index=True
    )
    out[NAME] = concat_names([t[NAME] for t in tables.values()]).categorical()
    return out


def _name_last(frame: pd.DataFrame) -> pd.DataFrame:
    """The column order of frames concatenated from parts: the merged names come last."""
    return frame[[c for c in frame.columns if c != "name"] + ["name"]]


# ---------------------------------------------------------------------------------------------
# NVTX


def _registrations(conn, event_type: int) -> list[tuple]:
    """(domainId, category, name) (as stored; None where NULL) of the NVTX registration rows of `event_type` (domain create,
    category name); the name is in text or, for registered strings, textId. Both kinds are read in
    one scan of the NVTX table (it has no index on eventType) and kept on the connection."""
    if not schema_of(conn).has(NVTX_TABLE):
        return []
    cached = getattr(conn, "_extradeep_registrations", None)
    if cached is None:
        sql = (
            f"SELECT eventType, domainId, category, text, textId FROM {NVTX_TABLE} "
            f"WHERE eventType IN ({NVTX_DOMAIN_CREATE}, {NVTX_CATEGORY})"
        )
        rows = fetch_all(conn, sql)
        ids = np.array([r[-1] if r[-1] is not None else NULL_INT for r in rows], dtype=np.int64)
        resolved = strings(conn).lookup(ids) if rows else []
        cached = [(r[0], r[1], r[2], r[3] or name) for r, name in zip(rows, resolved)]
        conn._extradeep_registrations = cached
    return [r[1:] for r in cached if r[0] == event_type]


def nvtx_domains(conn: ExportConnection) -> dict[int, str]:
    """domainId -> domain name, from DomainCreate rows or the old DomainStrings table."""
    domains = {int(k): str(v) for k, v in enum_labels(conn, "DomainStrings").items()}
    domains.update(
        {int(d): str(name) for d, _, name in _registrations(conn, NVTX_DOMAIN_CREATE) if name and d is not None}
    )
    return domains


def nvtx_categories(conn: ExportConnection) -> dict[tuple[int, int], str]:
    """(domainId, category id) -> registered category name (eventType 33 rows)."""
    rows = _registrations(conn, NVTX_CATEGORY)
    return {(int(d or 0), int(c)): str(name) for d, c, name in rows if name and c is not None}


_NVTX_STEP_COLUMNS = ("start", "end", "eventType", "domainId", "categoryId")  # what the step finder and sums use


def nvtx_table(conn: ExportConnection, full: bool = True) -> Table:
    """`nvtx` as a Table; without `full`, only start, end, eventType, domainId, categoryId, name,
    domain and category (what the step finder and the per-step sums read)."""
    wanted = [c for c in NVTX_COLUMNS if full or c in _NVTX_STEP_COLUMNS]
    payloads = NVTX_PAYLOADS if full else ()
    if not schema_of(conn).has(NVTX_TABLE):
        empty = {c: np.empty(0, np.int64) for c in wanted}
        names = {"name": _NO_NAMES, "domain": _NO_NAMES, "category": _NO_NAMES}
        return Table({**empty, **names, **{p: np.empty(0, np.int64) for p in payloads}}, 0)
    where = f"eventType <> {NVTX_DOMAIN_DESTROY}"  # registrations come in the same scan, then leave it
    present = schema_of(conn).columns(NVTX_TABLE)
    optional = {"rangeId": "rangeId", "globalTid": "globalTid"} if full else {}
    exprs = {
        "rowid": "rowid",
        "start": '"start"',
        "end": '"end"',
        "eventType": "eventType",
        "domainId": "ifnull(domainId, 0)" if "domainId" in present else "0",
        "categoryId": "ifnull(category, 0)" if "category" in present else "0",
        "textId": "textId" if "textId" in present else "NULL",
        **{k: (v if v in present else "NULL") for k, v in optional.items()},
        # a payload of another SQLite type is no integer payload: NULL, never an error for the caller
        **{p: (f"CASE WHEN typeof({p}) = 'integer' THEN {p} END" if p in present else "NULL") for p in payloads},
    }
    exprs.update(rawDomainId="domainId" if "domainId" in present else "NULL")
    exprs.update(rawCategory="category" if "category" in present else "NULL")
    has_text = "text" in present
    if has_text:  # the texts come in the same scan (the NVTX table has no index to find them by)
        exprs["hasText"] = "text IS NOT NULL"
    cols = int_columns(conn, NVTX_TABLE, exprs, where, text="text" if has_text else None)
    names = _nvtx_texts_of(conn, cols, where)
    registration = np.isin(cols["eventType"], (NVTX_CATEGORY, NVTX_DOMAIN_CREATE))
    conn._extradeep_registrations = _registrations_of(conn, cols, names, registration)
    if registration.any():
        cols = {k: v[~registration] for k, v in cols.items() if isinstance(v, np.ndarray)}
        names = names[~registration]
    ranges = is_range(cols["eventType"])
    check_durations(conn, NVTX_TABLE, cols[START][ranges], cols[END][ranges])
    if full:
        cols[PID], cols["tid"] = pid_of(cols["globalTid"]), tid_of(cols["globalTid"])
    out = {c: cols[c] for c in wanted}
    out[NAME] = _nvtx_names(conn, names)
    domains = nvtx_domains(conn)
    out["domain"] = _mapped_names(cols["domainId"], lambda d: domains.get(int(d), ""))
    registered = nvtx_categories(conn)
    key = cols["domainId"] * (1 << 32) + cols["categoryId"]
    out[CATEGORY] = _mapped_names(
        key, lambda k: registered.get((int(k) >> 32, int(k) & 0xFFFFFFFF), registered.get((0, int(k) & 0xFFFFFFFF), ""))
    )
    out.update({p: cols[p] for p in payloads})
    return Table(out, len(cols["rowid"]))


def nvtx(conn: ExportConnection) -> pd.DataFrame:
    """NVTX ranges (59 push/pop, 60 start/end) and marks (34, end = NULL_INT).

    Columns: start, end, eventType, rangeId, globalTid, pid, tid, domainId, categoryId, name
    (`coalesce(text, StringIds[textId])`), domain (name, "" for the default domain) and category
    (registered category name, "" when none), then the integer payloads uint64Value and int64Value
    (NULL_INT where the event has none or the export lacks the column). Domain/category
    registrations are resolved into these columns, not returned as rows.
    """
    return nvtx_table(conn).frame()


def _nvtx_texts_of(conn, cols: dict[str, np.ndarray], where: str) -> np.ndarray:
    """coalesce(text, StringIds[textId]) of each row (None where neither)."""
    names = np.full(len(cols["rowid"]), None, dtype=object)
    has_id = cols["textId"] != NULL_INT
    if has_id.any():
        names[has_id] = strings(conn).lookup(cols["textId"][has_id])
    if "hasText" in cols and cols["text"] is not None:
        names[cols["hasText"] == 1] = cols["text"]
    elif "hasText" in cols:  # a text holds the separator: the texts one row at a time
        rowids, texts = _nvtx_texts(conn, where)
        if len(rowids):
            pos = np.searchsorted(cols["rowid"], rowids)  # rowids come back in scan (rowid) order
            names[pos] = texts
    return names


def _registrations_of(conn, cols: dict[str, np.ndarray], names: np.ndarray, rows: np.ndarray) -> list[tuple]:
    """The registration rows of the scan as `_registrations` keeps them: (eventType, domainId,
    category, name), None where NULL; the name is the text or, when that is empty, the textId's."""
    out = []
    for i in np.flatnonzero(rows):
        name = names[i]
        if not name and cols["textId"][i] != NULL_INT:
            name = strings(conn).lookup(cols["textId"][i : i + 1])[0]
        domain, category = (None if v == NULL_INT else int(v) for v in (cols["rawDomainId"][i], cols["rawCategory"][i]))
        out.append((int(cols["eventType"][i]), domain, category, name))
    return out


def _nvtx_names(conn, names: np.ndarray) -> Names:
    """The events' names; rows with neither text nor a known textId get an explicit placeholder."""
    unnamed = names == None  # noqa: E711
    if unnamed.any():
        names[unnamed] = UNNAMED_NVTX
        conn.warnings.append(
            f"{int(unnamed.sum())} NVTX events have neither text nor a known textId; named {UNNAMED_NVTX}"
        )
    return unique_names(np.arange(len(names)), names)


def _nvtx_texts(conn, where: str) -> tuple[np.ndarray, list[str]]:
    """(rowids, texts) of the NVTX rows with a text, as row tuples (when a text holds the separator)."""
    rows = fetch_all(conn, f"SELECT rowid, text FROM {NVTX_TABLE} WHERE text IS NOT NULL AND {where}")
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), [r[1] for r in rows]


def _mapped_names(keys: np.ndarray, name_of) -> Names:
    if not len(keys):
        return _NO_NAMES
    uniq, codes = np.unique(keys, return_inverse=True)
    return unique_names(codes, np.array([name_of(k) for k in uniq], dtype=object))


# ---------------------------------------------------------------------------------------------
# MPI, synchronisation, CUDA events


def mpi_name_column(conn, table: str) -> str:
    return "textId" if schema_of(conn).has_column(table, "textId") else "nameId"


def mpi_table(conn: ExportConnection, nvtx_events=None, columns=None, tables: list[Table] | None = None) -> Table:
    """`mpi` as a Table (`nvtx_events`: the export's nvtx Table or frame, when the caller has it;
    `tables`: the MPI_*_EVENTS tables already read, with the `columns` asked for)."""
    parts, chosen = [], _chosen(CPU_COLUMNS, columns)
    if tables is None:
        present = [table for table in MPI_TABLES if schema_of(conn).has(table)]
        tables = [_cpu_calls(conn, t, mpi_name_column(conn, t), {"bytes": "size"}, columns) for t in present]
    for part in tables:
        parts.append(part.with_columns(source=np.full(len(part), "table", dtype=object)))
    ranges = nvtx_table(conn, full=columns is None or bool(set(columns) - {"bytes"})) if nvtx_events is None else None
    ranges = Table.of(nvtx_events) if ranges is None else ranges
    in_mpi = is_range(ranges["eventType"]) & ranges["domain"].flags(cat.is_mpi_domain)
    if in_mpi.any():
        picked = ranges.take(in_mpi)
        from_nvtx = {c: picked[c] for c in chosen}
        from_nvtx[NAME] = picked[NAME].used()
        bytes_ = np.full(len(picked), NULL_INT, np.int64)
        parts.append(Table({**from_nvtx, "bytes": bytes_, "source": np.full(len(picked), "nvtx", dtype=object)}))
    if not parts:
        return _table(None, chosen + ["bytes"], _NO_NAMES)
    return concat_tables(parts)


def mpi(conn: ExportConnection, nvtx_events: pd.DataFrame | None = None, columns=None) -> pd.DataFrame:
    """MPI calls: start, end, globalTid, pid, tid, name, bytes, source.

    Newer nsys (-t mpi) writes MPI_*_EVENTS tables (source "table"); older versions record MPI calls as
    NVTX ranges in a domain named like "MPI" (source "nvtx"). bytes is the message size where known.
    `nvtx_events`: the export's `nvtx(conn)` frame when the caller already has it (saves a re-read).
    """
    frame = mpi_table(conn, nvtx_events, columns).frame()
    if frame.empty and not len(frame.columns.intersection(["source"])):
        return frame.assign(source=pd.Series([], dtype=str))
    return _name_last(frame)


def synchronization(conn: ExportConnection) -> pd.DataFrame:
    """CUDA synchronisation: the GPU columns plus syncType, eventId, eventSyncId.

    syncType 1 event sync, 2 stream wait event, 3 stream sync, 4 context sync.
    """
    extra = {"syncType": "syncType", "eventId": "eventId", "eventSyncId": "eventSyncId"}
    return _table(_gpu_activity(conn, SYNC_TABLE, extra), GPU_COLUMNS + list(extra)).frame()


def cuda_events(conn: ExportConnection) -> pd.DataFrame:
    """CUDA event records: the GPU columns plus eventId, eventSyncId; start = end = the record time
    (`timestamp` in newer exports, NULL_INT where the export has no time column).

    With synchronization() they give cross-stream dependencies (record on stream A, wait on stream B).
    """
    has_time = schema_of(conn).has_column(CUDA_EVENT_TABLE, "timestamp")
    times = ("timestamp", "timestamp") if has_time else ("start", "end")
    extra = {"eventId": "eventId", "eventSyncId": "eventSyncId"}
    cols = _gpu_activity(conn, CUDA_EVENT_TABLE, extra, times=times, required=("correlationId",))
    return _table(cols, GPU_COLUMNS + list(extra)).frame()
