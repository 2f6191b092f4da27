"""Columnar reading of one export's tables: integer columns through SQLite's group_concat into NumPy,
names through the StringIds table, the launch key that joins GPU work to the call that launched it.

`extradeep.io.nsys.events` builds the tables of the per-step sums and the replay from these.
"""

from __future__ import annotations

import numpy as np

from extradeep.columns import PID
from extradeep.errors import InputError
from extradeep.io.frames import NULL_INT, Names, unique_names
from extradeep.io.nsys.schema import schema_of
from extradeep.io.sqlite import ExportConnection, fetch_all

_NULL_SQL = "(-9223372036854775807 - 1)"
CHUNK_ROWS = 250_000  # bounds the text group_concat builds per query: less memory, fewer page faults


# ---------------------------------------------------------------------------------------------
# Columnar fetching


def int_columns(
    conn: ExportConnection,
    table: str,
    columns: dict[str, str],
    where: str = "",
    aggregates: dict[str, str] | None = None,
    text: str | None = None,
) -> dict[str, np.ndarray]:
    """Integer columns of `table` as aligned int64 arrays (output name -> SQL expression).

    SQLite renders each column as one comma-separated text (group_concat, rows in scan order for all
    aggregates of the same SELECT) that NumPy parses in C: several times faster than building a
    Python tuple per row. NULLs become NULL_INT. `aggregates` (output name -> SQL aggregate such as
    `min(x)`) are computed in the same scan; each comes back as an array with one value per chunk.
    `text`: a text column read in the same scan, its non-NULL values joined by the unit separator;
    they come back under "text" (a list in row order, or None when a value holds that character).
    """
    aggregates = aggregates or {}
    out: dict[str, list] = {name: [] for name in [*columns, *aggregates]}
    texts: list | None = []
    selected = [f"group_concat(ifnull({expr}, {_NULL_SQL}))" for expr in columns.values()] + list(aggregates.values())
    if text is not None:
        selected += [f"count({text})", f"group_concat({text}, char(31))"]
    condition = f"({where}) AND " if where else ""
    body = f'count(*), {", ".join(selected)} FROM "{table}" WHERE {condition}rowid >= ? AND rowid < ?'
    # The first chunk (rowids from 1, where SQLite starts them) comes with the table's rowid range in
    # the same statement: two scalar subqueries that SQLite answers from the b-tree (min and max in one
    # aggregate would scan the table). A small table takes one query.
    bounds = f'(SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")'
    first = fetch_all(conn, f"SELECT {bounds}, {body}", (1, 1 + CHUNK_ROWS))[0]
    low, high = first[0], first[1]
    if low is None:
        return {name: np.empty(0, np.int64) for name in out}
    chunks = {1: first[2:]}
    starts = [*range(low, 1, CHUNK_ROWS), *range(1 + CHUNK_ROWS, high + 1, CHUNK_ROWS)]
    for lo in starts:
        chunks[lo] = fetch_all(conn, f"SELECT {body}", (lo, min(lo + CHUNK_ROWS, 1) if lo < 1 else lo + CHUNK_ROWS))[0]
    for lo in sorted(chunks):  # rowid order, as the scan
        row = chunks[lo]
        n = row[0]
        for name, text in zip(columns, row[1:]):
            out[name].append(parse_ints(conn, table, columns[name], text, n))
        for name, value in zip(aggregates, row[1 + len(columns) :]):
            out[name].append(np.array([NULL_INT if value is None else value], dtype=np.int64))
        if text is not None and texts is not None:
            count, joined = row[-2:]
            found = str(joined).split("\x1f") if count else []
            texts = texts + found if len(found) == count else None
    result = {name: parts[0] if len(parts) == 1 else np.concatenate(parts) for name, parts in out.items()}
    if text is not None:
        result["text"] = texts
    return result


def parse_ints(conn, table: str, column: str, text, n: int) -> np.ndarray:
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


def col(column: str) -> tuple[str, str]:
    return column, f'"{column}"'


def pid_column(column: str) -> tuple[str, str]:
    return column, f'(("{column}" >> 24) & 16777215)'


def tid_column(column: str) -> tuple[str, str]:
    return column, f'("{column}" & 16777215)'


def launch_key_column(column: str) -> tuple[str, str]:
    """pid << 32 | correlationId: joins GPU work to the runtime call of the same process that
    launched it (correlationIds repeat across processes); one column instead of two. `column`
    (globalTid or globalPid) holds the pid; `table_columns` builds the key in NumPy."""
    return "correlationId", column


def table_columns(
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
    pid_col = spec.pop("launchKey", (None, None))[1]
    wants_key = pid_col is not None and "correlationId" in present
    exprs = {name: expr for name, (col, expr) in spec.items() if col in present}
    if wants_key:
        exprs.setdefault("correlationId", '"correlationId"')
    pid_expr = pid_column(pid_col)[1] if wants_key and pid_col in present else None
    # the raw column's range: when min and max share the bits above the tid, so do all rows between
    ranges = {"id_min": f'min("{pid_col}")', "id_max": f'max("{pid_col}")', "id_n": f'count("{pid_col}")'}
    aggregates = ranges if pid_expr else {}
    if "deviceId" in present and table in DEVICE_TABLES:  # the placement's device, from this scan
        aggregates = {**aggregates, **DEVICE_AGGREGATES}
    data = int_columns(conn, table, exprs, aggregates=aggregates)
    n = len(data[next(iter(exprs))]) if exprs else 0
    if "dev_n" in data:
        note_devices(conn, table, data["dev_min"], data["dev_max"], data["dev_n"], n)
    out = {name: data[name] if name in data else np.full(n, NULL_INT, np.int64) for name in spec}
    if pid_col is not None:
        out["launchKey"] = _key_of(conn, table, data, pid_expr, n) if wants_key else np.full(n, NULL_INT, np.int64)
    return out


DEVICE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
# min and max only when they are integers (a damaged file's TEXT or REAL sorts among them): the
# CASE applies to the aggregates' results, once per statement, not to each row
DEVICE_AGGREGATES = {
    "dev_min": """CASE WHEN typeof(min("deviceId")) = 'integer' THEN min("deviceId") END""",
    "dev_max": """CASE WHEN typeof(max("deviceId")) = 'integer' THEN max("deviceId") END""",
    "dev_n": 'count("deviceId")',
}


def note_devices(conn, table: str, low, high, known, rows: int) -> None:
    """Keep on the connection what a scan of a GPU table saw of its deviceId (per chunk: min, max,
    non-NULL count; NULL_INT where a chunk has none or they are not integers), so the placement's
    device (`extradeep.io.nsys.layout`) needs no scan of its own when one device did all the work.
    A chunk with values but no integer range leaves no range: the placement then asks SQLite."""
    low, high, known = (np.asarray(v, dtype=np.int64) for v in (low, high, known))
    some = known > 0
    plain = some.any() and not ((low[some] == NULL_INT) | (high[some] == NULL_INT)).any()
    span = (int(low[some].min()), int(high[some].max())) if plain else (None, None)
    devices = getattr(conn, "_extradeep_devices", None)
    if devices is None:
        devices = conn._extradeep_devices = {}
    devices[table] = (*span, int(known.sum()), rows)


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
        pid = int_columns(conn, table, {"pid": pid_expr})[PID]
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

    def names(self, ids: np.ndarray, missing: str = "<unknown name id {}>") -> Names:
        """Names for `ids`; unresolvable ids are named explicitly, never dropped."""
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
        return unique_names(codes, names)

    def names_of_each(self, id_arrays: list[np.ndarray], missing: str = "<unknown name id {}>") -> list[Names]:
        """`names` of several tables' ids, resolved together (one search for all): each table's
        Names share one list of names, in id order as each table's own would be, and an unresolved id
        is noted per table, as `names` would note it."""
        if len(id_arrays) < 2:
            return [self.names(ids, missing) for ids in id_arrays]
        uniq, codes = _factorize_ids(np.concatenate([np.asarray(a, dtype=np.int64) for a in id_arrays]))
        names = self.lookup(uniq)
        unresolved = names == None  # noqa: E711
        for i in np.flatnonzero(unresolved):
            names[i] = missing.format(uniq[i] if uniq[i] != NULL_INT else "NULL")
        shared = unique_names(np.arange(len(uniq)), names)
        out, start = [], 0
        for ids in id_arrays:
            mine = codes[start : start + len(ids)]
            start += len(ids)
            n = int(np.count_nonzero(unresolved[mine]))
            if n:
                self.notes.append(
                    f"{n} events name string ids missing from StringIds; they are named {missing.format('N')}"
                )
            out.append(Names(shared.codes[mine], shared.categories))
        return out


def _factorize_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct ids, code of each id): O(n) through a presence table for many dense ids (the
    ids StringIds uses), sorting otherwise (cheaper for a small table than a table of every id)."""
    if len(ids) > 4096 and ids.min() >= 0 and ids.max() < 4 * len(ids):
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
