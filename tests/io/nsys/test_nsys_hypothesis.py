"""Property: a damaged export (bytes overwritten, file cut short) is InputError naming the file, or a
readable result, never another exception (issue 17). The export comes from the simulator."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extradeep.errors import InputError
from extradeep.io.nsys.inspect import inspect_export
from extradeep.io.nsys.read import read_export
from extradeep.io.read import read_replay_frames as read_file
from extradeep.simulate import simulate

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@functools.lru_cache(maxsize=1)
def export_bytes() -> bytes:
    folder = Path(tempfile.mkdtemp(prefix="extradeep-hypothesis-"))
    simulate(
        folder, params={"ranks": [2]}, repetitions=1, train_steps=2, val_steps=1, truth_replicates=0, progress=False
    )
    return min(folder.glob("*.sqlite")).read_bytes()


def damage(data: bytes, cut: float | None, patches: list[tuple[float, bytes]]) -> bytes:
    out = bytearray(data)
    for where, chunk in patches:
        start = int(where * (len(out) - 1))
        out[start : start + len(chunk)] = chunk
    return bytes(out[: int(cut * len(out))] if cut is not None else out)


DAMAGE = st.tuples(
    st.one_of(st.none(), st.floats(0.0, 1.0)),
    st.lists(st.tuples(st.floats(0.0, 1.0), st.binary(min_size=1, max_size=64)), max_size=6),
)


def _only_input_errors(read, path: Path) -> None:
    try:
        result = read(path)
    except InputError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    assert result is not None


@FAST
@given(DAMAGE)
def test_damaged_export_is_an_input_error_for_the_step_reader(tmp_path, spec):
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(damage(export_bytes(), *spec))
    _only_input_errors(read_export, path)


@FAST
@given(DAMAGE)
def test_damaged_export_is_an_input_error_for_inspect_and_the_trace_reader(tmp_path, spec):
    path = tmp_path / "damaged.sqlite"
    data = damage(export_bytes(), *spec)
    path.write_bytes(data)
    _only_input_errors(lambda p: inspect_export(p, None), path)
    _only_input_errors(read_file, path)
    assert path.read_bytes() == data  # read-only


def test_the_undamaged_export_reads(tmp_path):
    path = tmp_path / "whole.sqlite"
    path.write_bytes(export_bytes())
    assert isinstance(read_export(path), pd.DataFrame) and not read_export(path).empty


@pytest.mark.parametrize("size", [0, 15, 99, 100, 4096])
def test_cut_at_the_header_edges(tmp_path, size):
    path = tmp_path / "cut.sqlite"
    path.write_bytes(export_bytes()[:size])
    with pytest.raises(InputError):
        read_export(path)
