"""Real Kineto traces (../shared/real_kineto, env EXTRADEEP_REAL_KINETO) for the Kineto reader tests."""

from __future__ import annotations

import gzip
import importlib.util
import json
from decimal import Decimal
from pathlib import Path

import pytest

# tests/conftest.py, loaded by path: "conftest" is this file here.
_spec = importlib.util.spec_from_file_location("extradeep_tests_root_conftest_kineto", Path(__file__).parents[2] / "conftest.py")
ROOT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ROOT)


def pytest_generate_tests(metafunc):
    """`real_trace` runs a test once per real trace (skipped, or failed under CI, when absent)."""
    if "real_trace" in metafunc.fixturenames:
        names = [p.name for p in ROOT.real_kineto_traces()] or [None]
        metafunc.parametrize("real_trace_name", names, ids=[(n or "absent")[5:45] for n in names])


@pytest.fixture
def real_trace(real_trace_name) -> Path:
    return ROOT.require_real_kineto(real_trace_name) if real_trace_name else ROOT.require_real_kineto()


@pytest.fixture(scope="session")
def real_kineto():
    """real_kineto(name) -> path of one real trace (skips, or fails under CI, when absent)."""
    return ROOT.require_real_kineto


@pytest.fixture(scope="session")
def plain_json():
    """The trace as the standard library reads it, numbers with a fraction as exact Decimals: the
    independent reference for counts and times."""
    cache = {}

    def load(path: Path) -> dict:
        if path not in cache:
            with gzip.open(path) as fh:
                cache[path] = json.load(fh, parse_float=Decimal)
        return cache[path]

    return load
