"""Nsight Systems export layouts (DDL copied from real exports) and a lazy, columnar table writer.

`schema_2026.json` holds the DDL of an nsys 2026.2.1 export (tables it lacks come from the 2026.1.1
and 2025.3.2 exports, and cuBLAS/cuDNN/MPI tables, which no collected export has, from NVIDIA's
schema reference, written in the exporter's style), with every ENUM_* table's rows.
`schema_2022.json` is the 2022.1.3 layout (EXPORT_META_DATA, no ENUM tables). Each JSON records the
source file of every table's DDL, so tests can compare it with the real export.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

LAYOUTS = ("2026", "2022")


@dataclass(frozen=True)
class Layout:
    """One nsys export layout: DDL per table, ENUM rows, export metadata rows."""

    name: str
    version: str
    schema_version: str
    metadata_table: str
    tables: dict
    source: dict
    enum_rows: dict
    export_metadata: list

    def has(self, table: str) -> bool:
        return table in self.tables


@cache
def load_layout(name: str) -> Layout:
    if name not in LAYOUTS:
        raise ValueError(f"unknown layout {name!r}; choose one of {', '.join(LAYOUTS)}")
    text = resources.files("extradeep.simulate").joinpath(f"schema_{name}.json").read_text()
    return Layout(name=name, **json.loads(text))


class StringTable:
    """Interns strings into StringIds ids (0-based, in first-use order) as the exporter does."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.ids)
        return found

    def many(self, values) -> np.ndarray:
        return np.array([self(v) for v in values], dtype=np.int64)

    def rows(self) -> list[tuple[int, str]]:
        return [(i, v) for v, i in self.ids.items()]


class ExportWriter:
    """Creates tables of one layout on first use and inserts columnar data by column name.

    Columns not given are filled like the exporter does: NULL where allowed, 0 (or '[]' for the
    TEXT NOT NULL tensor-size column) where NOT NULL; values for columns an older layout lacks are
    dropped. A table is created only when rows arrive, matching lazy exports.
    """

    def __init__(self, conn: sqlite3.Connection, layout: Layout):
        self.conn, self.layout = conn, layout
        self._columns: dict[str, list[tuple[str, str, bool]]] = {}

    def columns(self, table: str) -> list[tuple[str, str, bool]]:
        if table not in self._columns:
            self.conn.execute(self.layout.tables[table])
            info = self.conn.execute(f"PRAGMA table_info([{table}])").fetchall()
            self._columns[table] = [(row[1], row[2].upper(), bool(row[3])) for row in info]
        return self._columns[table]

    def insert(self, table: str, n: int, **data) -> None:
        """Insert n rows; each keyword is a column: a scalar, a sequence or a NumPy array of length n."""
        if n == 0 or not self.layout.has(table):
            return
        cols = self.columns(table)
        series = [_column(data.get(name), n, typ, notnull) for name, typ, notnull in cols]
        marks = ",".join("?" * len(cols))
        self.conn.executemany(f"INSERT INTO [{table}] VALUES ({marks})", zip(*series))

    def insert_rows(self, table: str, rows: list[tuple]) -> None:
        if rows and self.layout.has(table):
            self.columns(table)
            marks = ",".join("?" * len(rows[0]))
            self.conn.executemany(f"INSERT INTO [{table}] VALUES ({marks})", rows)

    def write_enums(self) -> None:
        for table, rows in self.layout.enum_rows.items():
            self.insert_rows(table, [tuple(r) for r in rows])


def _column(value, n: int, typ: str, notnull: bool) -> list:
    if value is None:
        fill = ("[]" if typ == "TEXT" else 0) if notnull else None
        return [fill] * n
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            value = np.rint(value).astype(np.int64) if typ == "INTEGER" else value
        return value.tolist()
    if isinstance(value, (list, tuple)):  # NumPy scalars would be stored as blobs
        return [v.item() if isinstance(v, np.generic) else v for v in value]
    return [value.item() if isinstance(value, np.generic) else value] * n
