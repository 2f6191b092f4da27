"""Probe which tables and columns an export has: tables are created lazily and versions add columns."""

from __future__ import annotations

from extradeep.errors import InputError
from extradeep.io.formats import META_TABLE
from extradeep.io.sqlite import ExportConnection, fetch_all, query

# NVTX registration rows (ENUM_NSYS_EVENT_TYPE); the event types of ranges and marks are in io.frames
NVTX_CATEGORY = 33
NVTX_DOMAIN_CREATE = 75
NVTX_DOMAIN_DESTROY = 76

METADATA_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2023.3+ and 2022.1-2023.2


# (columns, NOT NULL columns) by CREATE TABLE statement: the exports of one study share their
# statements, and a PRAGMA per table costs a tenth of reading a small export. Bounded: kept small.
_COLUMNS_OF_STATEMENT: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
_STATEMENTS_KEPT = 1024


class Schema:
    """The tables of one export and, on demand, their columns (PRAGMA table_info works for every DDL
    style; its answer is a function of the table's CREATE TABLE statement, so it is kept by it)."""

    def __init__(self, conn: ExportConnection):
        self._conn = conn
        self._sql = getattr(conn, "table_sql", None) or {}
        tables = getattr(conn, "tables", None)  # read when the connection was opened
        if tables is None:
            tables = tuple(r[0] for r in query(conn, "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall())
        self.tables = tables
        self._tables = set(self.tables)
        self._columns: dict[str, tuple[str, ...]] = {}
        self._not_null: dict[str, frozenset[str]] = {}

    def has(self, table: str) -> bool:
        return table in self._tables

    def columns(self, table: str) -> tuple[str, ...]:
        """Column names of `table`, or () when the table is absent."""
        if table not in self._columns:
            if not self.has(table):
                return ()
            statement = self._sql.get(table)
            known = _COLUMNS_OF_STATEMENT.get(statement) if isinstance(statement, str) else None
            if known is None:
                rows = query(self._conn, f'PRAGMA table_info("{table}")').fetchall()
                known = tuple(r[1] for r in rows), frozenset(r[1] for r in rows if r[3])
                if isinstance(statement, str) and len(_COLUMNS_OF_STATEMENT) < _STATEMENTS_KEPT:
                    _COLUMNS_OF_STATEMENT[statement] = known
            self._columns[table], self._not_null[table] = known
        return self._columns[table]

    def not_null(self, table: str) -> frozenset[str]:
        """The columns of `table` declared NOT NULL (a value that needs no NULL check)."""
        self.columns(table)
        return self._not_null.get(table, frozenset())

    def has_column(self, table: str, column: str) -> bool:
        return column in self.columns(table)

    def first_table(self, *names: str) -> str | None:
        """The first of `names` that exists (for tables renamed between versions)."""
        return next((n for n in names if self.has(n)), None)


def schema_of(conn: ExportConnection) -> Schema:
    """The (cached) Schema of an open export."""
    cached = getattr(conn, "_extradeep_schema", None)
    if cached is None:
        cached = Schema(conn)
        conn._extradeep_schema = cached
    return cached


def metadata(conn: ExportConnection) -> dict[str, str]:
    """Export metadata (name -> value) from META_DATA_EXPORT or EXPORT_META_DATA; {} for pre-2022 files."""
    table = schema_of(conn).first_table(*METADATA_TABLES)
    if table is None:
        return {}
    return {str(k): str(v) for k, v in fetch_all(conn, f'SELECT name, value FROM "{table}"')}


def nsys_version(conn: ExportConnection) -> str | None:
    """The Nsight Systems version that wrote the export, or None where the file does not record it."""
    return metadata(conn).get("EXPORT_PRODUCT_VERSION")


def row_count(conn: ExportConnection, table: str) -> int:
    """Number of rows of `table` (0 when absent)."""
    if not schema_of(conn).has(table):
        return 0
    return int(query(conn, f'SELECT count(*) FROM "{table}"').fetchone()[0])


# Tables that only Nsight Systems writes; every export, of every version, has at least one of them.
NSYS_TABLE_PREFIXES = (
    "StringIds",
    "ThreadNames",
    "CUPTI_ACTIVITY_KIND_",
    "TARGET_INFO_",
    "NVTX_EVENTS",
    "ENUM_NSYS_",
    "META_DATA_",
    "EXPORT_META_DATA",
    "OSRT_API",
    "PROCESSES",
)


def require_nsys_export(conn: ExportConnection) -> None:
    """Refuse, in one line, an SQLite database that is not an Nsight Systems export (an easy mix-up:
    any .sqlite file), instead of describing it as an old export without step marks."""
    tables = schema_of(conn).tables
    if META_TABLE in tables:
        raise InputError(
            None,
            "an experiment saved by extradeep, not an Nsight Systems export "
            "(read it with `extradeep model FILE` or `extradeep report FILE`)",
        )
    if not any(t.startswith(NSYS_TABLE_PREFIXES) for t in tables):
        shown = ", ".join(tables[:4]) + (", ..." if len(tables) > 4 else "") if tables else "no tables"
        raise InputError(
            None,
            f"an SQLite database but not an Nsight Systems export (tables: {shown}); "
            "export the report with `nsys export --type sqlite`",
        )
