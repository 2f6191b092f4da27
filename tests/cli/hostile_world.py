"""The inputs of the hostile CLI cases (test_cli_hostile.py): simulator output (a strong-scaling study
from 1 rank, a single configuration, an old export layout, Kineto traces, a saved experiment and
damaged copies of it), files hostile by construction (a plain SQLite database, a text file, a
truncated export, a named pipe, JSON that is no trace), and variants of Extra-P's own text-format
test inputs (tests/modeling/data/extrap_text_inputs)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.cli import main
from extradeep.modeling import write_extrap_text
from extradeep.simulate import simulate

SMALL = {"repetitions": 1, "train_steps": 2, "val_steps": 1, "truth_replicates": 0, "progress": False}
REPO = Path(__file__).resolve().parents[2]
EXTRAP = REPO / "tests" / "modeling" / "data" / "extrap_text_inputs"


def build_world(root: Path) -> None:
    """Every input the hostile cases use, under `root` (see the module docstring)."""
    simulate(root / "runs", params={"ranks": [1, 2, 3, 4, 5]}, **SMALL)
    simulate(root / "single", app="other", params={"ranks": [2]}, **SMALL)
    simulate(root / "old", app="oldapp", params={"ranks": [2]}, layout="2022", **SMALL)
    (root / "empty").mkdir()
    mixed = root / "mixed"  # two unrelated exports: another nsys version, another application
    mixed.mkdir()
    shutil.copy(root / "runs" / "cifar10.p2.r1.mpi0.sqlite", mixed / "first.sqlite")
    shutil.copy(next((root / "old").glob("*.sqlite")), mixed / "second.sqlite")
    with closing(sqlite3.connect(root / "plain.sqlite")) as conn, conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    (root / "garbage.txt").write_text("PARAMETER p\nPOINTS ( 1 ) ( 2 )\nREGION r\nDATA 1 two\n")
    export = (root / "runs" / "cifar10.p3.r1.mpi0.sqlite").read_bytes()
    (root / "truncated.sqlite").write_bytes(export[: len(export) // 3])
    _extrap_from_one(root / "two_from_one.txt")
    p = np.array([0.0, 2, 4, 8, 16, 32])  # a value of 0 cannot be modeled: a warning, one line
    write_extrap_text(
        root / "with_zero.txt", pd.DataFrame({"p": p, "value": 1 + p, "region": "r", "metric": "time"}), ["p"]
    )
    _kineto(root)
    _extrap_variants(root / "extrap")
    _broken_files(root)
    out = root / "out"
    out.mkdir()
    cache = ["--cache-dir", str(root / "cache")]
    assert main(["model", str(root / "runs"), *cache, "--save", str(root / "exp.sqlite")]) == 0
    _damage(root)


def _extrap_from_one(path: Path) -> None:
    """Two parameters, the second from 1 (1 node, batch 1): 10 + p/2 + 3 log2(n); Extra-P models it."""
    X = np.array([[p, n] for p in (4.0, 8, 16, 32, 64) for n in (1.0, 2, 4, 8, 16)])
    values = 10 + 0.5 * X[:, 0] + 3 * np.log2(X[:, 1])
    write_extrap_text(
        path, pd.DataFrame(X, columns=["p", "n"]).assign(value=values, region="k", metric="time"), ["p", "n"]
    )


def _kineto(root: Path) -> None:
    """PyTorch profiler traces: a study (ranks 1, 2), another job (4 ranks), traces of different jobs in one
    folder (by file names that do not tell), a trace without step ranges, and two JSON files that are no
    usable trace (no trace events; string times and NaN durations)."""
    simulate(root / "kineto", params={"ranks": [1, 2]}, formats=("kineto",), **SMALL)
    simulate(root / "kineto_other", app="other", params={"ranks": [4]}, formats=("kineto",), **SMALL)
    jobs, many = root / "kineto_jobs", root / "kineto_many"
    jobs.mkdir()
    many.mkdir()
    shutil.copy(root / "kineto" / "cifar10.p2.r1.mpi1.pt.trace.json.gz", jobs / "a.pt.trace.json.gz")
    shutil.copy(root / "kineto_other" / "other.p4.r1.mpi0.pt.trace.json.gz", jobs / "b.pt.trace.json.gz")
    traces = sorted((root / "kineto").glob("*.json.gz")) + sorted((root / "kineto_other").glob("*.json.gz"))
    for i, trace in enumerate(traces):  # every trace of three runs of two jobs
        shutil.copy(trace, many / f"trace{i}.pt.trace.json.gz")
    doc = json.loads(gzip.decompress((root / "kineto" / "cifar10.p2.r1.mpi0.pt.trace.json.gz").read_bytes()))
    (root / "no_steps").mkdir()
    events = [e for e in doc["traceEvents"] if e.get("cat") != "user_annotation"]  # no step ranges
    (root / "no_steps" / "job.pt.trace.json").write_text(json.dumps({**doc, "traceEvents": events}))
    damaged = [{**e, "ts": str(e["ts"]), "dur": float("nan")} if e.get("ph") == "X" else e for e in doc["traceEvents"]]
    (root / "string_times.json").write_text(json.dumps({**doc, "traceEvents": damaged}))
    (root / "numbers.json").write_text("[1, 2, 3]")


def _extrap_variants(folder: Path) -> None:
    """Extra-P's own one-parameter input with its fields separated by tabs, with a point listed twice,
    with 2 DATA lines for its 5 POINTS, and with values near the float limit (1e308)."""
    folder.mkdir()
    text = (EXTRAP / "one_parameter_1.txt").read_text()
    lines = text.splitlines()
    points = [line for line in lines if line.startswith("POINTS")]
    data = [line for line in lines if line.startswith("DATA")]
    (folder / "tabs.txt").write_text(re.sub(r"[ ]+", "\t", text))
    (folder / "duplicate_points.txt").write_text(text.replace(points[1], points[0]))
    (folder / "two_data_lines.txt").write_text("\n".join(line for line in lines if line not in data[2:]) + "\n")
    huge = [re.sub(r"\d+\.\d+", lambda m: repr(float(m[0]) * 1e305), x) if x in data else x for x in lines]
    (folder / "huge_values.txt").write_text("\n".join(huge) + "\n")


def _broken_files(root: Path) -> None:
    """A zero-byte and a garbage .sqlite, a named pipe called like an export, a folder whose
    extradeep.toml holds a bad value."""
    (root / "zero.sqlite").write_bytes(b"")
    (root / "garbage.sqlite").write_bytes(b"not a database " * 64)
    os.mkfifo(root / "pipe.sqlite")  # opening it for reading would wait for a writer forever
    configured = root / "configured"
    configured.mkdir()
    shutil.copy(root / "runs" / "cifar10.p2.r1.mpi0.sqlite", configured)
    (configured / "extradeep.toml").write_text((root / "runs" / "extradeep.toml").read_text() + "min-points = 0\n")


def _damage(root: Path) -> None:
    """Copies of the saved experiment, each damaged as a crash or a hand edit would."""
    edits = {
        "no_table": "DROP TABLE measurements",
        "bad_settings": "UPDATE settings SET value = '{not json' WHERE key = 'dataset'",
        "no_column": "ALTER TABLE measurements DROP COLUMN value",
        "no_params": "DELETE FROM extradeep_meta WHERE key = 'params'",
        "bad_dataset": "UPDATE settings SET value = '{\"wrong\": 1}' WHERE key = 'dataset'",
    }
    for name, sql in edits.items():
        target = root / f"damaged_{name}.sqlite"
        shutil.copy(root / "exp.sqlite", target)
        with closing(sqlite3.connect(target)) as conn, conn:
            conn.execute(sql)
