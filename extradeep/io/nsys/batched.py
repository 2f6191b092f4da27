"""The event tables of the per-step sums of a small export, read in a few statements instead of dozens.

On a small export each table's statements and their Python bookkeeping cost more than its rows: one
statement reads them all, the GPU tables (kernels,
memcpy, memset) and the CPU-side calls (CUDA runtime, OS runtime, cuBLAS, cuDNN, MPI), as a `UNION ALL`
of one aggregate row per table (each table scanned on its own, each column one group_concat text,
as its own statement would). The Tables are the ones `extradeep.io.nsys.events` gives table by table,
with the columns the sums read; a large export (`SMALL_BYTES`), or a missing required column, goes
through the table-by-table reader (which reads in rowid chunks and words the errors).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from extradeep.columns import BYTES, CORR, END, NAME, START
from extradeep.errors import InputError
from extradeep.io import categories as cat
from extradeep.io.frames import NULL_INT, Names, Table, unique_names
from extradeep.io.nsys import events as ev
from extradeep.io.nsys.events import memcpy_labels
from extradeep.io.nsys.fetch import (
    DEVICE_AGGREGATES,
    DEVICE_TABLES,
    check_durations,
    fetch_all,
    note_devices,
    parse_ints,
    pid_of,
    strings,
)
from extradeep.io.nsys.schema import schema_of

_NULL_SQL = "(-9223372036854775807 - 1)"
SMALL_BYTES = 16 * 2**20  # an export this small holds few enough rows for one text per column
FIELDS = ("start", "end", "name", "corr", "bytes", "gid")  # what every arm selects (NULL where a table has none)


def _arm(conn, tag: int, table: str, source: dict[str, str | None], required: tuple[str, ...]) -> str | None:
    """`SELECT tag, count(*), group_concat(<field>)...` of one table, its columns by `source` (field ->
    column; a field the table lacks is a plain NULL); None when a required column is missing. Short
    on purpose: compiling a statement costs as much as running it on a small export."""
    schema = schema_of(conn)
    present, not_null = schema.columns(table), schema.not_null(table)
    if any(c not in present for c in required):
        return None
    parts = []
    for field in FIELDS:
        column = source.get(field)
        if column not in present:
            parts.append("NULL")
        elif column in not_null:
            parts.append(f'group_concat("{column}")')
        else:
            parts.append(f'group_concat(ifnull("{column}", {_NULL_SQL}))')
    # the deviceId range of a GPU table, for the placement's device (`fetch.note_devices`)
    device = "deviceId" in present and table in DEVICE_TABLES
    parts += DEVICE_AGGREGATES.values() if device else ["NULL"] * len(DEVICE_AGGREGATES)
    return f'SELECT {tag}, count(*), {", ".join(parts)} FROM "{table}"'


def _read_group(conn, arms: list[str]) -> dict[int, dict[str, np.ndarray]]:
    """One statement: the `UNION ALL` of the tables' aggregate rows (each table scanned on its own, in
    rowid order, as its own statement would). tag -> field -> int64 array (NULL_INT for NULL)."""
    out = {}
    for row in fetch_all(conn, " UNION ALL ".join(arms)):
        tag, n = row[0], row[1]
        out[tag] = {
            f: np.full(n, NULL_INT, np.int64) if text is None and n else parse_ints(conn, "(small tables)", f, text, n)
            for f, text in zip(FIELDS, row[2:])
        }
        out[tag]["devices"] = row[2 + len(FIELDS) :]
    return out


def _small(conn) -> bool:
    """Small enough to read in one statement (the file's size bounds its rows; no query needed)."""
    try:
        return Path(conn.path).stat().st_size <= SMALL_BYTES
    except OSError:
        return False


def _launch_key(gid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """pid << 32 | correlationId, as `extradeep.io.nsys.fetch` builds it (NULL_INT where either is NULL)."""
    pid = np.where(gid == NULL_INT, NULL_INT, pid_of(gid))
    key = (pid << 32) | (corr & 0xFFFFFFFF)
    return np.where((pid == NULL_INT) | (corr == NULL_INT), NULL_INT, key)


def sum_tables(conn, kernel_names: str = "short") -> dict | None:
    """kernels, memcpy, memset, runtime, osrt, library ({library: table}) and the MPI_*_EVENTS tables
    ("mpi_tables", a list) of a small export, as the per-step sums read them; None when the export is
    not small or not plain enough to read this way."""
    schema = schema_of(conn)
    gpu = {"kernels": ev.KERNEL_TABLE, "memcpy": ev.MEMCPY_TABLE, "memset": ev.MEMSET_TABLE}
    cpu = {"runtime": ev.RUNTIME_TABLE, "osrt": ev.OSRT_TABLE, **ev.LIBRARY_TABLES}
    cpu.update({f"mpi:{t}": t for t in ev.MPI_TABLES})
    if not any(schema.has(t) for t in (*gpu.values(), *cpu.values())) or not _small(conn):
        return None
    name = {"short": "shortName", "demangled": "demangledName"}[kernel_names]
    gpu_source = {
        ev.KERNEL_TABLE: {"name": name},
        ev.MEMCPY_TABLE: {"name": "copyKind", "bytes": "bytes"},
        ev.MEMSET_TABLE: {"bytes": "bytes"},
    }
    kinds, arms = [], []
    for kind, table in gpu.items():
        if schema.has(table):
            source = {"start": "start", "end": "end", "corr": "correlationId", "gid": "globalPid", **gpu_source[table]}
            arms.append(_arm(conn, len(arms), table, source, ("start",)))
            kinds.append(kind)
    cpu_kinds, cpu_arms = [], []
    for kind, table in cpu.items():
        if schema.has(table):
            mpi = kind.startswith("mpi:")
            name_column = ev.mpi_name_column(conn, table) if mpi else "nameId"
            source = {"start": "start", "end": "end", "name": name_column}  # the launch key: runtime only
            source.update({"corr": "correlationId", "gid": "globalTid"} if kind == "runtime" else {})
            source.update({"bytes": "size"} if mpi else {})
            cpu_arms.append(_arm(conn, len(arms) + len(cpu_arms), table, source, ("start", "end", name_column)))
            cpu_kinds.append(kind)
    if None in arms or None in cpu_arms:
        return None
    try:
        read = _read_group(conn, arms + cpu_arms)
    except InputError:  # a value that is no integer: the table-by-table reader names its table
        return None
    read = {kind: read[i] for i, kind in enumerate(kinds + cpu_kinds)}
    tables = {**gpu, **cpu}
    # checked and named in the table-by-table reader's order, so errors and notes come in that order too
    order = [
        "runtime",
        "kernels",
        "memcpy",
        "memset",
        "osrt",
        *ev.LIBRARY_TABLES,
        *(k for k in cpu if k.startswith("mpi:")),
    ]
    for kind in order:
        if kind in read:
            check_durations(conn, tables[kind], read[kind][START], read[kind][END])
    for kind in gpu:
        low, high, known = read[kind].pop("devices") if kind in read else (None,) * 3
        if known is not None:
            null = NULL_INT
            note_devices(
                conn,
                tables[kind],
                [null if low is None else low],
                [null if high is None else high],
                [known],
                len(read[kind][START]),
            )
    named = [k for k in order if k in read and k not in ("memcpy", "memset")]  # names from StringIds
    for kind, names in zip(named, strings(conn).names_of_each([read[k][NAME] for k in named])):
        read[kind]["names"] = names
    built = {
        kind: (_gpu_table if kind in gpu else _cpu_table)(conn, kind, read[kind]) for kind in order if kind in read
    }
    absent = {
        "runtime": lambda: ev.runtime_table(conn, columns=["launchKey"]),
        "kernels": lambda: ev.kernel_table(conn, kernel_names, columns=["launchKey"]),
        "memcpy": lambda: ev.memcpy_table(conn, columns=["launchKey", "bytes"]),
        "memset": lambda: ev.memset_table(conn, columns=["launchKey", "bytes"]),
        "osrt": lambda: ev.osrt_table(conn, columns=[]),
        **{lib: (lambda t=t: ev._cpu_calls(conn, t, "nameId", columns=[])) for lib, t in ev.LIBRARY_TABLES.items()},
    }
    out = {kind: built[kind] if kind in built else make() for kind, make in absent.items()}
    out["library"] = {lib: out.pop(lib) for lib in ev.LIBRARY_TABLES}
    out["mpi_tables"] = [built[k] for k in order if k.startswith("mpi:") and k in built]
    return out


def _gpu_table(conn, kind: str, cols: dict[str, np.ndarray]) -> Table:
    key = _launch_key(cols["gid"], cols[CORR])
    base = {"start": cols[START], "end": cols[END]}
    if kind == "kernels":
        return Table({**base, "launchKey": key, "name": cols["names"]})
    if kind == "memcpy":
        copy_kinds, codes = np.unique(cols[NAME], return_inverse=True)
        labels = memcpy_labels(conn, copy_kinds)
        names = np.array([cat.memcpy_label(int(k), labels) for k in copy_kinds], dtype=object)
        base.update(bytes=cols[BYTES], launchKey=key, copyKind=cols[NAME])
        return Table({**base, "name": unique_names(codes.ravel(), names)})
    base.update(bytes=cols[BYTES], launchKey=key)
    return Table({**base, "name": Names(np.zeros(len(key), np.int64), [cat.MEMSET_NAME])})


def _cpu_table(conn, kind: str, cols: dict[str, np.ndarray]) -> Table:
    out = {"start": cols[START], "end": cols[END]}
    if kind == "runtime":
        out["launchKey"] = _launch_key(cols["gid"], cols[CORR])
    if kind.startswith("mpi:"):
        out[BYTES] = cols[BYTES]
    return Table({**out, "name": cols["names"]})
