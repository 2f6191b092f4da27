"""Simulator exports for the nsys reader tests (session-scoped: generated once, a few MB)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from extradeep.simulate import simulate

# tests/conftest.py (real exports: require_real, real_exports), loaded by path: "conftest" is this file here.
_spec = importlib.util.spec_from_file_location(
    "extradeep_tests_root_conftest", Path(__file__).parents[2] / "conftest.py"
)
ROOT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ROOT)


def pytest_generate_tests(metafunc):
    """`real_export` runs a test once per real export (skipped, or failed under CI, when absent)."""
    if "real_export" in metafunc.fixturenames:
        names = [p.name for p in ROOT.real_exports()] or [None]
        metafunc.parametrize("real_export_name", names, ids=[n or "absent" for n in names])


@pytest.fixture
def real_export(real_export_name) -> Path:
    return ROOT.require_real(real_export_name) if real_export_name else ROOT.require_real()


@pytest.fixture(scope="session")
def real():
    """real(name) -> path of one real export (skips when the folder is absent)."""
    return ROOT.require_real


SMALL = dict(params={"ranks": [2, 3]}, repetitions=1, train_steps=4, val_steps=2, noise=(0.0, 0.0, 0.0), seed=5)


def _simulate(factory, name, **kw):
    outdir = factory.mktemp(name)
    simulate(outdir, **{**SMALL, **kw})
    return outdir


@pytest.fixture(scope="session")
def sim_ranges(tmp_path_factory) -> Path:
    """Extra-Deep ranges with registered categories, nsys 2026.2 layout, NVTX text."""
    return _simulate(tmp_path_factory, "nsys_ranges", marks="ranges", layout="2026")


@pytest.fixture(scope="session")
def sim_marks_old(tmp_path_factory) -> Path:
    """Extra-Deep start/end marks, nsys 2022.1 layout (EXPORT_META_DATA), registered strings (textId),
    weak scaling."""
    return _simulate(
        tmp_path_factory, "nsys_marks", marks="marks", layout="2022", nvtx_strings="textId", scaling="weak"
    )


@pytest.fixture(scope="session")
def sim_profiler(tmp_path_factory) -> Path:
    """PyTorch ProfilerStep#N ranges (no epoch marks) with a DDP-like schedule."""
    return _simulate(tmp_path_factory, "nsys_profiler", marks="profiler", ddp=True)


def _altered_copy(src: Path, dest_dir: Path, *statements: str, name: str | None = None) -> Path:
    """A copy of `src` in `dest_dir` with SQL `statements` applied to the COPY (never to `src`)."""
    dest = Path(dest_dir) / (name or Path(src).name)
    shutil.copyfile(src, dest)
    dest.chmod(0o644)
    conn = sqlite3.connect(dest)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    return dest


@pytest.fixture(scope="session")
def altered_copy():
    """altered_copy(src, dest_dir, *sql, name=None) -> path of a modified copy of an export."""
    return _altered_copy


def _sql(path, query: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="session")
def sql():
    """sql(path, query) -> rows, straight from SQLite (read-only): the reference the reader is checked against."""
    return _sql


@pytest.fixture(scope="session")
def truth_of():
    """truth_of(outdir) -> the simulator's truth.json as a dict."""
    return lambda outdir: json.loads((Path(outdir) / "truth.json").read_text())
