"""Raw events of one export as DataFrames: one columnar SELECT per table, names resolved, times in integer ns.

Every function takes a connection from `extradeep.io.sqlite.open_readonly` and returns a DataFrame
(empty, with the same columns, when the export lacks the table). Names are pandas Categoricals, so
millions of rows share a few thousand strings. Integer columns that the export leaves NULL (or that an
older version lacks) hold `NULL_INT`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.io import categories as cat
from extradeep.io.frames import (
    CPU_COLUMNS,
    NULL_INT,
    NVTX_COLUMNS,
    NVTX_PAYLOADS,
    NVTX_RANGE_TYPES,
    categorical,
    per_category,
)
from extradeep.io.nsys.schema import NVTX_CATEGORY, NVTX_DOMAIN_CREATE, NVTX_DOMAIN_DESTROY, schema_of
from extradeep.io.sqlite import ExportConnection, fetch_all, query

_NULL_SQL = "(-9223372036854775807 - 1)"
UNNAMED_NVTX = "<unnamed NVTX event>"
CHUNK_ROWS = 2_000_000  # bounds the size of the text that group_concat builds per query

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


# ---------------------------------------------------------------------------------------------
# Columnar fetching


def int_columns(
    conn: ExportConnection,
    table: str,
    columns: dict[str, str],
    where: str = "",
    aggregates: dict[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """Integer columns of `table` as aligned int64 arrays (output name -> SQL expression).

    SQLite renders each column as one comma-separated text (group_concat, rows in scan order for all
    aggregates of the same SELECT) that NumPy parses in C: several times faster than building a
    Python tuple per row. NULLs become NULL_INT. `aggregates` (output name -> SQL aggregate such as
    `min(x)`) are computed in the same scan; each comes back as an array with one value per chunk.
    """
    aggregates = aggregates or {}
    out: dict[str, list] = {name: [] for name in [*columns, *aggregates]}
    # two queries: SQLite answers a lone min(rowid) or max(rowid) from the b-tree, both at once by a scan
    low = query(conn, f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
    if low is None:
        return {name: np.empty(0, np.int64) for name in out}
    high = query(conn, f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
    selected = [f"group_concat(ifnull({expr}, {_NULL_SQL}))" for expr in columns.values()] + list(aggregates.values())
    condition = f"({where}) AND " if where else ""
    sql = f'SELECT count(*), {", ".join(selected)} FROM "{table}" WHERE {condition}rowid >= ? AND rowid < ?'
    for lo in range(low, high + 1, CHUNK_ROWS):
        row = fetch_all(conn, sql, (lo, lo + CHUNK_ROWS))[0]
        n = row[0]
        for name, text in zip(columns, row[1:]):
            out[name].append(_parse_ints(conn, table, columns[name], text, n))
        for name, value in zip(aggregates, row[1 + len(columns) :]):
            out[name].append(np.array([NULL_INT if value is None else value], dtype=np.int64))
    return {name: parts[0] if len(parts) == 1 else np.concatenate(parts) for name, parts in out.items()}


def _parse_ints(conn, table: str, column: str, text, n: int) -> np.ndarray:
    """Parse group_concat output; a REAL, TEXT or BLOB where an integer belongs is refused."""
    if n == 0:
        return np.empty(0, np.int64)
    try:
        values = np.fromstring(text if isinstance(text, str) else "", dtype=np.int64, sep=",")
    except ValueError:
        values = None
    if values is None or len(values) != n:
        raise InputError(conn.path, f"table {table}: column {column} holds non-integer values")
    return values


def _col(column: str) -> tuple[str, str]:
    return column, f'"{column}"'


def _pid(column: str) -> tuple[str, str]:
    return column, f'(("{column}" >> 24) & 16777215)'


def _tid(column: str) -> tuple[str, str]:
    return column, f'("{column}" & 16777215)'


def _launch_key(column: str) -> tuple[str, str]:
    """pid << 32 | correlationId: joins GPU work to the runtime call of the same process that
    launched it (correlationIds repeat across processes); one column instead of two. `column`
    (globalTid or globalPid) holds the pid; `_table_columns` builds the key in NumPy."""
    return "correlationId", column


def _table_columns(
    conn, table: str, spec: dict[str, tuple[str, str]], required: tuple[str, ...], columns=None
) -> dict[str, np.ndarray]:
    """Read the outputs of `spec` (output -> (source column, SQL expression)) from `table`, only
    `columns` of them when given (plus start and end); outputs whose source column the export lacks
    are all NULL_INT; a missing `required` column is an InputError."""
    present = schema_of(conn).columns(table)
    missing = [c for c in required if c not in present]
    if missing:
        raise InputError(conn.path, f"table {table} lacks column(s) {', '.join(missing)}")
    if columns is not None:
        unknown = set(columns) - set(spec)
        if unknown:
            raise ValueError(f"unknown column(s) {sorted(unknown)}; choose from {list(spec)}")
        spec = {k: v for k, v in spec.items() if k in columns or k in ("start", "end", "nameId")}
    pid_column = spec.pop("launchKey", (None, None))[1]
    wants_key = pid_column is not None and "correlationId" in present
    exprs = {name: expr for name, (col, expr) in spec.items() if col in present}
    if wants_key:
        exprs.setdefault("correlationId", '"correlationId"')
    pid_expr = _pid(pid_column)[1] if wants_key and pid_column in present else None
    # the raw column's range: when min and max share the bits above the tid, so do all rows between
    ranges = {"id_min": f'min("{pid_column}")', "id_max": f'max("{pid_column}")', "id_n": f'count("{pid_column}")'}
    data = int_columns(conn, table, exprs, aggregates=ranges if pid_expr else None)
    n = len(next(iter(data.values()))) if data else 0
    out = {name: data[name] if name in data else np.full(n, NULL_INT, np.int64) for name in spec}
    if pid_column is not None:
        out["launchKey"] = _key_of(conn, table, data, pid_expr, n) if wants_key else np.full(n, NULL_INT, np.int64)
    return out


def _key_of(conn, table: str, data: dict[str, np.ndarray], pid_expr: str | None, n: int) -> np.ndarray:
    """pid << 32 | correlationId per row (NULL_INT where either is NULL). Usually one process wrote
    the table: then its pid, known from min = max in the same scan, saves reading a pid per row."""
    corr = data["correlationId"]
    if n == 0:  # an empty table: min/max of nothing
        return np.empty(0, np.int64)
    if pid_expr is None:
        pid = np.full(n, NULL_INT, np.int64)
    elif data["id_n"].sum() == n and data["id_min"].min() >> 24 == data["id_max"].max() >> 24:
        pid = np.full(n, pid_of(data["id_min"][0]), np.int64)
    else:
        pid = int_columns(conn, table, {"pid": pid_expr})["pid"]
    key = (pid << 32) | (corr & 0xFFFFFFFF)
    return np.where((pid == NULL_INT) | (corr == NULL_INT), NULL_INT, key)


def check_durations(conn, table: str, start: np.ndarray, end: np.ndarray) -> None:
    """Negative durations mean a damaged or hand-edited export: refuse rather than guess."""
    bad = int(np.count_nonzero((end != NULL_INT) & (end < start)))
    if bad:
        raise InputError(conn.path, f"{bad} events in {table} end before they start (negative durations)")


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """Process id packed into globalTid/globalPid."""
    return (global_id >> 24) & 0xFFFFFF


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    """Thread id packed into globalTid."""
    return global_tid & 0xFFFFFF


# ---------------------------------------------------------------------------------------------
# Strings


class StringTable:
    """StringIds of one export: resolves integer name ids to strings, vectorised."""

    def __init__(self, ids: np.ndarray, values: np.ndarray, notes: list[str] | None = None):
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.values = values[order]
        self.notes = notes if notes is not None else []  # where unresolvable ids are reported

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Strings for `ids` (object array); ids absent from StringIds give None."""
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.ids, ids), 0, max(len(self.ids) - 1, 0))
        found = (self.ids[pos] == ids) if len(self.ids) else np.zeros(len(ids), bool)
        out = np.full(len(ids), None, dtype=object)
        out[found] = self.values[pos[found]]
        return out

    def categorical(self, ids: np.ndarray, missing: str = "<unknown name id {}>") -> pd.Categorical:
        """Names for `ids` as a Categorical; unresolvable ids are named explicitly, never dropped."""
        uniq, codes = _factorize_ids(np.asarray(ids, dtype=np.int64))
        names = self.lookup(uniq)
        unresolved = np.flatnonzero(names == None)  # noqa: E711 - elementwise comparison
        for i in unresolved:
            names[i] = missing.format(uniq[i] if uniq[i] != NULL_INT else "NULL")
        if len(unresolved):
            n = int(np.isin(codes, unresolved).sum())
            self.notes.append(
                f"{n} events name string ids missing from StringIds; they are named {missing.format('N')}"
            )
        return categorical(codes, names)


def _factorize_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct ids, code of each id): O(n) through a presence table for the small dense ids
    that StringIds uses, sorting otherwise."""
    if len(ids) and ids.min() >= 0 and ids.max() < 4 * len(ids) + 65536:
        present = np.zeros(int(ids.max()) + 1, dtype=bool)
        present[ids] = True
        return np.flatnonzero(present), (np.cumsum(present) - 1)[ids]
    return np.unique(ids, return_inverse=True)


def strings(conn: ExportConnection) -> StringTable:
    """The export's StringIds table (cached on the connection); InputError when it is missing."""
    cached = getattr(conn, "_extradeep_strings", None)
    if cached is not None:
        return cached
    if not schema_of(conn).has("StringIds"):
        raise InputError(conn.path, "table StringIds is missing; names cannot be resolved (not a complete nsys export)")
    # CAST: in a damaged file a value may come back as a BLOB or an id as text
    rows = fetch_all(conn, "SELECT CAST(id AS INTEGER), CAST(value AS TEXT) FROM StringIds WHERE id IS NOT NULL")
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    values = np.empty(len(rows), dtype=object)
    values[:] = [r[1] for r in rows]
    table = StringTable(ids, values, conn.warnings)
    conn._extradeep_strings = table
    return table


def enum_labels(conn: ExportConnection, *tables: str) -> dict[int, str]:
    """id -> label of the first enum/lookup table present (ENUM_* in 2022.4+, *Strings before)."""
    sch = schema_of(conn)
    table = sch.first_table(*tables)
    if table is None:
        return {}
    label = next((c for c in ("label", "name", "domainName") if c in sch.columns(table)), None)
    if label is None:
        return {}
    return {int(i): str(v) for i, v in fetch_all(conn, f'SELECT id, "{label}" FROM "{table}"')}


# ---------------------------------------------------------------------------------------------
# GPU activity


_GPU_COLUMNS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "pid"]


def _gpu_activity(
    conn, table: str, extra: dict[str, str], columns=None, times=("start", "end"), required=("start",)
) -> dict[str, np.ndarray] | None:
    if not schema_of(conn).has(table):
        return None
    spec = {
        "start": _col(times[0]),
        "end": _col(times[1]),
        **{c: _col(c) for c in ("deviceId", "streamId", "correlationId", "globalPid")},
        "pid": _pid("globalPid"),
        "launchKey": _launch_key("globalPid"),
        **{name: _col(column) for name, column in extra.items()},
    }
    cols = _table_columns(conn, table, spec, required, columns)
    check_durations(conn, table, cols["start"], cols["end"])
    return cols


def _frame(cols: dict | None, columns: list[str], names: pd.Categorical | None = None) -> pd.DataFrame:
    """DataFrame of `columns` (plus `name` when given); an absent table gives an empty frame."""
    if cols is None:
        df = pd.DataFrame({c: np.empty(0, np.int64) for c in columns})
    else:
        df = pd.DataFrame({c: cols[c] for c in columns}, copy=False)
    if names is not None:
        df["name"] = names if cols is not None else pd.Categorical([])
    return df


_NO_NAMES = pd.Categorical([])


def _chosen(standard: list[str], columns) -> list[str]:
    """The standard columns restricted to `columns` (start and end always), in standard order, plus
    `launchKey` when asked for (it is not in the default output)."""
    if columns is None:
        return standard
    return [c for c in standard if c in columns or c in ("start", "end")] + [c for c in ("launchKey",) if c in columns]


def kernels(conn: ExportConnection, names: str = "short", columns=None) -> pd.DataFrame:
    """CUDA kernels: start, end, deviceId, streamId, correlationId, globalPid, pid, name, category.

    `names="short"` uses shortName (`ncclDevKernel_SendRecv`), `"demangled"` the full signature.
    category is communication for NCCL kernels, computation otherwise. `columns` (a subset of the
    integer columns; start and end always come) reads less, for millions of rows; so for every
    function here.
    """
    column = {"short": "shortName", "demangled": "demangledName"}[names]
    cols = _gpu_activity(conn, KERNEL_TABLE, {"nameId": column}, columns)
    chosen = _chosen(_GPU_COLUMNS, columns)
    if cols is None:
        return _frame(None, chosen, _NO_NAMES).assign(category=_NO_NAMES)
    name = strings(conn).categorical(cols["nameId"])
    df = _frame(cols, chosen, name)
    per_name = cat.kernel_categories(name.categories)
    df["category"] = pd.Categorical(per_name[name.codes], categories=[cat.COMPUTATION, cat.COMMUNICATION])
    return df


def memcpy(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """Memory copies: the GPU columns plus bytes, copyKind and name (`[CUDA memcpy HtoD]` ...)."""
    columns = _chosen(_GPU_COLUMNS + ["bytes"], columns) + ["copyKind"]
    cols = _gpu_activity(conn, MEMCPY_TABLE, {"bytes": "bytes", "copyKind": "copyKind"}, columns)
    if cols is None:
        return _frame(None, columns, _NO_NAMES)
    labels = enum_labels(conn, "ENUM_CUDA_MEMCPY_OPER", "MemcpyOperationStrings")
    kinds, codes = np.unique(cols["copyKind"], return_inverse=True)
    names = np.array([cat.memcpy_label(int(k), labels) for k in kinds], dtype=object)
    return _frame(cols, columns, categorical(codes, names))


def memset(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """Memory sets: the GPU columns plus bytes and name `[CUDA memset]`."""
    columns = _chosen(_GPU_COLUMNS + ["bytes"], columns)
    cols = _gpu_activity(conn, MEMSET_TABLE, {"bytes": "bytes"}, columns)
    if cols is None:
        return _frame(None, columns, _NO_NAMES)
    n = len(cols["start"])
    return _frame(cols, columns, pd.Categorical.from_codes(np.zeros(n, int), categories=[cat.MEMSET_NAME]))


# ---------------------------------------------------------------------------------------------
# CPU-side calls


def _cpu_calls(conn, table: str, name_column: str, extra: dict[str, str] | None = None, columns=None) -> pd.DataFrame:
    """Calls on CPU threads (runtime API, OS runtime, libraries): start, end, globalTid, pid, tid, name."""
    extra = extra or {}
    chosen = _chosen(CPU_COLUMNS + list(extra), columns)
    if not schema_of(conn).has(table):
        return _frame(None, chosen, _NO_NAMES)
    spec = {
        "start": _col("start"),
        "end": _col("end"),
        "globalTid": _col("globalTid"),
        "pid": _pid("globalTid"),
        "tid": _tid("globalTid"),
        "launchKey": _launch_key("globalTid"),
        "nameId": _col(name_column),
        **{name: _col(column) for name, column in extra.items()},
    }
    cols = _table_columns(conn, table, spec, ("start", "end", name_column), chosen)
    check_durations(conn, table, cols["start"], cols["end"])
    return _frame(cols, chosen, strings(conn).categorical(cols["nameId"]))


def runtime(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """CUDA runtime API calls: start, end, globalTid, pid, tid, correlationId, name."""
    return _cpu_calls(conn, RUNTIME_TABLE, "nameId", {"correlationId": "correlationId"}, columns)


def osrt(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """OS runtime calls (read, poll, pthread_*...): start, end, globalTid, pid, tid, name."""
    return _cpu_calls(conn, OSRT_TABLE, "nameId", columns=columns)


def library_events(conn: ExportConnection, columns=None) -> pd.DataFrame:
    """cuBLAS and cuDNN API events: start, end, globalTid, pid, tid, name, library ("cublas"/"cudnn")."""
    parts = []
    for library, table in LIBRARY_TABLES.items():
        df = _cpu_calls(conn, table, "nameId", columns=columns)
        parts.append(df.assign(library=library))
    return _concat(parts)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate frames, keeping names categorical (union of categories)."""
    from pandas.api.types import union_categoricals

    names = union_categoricals([p["name"] for p in parts], ignore_order=True)
    out = pd.concat([p.drop(columns="name") for p in parts], ignore_index=True)
    out["name"] = names
    return out


# ---------------------------------------------------------------------------------------------
# NVTX


def _registrations(conn, event_type: int, keys: str) -> list[tuple]:
    """(key..., name) of NVTX registration rows (domain create, category name); the name is in text
    or, for registered strings, textId."""
    if not schema_of(conn).has(NVTX_TABLE):
        return []
    rows = fetch_all(conn, f"SELECT {keys}, text, textId FROM {NVTX_TABLE} WHERE eventType = {event_type}")
    ids = np.array([r[-1] if r[-1] is not None else NULL_INT for r in rows], dtype=np.int64)
    resolved = strings(conn).lookup(ids) if rows else []
    named = [(*r[:-2], r[-2] or name) for r, name in zip(rows, resolved)]
    return [r for r in named if r[-1] and None not in r[:-1]]


def nvtx_domains(conn: ExportConnection) -> dict[int, str]:
    """domainId -> domain name, from DomainCreate rows or the old DomainStrings table."""
    domains = {int(k): str(v) for k, v in enum_labels(conn, "DomainStrings").items()}
    domains.update({int(d): str(name) for d, name in _registrations(conn, NVTX_DOMAIN_CREATE, "domainId")})
    return domains


def nvtx_categories(conn: ExportConnection) -> dict[tuple[int, int], str]:
    """(domainId, category id) -> registered category name (eventType 33 rows)."""
    rows = _registrations(conn, NVTX_CATEGORY, "ifnull(domainId, 0), category")
    return {(int(d), int(c)): str(name) for d, c, name in rows}


def nvtx(conn: ExportConnection) -> pd.DataFrame:
    """NVTX ranges (59 push/pop, 60 start/end) and marks (34, end = NULL_INT).

    Columns: start, end, eventType, rangeId, globalTid, pid, tid, domainId, categoryId, name
    (`coalesce(text, StringIds[textId])`), domain (name, "" for the default domain) and category
    (registered category name, "" when none), then the integer payloads uint64Value and int64Value
    (NULL_INT where the event has none or the export lacks the column). Domain/category
    registrations are resolved into these columns, not returned as rows.
    """
    if not schema_of(conn).has(NVTX_TABLE):
        empty = _frame(None, NVTX_COLUMNS, _NO_NAMES).assign(domain=_NO_NAMES, category=_NO_NAMES)
        return empty.assign(**{p: np.empty(0, np.int64) for p in NVTX_PAYLOADS})
    skip = (NVTX_CATEGORY, NVTX_DOMAIN_CREATE, NVTX_DOMAIN_DESTROY)
    where = f"eventType NOT IN {skip}"
    present = schema_of(conn).columns(NVTX_TABLE)
    optional = {"rangeId": "rangeId", "globalTid": "globalTid", "textId": "textId"}
    exprs = {
        "rowid": "rowid",
        "start": '"start"',
        "end": '"end"',
        "eventType": "eventType",
        "domainId": "ifnull(domainId, 0)" if "domainId" in present else "0",
        "categoryId": "ifnull(category, 0)" if "category" in present else "0",
        **{k: (v if v in present else "NULL") for k, v in optional.items()},
        # a payload of another SQLite type is no integer payload: NULL, never an error for the caller
        **{p: (f"CASE WHEN typeof({p}) = 'integer' THEN {p} END" if p in present else "NULL") for p in NVTX_PAYLOADS},
    }
    cols = int_columns(conn, NVTX_TABLE, exprs, where)
    ranges = np.isin(cols["eventType"], NVTX_RANGE_TYPES)
    check_durations(conn, NVTX_TABLE, cols["start"][ranges], cols["end"][ranges])
    cols["pid"], cols["tid"] = pid_of(cols["globalTid"]), tid_of(cols["globalTid"])
    df = _frame(cols, NVTX_COLUMNS, _nvtx_names(conn, cols, where))
    domains = nvtx_domains(conn)
    df["domain"] = _mapcategorical(cols["domainId"], lambda d: domains.get(int(d), ""))
    registered = nvtx_categories(conn)
    key = cols["domainId"] * (1 << 32) + cols["categoryId"]
    df["category"] = _mapcategorical(
        key, lambda k: registered.get((int(k) >> 32, int(k) & 0xFFFFFFFF), registered.get((0, int(k) & 0xFFFFFFFF), ""))
    )
    for p in NVTX_PAYLOADS:
        df[p] = cols[p]
    return df


def _nvtx_names(conn, cols: dict[str, np.ndarray], where: str) -> pd.Categorical:
    """coalesce(text, StringIds[textId]) for each row; rows with neither get an explicit placeholder."""
    names = np.full(len(cols["rowid"]), None, dtype=object)
    has_id = cols["textId"] != NULL_INT
    if has_id.any():
        names[has_id] = strings(conn).lookup(cols["textId"][has_id])
    if schema_of(conn).has_column(NVTX_TABLE, "text"):
        rowids, texts = _nvtx_texts(conn, where)
        if len(rowids):
            pos = np.searchsorted(cols["rowid"], rowids)  # rowids come back in scan (rowid) order
            names[pos] = texts
    unnamed = names == None  # noqa: E711
    if unnamed.any():
        names[unnamed] = UNNAMED_NVTX
        conn.warnings.append(
            f"{int(unnamed.sum())} NVTX events have neither text nor a known textId; named {UNNAMED_NVTX}"
        )
    return categorical(np.arange(len(names)), names)


def _nvtx_texts(conn, where: str) -> tuple[np.ndarray, list[str]]:
    """(rowids, texts) of the NVTX rows with a text: one string joined by the unit separator and
    split in C, unless a text holds that character (then row tuples)."""
    sql = f"FROM {NVTX_TABLE} WHERE text IS NOT NULL AND {where}"
    n, ids, joined = fetch_all(conn, f"SELECT count(*), group_concat(rowid), group_concat(text, char(31)) {sql}")[0]
    if not n:
        return np.empty(0, np.int64), []
    texts = str(joined).split("\x1f")
    if len(texts) == n:
        return _parse_ints(conn, NVTX_TABLE, "rowid", ids, n), texts
    rows = fetch_all(conn, f"SELECT rowid, text {sql}")
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), [r[1] for r in rows]


def _mapcategorical(keys: np.ndarray, name_of) -> pd.Categorical:
    uniq, codes = np.unique(keys, return_inverse=True)
    names = np.array([name_of(k) for k in uniq], dtype=object)
    return categorical(codes, names) if len(keys) else pd.Categorical([])


# ---------------------------------------------------------------------------------------------
# MPI, synchronisation, CUDA events


def mpi(conn: ExportConnection, nvtx_events: pd.DataFrame | None = None, columns=None) -> pd.DataFrame:
    """MPI calls: start, end, globalTid, pid, tid, name, bytes, source.

    Newer nsys (-t mpi) writes MPI_*_EVENTS tables (source "table"); older versions record MPI calls as
    NVTX ranges in a domain named like "MPI" (source "nvtx"). bytes is the message size where known.
    `nvtx_events`: the export's `nvtx(conn)` frame when the caller already has it (saves a re-read).
    """
    parts, chosen = [], _chosen(CPU_COLUMNS, columns)
    for table in MPI_TABLES:
        if not schema_of(conn).has(table):
            continue
        name_col = "textId" if schema_of(conn).has_column(table, "textId") else "nameId"
        df = _cpu_calls(conn, table, name_col, {"bytes": "size"}, columns)
        parts.append(df.assign(source="table"))
    ranges = nvtx(conn) if nvtx_events is None else nvtx_events
    in_mpi = ranges["eventType"].isin(NVTX_RANGE_TYPES) & per_category(ranges["domain"], cat.is_mpi_domain)
    if in_mpi.any():
        from_nvtx = ranges.loc[in_mpi, chosen + ["name"]].assign(bytes=NULL_INT, source="nvtx")
        from_nvtx["name"] = from_nvtx["name"].cat.remove_unused_categories()
        parts.append(from_nvtx)
    if not parts:
        return _frame(None, chosen + ["bytes"], _NO_NAMES).assign(source=pd.Series([], dtype=str))
    return _concat(parts)


def synchronization(conn: ExportConnection) -> pd.DataFrame:
    """CUDA synchronisation: the GPU columns plus syncType, eventId, eventSyncId.

    syncType 1 event sync, 2 stream wait event, 3 stream sync, 4 context sync.
    """
    extra = {"syncType": "syncType", "eventId": "eventId", "eventSyncId": "eventSyncId"}
    return _frame(_gpu_activity(conn, SYNC_TABLE, extra), _GPU_COLUMNS + list(extra))


def cuda_events(conn: ExportConnection) -> pd.DataFrame:
    """CUDA event records: the GPU columns plus eventId, eventSyncId; start = end = the record time
    (`timestamp` in newer exports, NULL_INT where the export has no time column).

    With synchronization() they give cross-stream dependencies (record on stream A, wait on stream B).
    """
    has_time = schema_of(conn).has_column(CUDA_EVENT_TABLE, "timestamp")
    times = ("timestamp", "timestamp") if has_time else ("start", "end")
    extra = {"eventId": "eventId", "eventSyncId": "eventSyncId"}
    cols = _gpu_activity(conn, CUDA_EVENT_TABLE, extra, times=times, required=("correlationId",))
    return _frame(cols, _GPU_COLUMNS + list(extra))
