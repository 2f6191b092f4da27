"""The reader's fast paths agree with plain SQL: launch keys built in NumPy (one process: its pid
from the column's range; several: a pid per row; NULL ids) and NVTX texts fetched as one joined
string (with a fallback for texts that hold the separator)."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.io.frames import NULL_INT
from extradeep.io.nsys import events
from extradeep.io.sqlite import open_readonly

KEY_SQL = (
    "SELECT ifnull(((({col} >> 24) & 16777215) << 32) | (correlationId & 4294967295), "
    "-9223372036854775807 - 1) FROM {table} ORDER BY rowid"
)


def launch_keys(path, sql):
    """(runtime keys, kernel keys) from the reader and from SQL."""
    with open_readonly(path) as conn:
        got = (
            events.runtime(conn, columns=["launchKey"])["launchKey"].to_numpy(),
            events.kernels(conn, columns=["launchKey"])["launchKey"].to_numpy(),
        )
    want = (
        np.array(sql(path, KEY_SQL.format(col="globalTid", table=events.RUNTIME_TABLE)), dtype=np.int64).ravel(),
        np.array(sql(path, KEY_SQL.format(col="globalPid", table=events.KERNEL_TABLE)), dtype=np.int64).ravel(),
    )
    return got, want


@pytest.mark.parametrize(
    "change",
    [
        None,  # one process
        "UPDATE {table} SET {col} = {col} + (7 << 24) WHERE rowid % 3 = 0",  # two processes
        "UPDATE {table} SET {col} = NULL WHERE rowid % 5 = 0",  # ids missing
    ],
)
def test_launch_keys_equal_the_sql_formula(tmp_path, sim_ranges, altered_copy, sql, change):
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    path = src
    if change:
        path = altered_copy(
            src,
            tmp_path,
            change.format(table=events.RUNTIME_TABLE, col="globalTid"),
            change.format(table=events.KERNEL_TABLE, col="globalPid"),
        )
    (runtime, kernels), (want_runtime, want_kernels) = launch_keys(path, sql)
    assert np.array_equal(runtime, want_runtime) and np.array_equal(kernels, want_kernels)
    if change and "NULL" in change:
        assert (runtime == NULL_INT).any()


def test_launch_keys_of_a_real_multi_process_export(real, sql):
    path = real("GindaChen__nsys-ai__mfu_2gpu_before.sqlite")
    if not path.exists():
        pytest.skip("the 2-GPU real export is absent")
    assert len(sql(path, "SELECT DISTINCT globalTid >> 24 FROM CUPTI_ACTIVITY_KIND_RUNTIME")) == 2
    (runtime, kernels), (want_runtime, want_kernels) = launch_keys(path, sql)
    assert np.array_equal(runtime, want_runtime) and np.array_equal(kernels, want_kernels)


def test_nvtx_texts_holding_the_separator_are_read_whole(tmp_path, sim_ranges, altered_copy, sql):
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    path = altered_copy(
        src,
        tmp_path,
        "UPDATE NVTX_EVENTS SET text = text || char(31) || 'x' "
        "WHERE rowid = (SELECT max(rowid) FROM NVTX_EVENTS WHERE text IS NOT NULL)",
    )
    for export in (src, path):
        with open_readonly(export) as conn:
            frame = events.nvtx(conn)
        want = sql(
            export,
            "SELECT text FROM NVTX_EVENTS WHERE text IS NOT NULL AND eventType NOT IN (33, 75, 76) ORDER BY rowid",
        )
        assert sorted(frame["name"].astype(str)) == sorted(t for (t,) in want)
    assert any("\x1f" in t for t in frame["name"].astype(str))


def test_launch_keys_of_an_empty_table_are_empty(tmp_path, sim_ranges, altered_copy):
    # min/max over no rows once raised inside the reader (the real 2-GPU export has such tables)
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    path = altered_copy(src, tmp_path, f"DELETE FROM {events.KERNEL_TABLE}")
    with open_readonly(path) as conn:
        keys = events.kernels(conn, columns=["launchKey"])["launchKey"]
    assert len(keys) == 0
