"""A small export's event tables read in two statements give exactly what the table-by-table reader
gives: the same per-step sums, the same notes, the same errors."""

from __future__ import annotations

import pandas as pd
import pytest

import extradeep.io.nsys.batched as batched
from extradeep.errors import InputError
from extradeep.io.nsys import events
from extradeep.io.nsys.read import read_export
from extradeep.io.sqlite import open_readonly


def _one_by_one(monkeypatch):
    monkeypatch.setattr(batched, "SMALL_BYTES", -1)  # every export counts as large: table by table


@pytest.mark.parametrize("fixture", ["sim_ranges", "sim_marks_old", "sim_profiler"])
@pytest.mark.parametrize("settings", [None, {"kernel_names": "demangled", "warmup_epochs": 0}])
def test_batched_reading_gives_the_same_sums(request, monkeypatch, fixture, settings):
    path = sorted(request.getfixturevalue(fixture).glob("*.sqlite"))[-1]
    conn = open_readonly(path)
    try:
        assert batched.sum_tables(conn) is not None  # small enough: the batched path is the one tested
    finally:
        conn.close()
    together = read_export(path, settings)
    _one_by_one(monkeypatch)
    alone = read_export(path, settings)
    pd.testing.assert_frame_equal(together, alone)
    assert together.attrs == alone.attrs


def _texts(table) -> pd.DataFrame:
    frame = table.frame()
    return frame.assign(
        **{c: frame[c].astype(object) for c in frame if isinstance(frame[c].dtype, pd.CategoricalDtype)}
    )


def _compare_tables(path) -> bool:
    """Whether `path` was small enough to read in two statements; then its Tables equal the
    table-by-table reader's."""
    conn = open_readonly(path)
    try:
        small = batched.sum_tables(conn)
        if small is None:
            return False
        launch = ["launchKey"]
        nvtx = events.nvtx_table(conn, full=False)
        alone = {
            "kernels": events.kernel_table(conn, columns=launch),
            "memcpy": events.memcpy_table(conn, columns=[*launch, "bytes"]),
            "memset": events.memset_table(conn, columns=[*launch, "bytes"]),
            "runtime": events.runtime_table(conn, columns=launch),
            "osrt": events.osrt_table(conn, columns=[]),
            **{f"library {k}": v for k, v in events.library_tables(conn, columns=[]).items()},
            "mpi": events.mpi_table(conn, nvtx, columns=["bytes"]),
        }
        together = {**small, **{f"library {k}": v for k, v in small.pop("library").items()}}
        together["mpi"] = events.mpi_table(conn, nvtx, columns=["bytes"], tables=small["mpi_tables"])
        for name, table in alone.items():  # the same rows and texts (the batched names share one list)
            pd.testing.assert_frame_equal(_texts(together[name]), _texts(table), obj=f"{path.name}: {name}")
        return True
    finally:
        conn.close()


def test_real_exports_give_the_same_tables(real_nsys_dir):
    """Real exports (nsys 2020.3 to 2026.2 schemas), table by table, where they are small enough."""
    compared = [path.name for path in sorted(real_nsys_dir.glob("*.sqlite")) if _compare_tables(path)]
    assert len(compared) >= 5, compared


@pytest.mark.parametrize(
    "statement, match",
    [
        ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 'soon' WHERE rowid = 3", "CUPTI_ACTIVITY_KIND_RUNTIME"),
        ('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 5 WHERE rowid = 2', "end before they start"),
        ('UPDATE OSRT_API SET "end" = start - 5 WHERE rowid = 1', "OSRT_API"),
    ],
)
def test_damage_gets_the_same_one_line_error(sim_ranges, altered_copy, tmp_path, monkeypatch, statement, match):
    path = altered_copy(sorted(sim_ranges.glob("*.sqlite"))[0], tmp_path, statement)
    with pytest.raises(InputError, match=match) as together:
        read_export(path)
    _one_by_one(monkeypatch)
    with pytest.raises(InputError) as alone:
        read_export(path)
    assert str(together.value) == str(alone.value)
