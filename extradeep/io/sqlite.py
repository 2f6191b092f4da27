"""Open an Nsight Systems export strictly read-only, rejecting files that are not usable SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from extradeep.errors import InputError, require_regular_file, special_file_problem

SQLITE_MAGIC = b"SQLite format 3\x00"


class ExportConnection(sqlite3.Connection):
    """An SQLite connection that remembers which export it reads (errors name the file) and what it noticed.

    `warnings` collects one-line notes about data that was read but needed care (for example names that
    are not valid UTF-8); readers pass them on to the user instead of printing.
    """

    path: Path
    warnings: list[str]
    tables: tuple[str, ...]  # the names of its tables
    table_sql: dict[str, str | None]  # each table's CREATE TABLE statement, as sqlite_master keeps it


def unreadable(exc: OSError) -> str:
    """The one-line problem of a file the OS will not let us read."""
    if isinstance(exc, PermissionError):
        return "cannot read it: permission denied (check the file's permissions)"
    return f"cannot read it ({exc.strerror or type(exc).__name__})"


def check_header(path: Path) -> None:
    """Cheap checks on the 100-byte SQLite header: catches empty, non-SQLite and truncated files."""
    require_regular_file(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:  # chmod 000, a file on an unmounted share: one line, the batch goes on
        raise InputError(path, unreadable(exc)) from None
    if size == 0:
        raise InputError(path, "empty file (0 bytes), not an Nsight Systems SQLite export")
    if not header.startswith(SQLITE_MAGIC):
        raise InputError(path, "not an SQLite database (export the report with `nsys export --type sqlite`)")
    if len(header) < 100:
        raise InputError(path, f"truncated SQLite file ({size} bytes, shorter than its header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(header[28:32], "big")
    # The in-header page count is valid when the change counter matches "version-valid-for".
    count_valid = page_count > 0 and header[24:28] == header[92:96]
    if count_valid and size < page_size * page_count:
        raise InputError(path, f"truncated SQLite file: {size} bytes on disk, its header says {page_size * page_count}")


def open_readonly(path: str | Path) -> ExportConnection:
    """Open `path` as an immutable, read-only SQLite database (`mode=ro&immutable=1`).

    Raises InputError (one line naming the file) when the file is missing, empty, not SQLite or
    truncated. Nothing is ever written to the file: not even temporary indexes or journals.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found")
    if not path.is_file():
        raise InputError(path, special_file_problem(path) or "not a file")
    check_header(path)
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, factory=ExportConnection, check_same_thread=False)
    except sqlite3.Error as exc:
        raise InputError(path, f"cannot open as SQLite ({exc})") from None
    conn.path = path
    conn.warnings = []
    try:
        conn.execute("PRAGMA query_only = 1")
        # reading the schema finds a damaged one; its tables and their statements are kept for
        # `schema_of` (one query less, and the columns of a table known by its statement)
        rows = conn.execute("SELECT name, type, sql FROM sqlite_master").fetchall()
        conn.table_sql = {name: sql for name, kind, sql in rows if kind == "table"}
        conn.tables = tuple(conn.table_sql)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a damaged schema page may not even decode
        conn.close()
        raise InputError(path, f"not a readable SQLite database ({exc})") from None
    return conn


def _damaged(conn, exc: Exception) -> InputError:
    return InputError(getattr(conn, "path", None), f"cannot read the export ({exc}); is the file truncated or damaged?")


def query(conn: ExportConnection, sql: str, params: tuple = ()) -> sqlite3.Cursor:
    """Run `sql` on an export; a damaged file becomes one InputError naming it."""
    try:
        return conn.execute(sql, params)
    except sqlite3.DatabaseError as exc:
        raise _damaged(conn, exc) from None


class _LenientDecoder:
    """Decodes TEXT as UTF-8, escaping invalid bytes as \\xNN (distinct names stay distinct) and counting them."""

    def __init__(self):
        self.bad = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.bad += 1
            return raw.decode("utf-8", "backslashreplace")


def fetch_all(conn: ExportConnection, sql: str, params: tuple = ()) -> list[tuple]:
    """All rows of `sql`. Text that is not valid UTF-8 is escaped and reported in `conn.warnings`."""
    try:
        return query(conn, sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc).lower():
            raise _damaged(conn, exc) from None
    except sqlite3.DatabaseError as exc:
        raise _damaged(conn, exc) from None
    decoder, previous = _LenientDecoder(), conn.text_factory
    conn.text_factory = decoder
    try:
        rows = query(conn, sql, params).fetchall()
    except sqlite3.DatabaseError as exc:
        raise _damaged(conn, exc) from None
    finally:
        conn.text_factory = previous
    if hasattr(conn, "warnings"):
        conn.warnings.append(
            f"{decoder.bad} names are not valid UTF-8; their undecodable bytes are shown as \\xNN escapes"
        )
    return rows
