"""The saved-experiment format: one SQLite file of plain tables that any SQL tool can read.

Tables: `extradeep_meta(key, value)` (format `extradeep-experiment`, version, params), `measurements`,
`measurements_by_rep`, `regions`, `parameters`, `provenance`, `settings(key, value JSON)`, `problems`,
and, once models are saved, `models` and `models_meta`. This module only moves tables in and out;
what they mean is :class:`extradeep.aggregate.experiment.Experiment`'s business.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import tempfile
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from extradeep import __version__
from extradeep.columns import REGION_KEYS, REP, VALUE
from extradeep.errors import InputError
from extradeep.io.formats import META_TABLE
from extradeep.io.sqlite import open_readonly

FORMAT = "extradeep-experiment"
TABLES = ("measurements", "measurements_by_rep", "provenance")  # read back on load
_MEASURED = (*REGION_KEYS, VALUE)
# columns a saved experiment cannot be used without (besides one column per modeled parameter)
REQUIRED_COLUMNS = {
    "measurements": (*_MEASURED, "modelable"),
    "measurements_by_rep": (*_MEASURED, REP),
    "provenance": ("path",),
}
DAMAGED = "damaged saved experiment"


@dataclass
class SavedExperiment:
    """The raw contents of a saved experiment file: metadata, the tables read back, settings and problems."""

    meta: dict
    tables: dict
    settings: dict
    problems: list
    models: dict | None = None  # {"models": DataFrame, "meta": dict} when models were saved


def write_experiment(path, meta: dict, tables: dict, settings: dict, problems: list) -> None:
    """Write the tables to `path` (replacing an earlier extradeep experiment, never anything else),
    atomically: a crash leaves the earlier file or nothing, never half a file."""
    import sqlite_utils

    with atomic_path(path) as tmp:
        db = sqlite_utils.Database(tmp)
        meta = {"format": FORMAT, "version": __version__, **meta}
        _write(db, META_TABLE, pd.DataFrame({"key": list(meta), "value": list(meta.values())}))
        for name, frame in tables.items():
            _write(db, name, frame)
        rows = {"key": list(settings), "value": [json.dumps(v) for v in settings.values()]}
        _write(db, "settings", pd.DataFrame(rows, dtype=object))
        _write(db, "problems", pd.DataFrame({"problem": list(problems)}, dtype=object))
        db.conn.commit()
        db.close()


@contextmanager
def atomic_path(path):
    """A temporary file name in `path`'s folder to write to; on success it replaces `path` in one
    step (os.replace), on failure it is removed. `path` may only be an earlier extradeep experiment."""
    path = Path(path)
    if path.exists() and not is_saved_experiment(path):
        raise InputError(path, "exists and is not an extradeep experiment; refusing to overwrite it")
    with replaced_atomically(path, "cannot write here") as tmp:
        yield tmp


@contextmanager
def replaced_atomically(path, problem: str = "cannot write here"):
    """A not-yet-existing temporary name beside `path`: whatever is written there replaces `path`
    in one step when the block ends, and is removed when it fails, so no reader ever sees half a
    file. No temporary file there becomes one line, `path: problem (reason)`."""
    path = Path(path)
    try:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(path, f"{problem} ({exc.strerror})") from None
    os.close(handle)
    tmp = Path(name)
    tmp.unlink()  # writers (sqlite, open) create the file themselves
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_saved(path) -> SavedExperiment:
    """The tables of a saved experiment, opened read-only; a damaged one (a table or column
    missing, a setting that is not JSON) is refused with one line saying what is missing."""
    if not is_saved_experiment(path):
        from extradeep.io.sqlite import check_header

        check_header(Path(path))  # an empty, non-SQLite or truncated file is said to be one
        raise InputError(path, "not an experiment saved by extradeep")
    with closing(open_readonly(path)) as conn:
        present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in (*TABLES, "settings", "problems") if t not in present]
        if missing:
            raise InputError(
                path,
                f"{DAMAGED}: table {', '.join(missing)} missing (save it again with `extradeep model PROFILES --save`)",
            )
        try:
            meta = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
            tables = {name: pd.read_sql(f"SELECT * FROM [{name}]", conn) for name in TABLES}
            settings = dict(conn.execute("SELECT key, value FROM settings").fetchall())
            problems = [row[0] for row in conn.execute("SELECT problem FROM problems")]
            models = None
            if {"models", "models_meta"} <= present:
                models = {
                    "models": pd.read_sql("SELECT * FROM models", conn),
                    "meta": dict(conn.execute("SELECT key, value FROM models_meta").fetchall()),
                }
        except (sqlite3.Error, pd.errors.DatabaseError) as exc:
            raise InputError(path, f"{DAMAGED}: {exc}") from None
    params = _json(path, meta.get("params"), "the parameter list (extradeep_meta 'params')")
    if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
        raise InputError(path, f"{DAMAGED}: the parameter list (extradeep_meta 'params') is not a list of names")
    for name, required in REQUIRED_COLUMNS.items():
        lacking = [c for c in (*required, *(params if name != "provenance" else ())) if c not in tables[name]]
        if lacking:
            raise InputError(path, f"{DAMAGED}: table {name} lacks column(s) {', '.join(lacking)}")
    settings = {k: _json(path, v, f"setting {k!r}") for k, v in settings.items()}
    if models is not None:
        models["meta"] = {k: _json(path, v, f"models_meta {k!r}") for k, v in models["meta"].items()}
    return SavedExperiment(meta, tables, settings, problems, models)


def _json(path, text, what: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        raise InputError(path, f"{DAMAGED}: {what} is missing or not valid JSON ({str(text)[:40]!r})") from None


def is_saved_experiment(path) -> bool:
    """True for an SQLite file written by `Experiment.save` (detected by its metadata table)."""
    try:
        with closing(open_readonly(path)) as conn:
            row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'format'").fetchone()
    except (InputError, sqlite3.DatabaseError):
        return False
    return bool(row) and row[0] == FORMAT


def _write(db, name: str, frame: pd.DataFrame) -> None:
    columns = {c: _sql_type(frame[c]) for c in frame.columns}
    db[name].create(columns)
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    db[name].insert_all(records, batch_size=2000)


def _sql_type(column: pd.Series):
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_integer_dtype(column):
        return int
    return float if pd.api.types.is_float_dtype(column) else str


def json_safe(value):
    """JSON-safe values: NaN/inf become None, numpy scalars plain Python, dict keys strings."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
