"""Raw event readers against direct SQL on the real exports (every schema variant in ../shared/real_nsys)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from extradeep.io.nsys import events
from extradeep.io.nsys.schema import nsys_version, schema_of
from extradeep.io.sqlite import open_readonly


@pytest.fixture
def export(real_export):
    return real_export


@pytest.fixture
def has_table(sql):
    return lambda path, table: bool(sql(path, f"SELECT 1 FROM sqlite_master WHERE type='table' AND name='{table}'"))


def test_kernels_match_sql(export, sql, has_table):
    conn = open_readonly(export)
    df = events.kernels(conn)
    if not has_table(export, "CUPTI_ACTIVITY_KIND_KERNEL"):
        assert df.empty
        return
    rows = sql(
        export,
        "SELECT k.start, k.end, k.deviceId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "LEFT JOIN StringIds s ON s.id = k.shortName ORDER BY k.rowid",
    )
    assert len(df) == len(rows)
    assert df["start"].tolist() == [r[0] for r in rows]
    assert df["end"].tolist() == [r[1] for r in rows]
    assert df["deviceId"].tolist() == [r[2] for r in rows]
    assert df["name"].astype(str).tolist() == [r[3] for r in rows]
    nccl = df["name"].astype(str).str.lower().str.startswith("nccl")
    assert (df.loc[nccl, "category"] == "communication").all()
    assert (df.loc[~nccl, "category"] == "computation").all()


def test_demangled_names(export, sql, has_table):
    if not has_table(export, "CUPTI_ACTIVITY_KIND_KERNEL"):
        pytest.skip("no kernels")
    conn = open_readonly(export)
    df = events.kernels(conn, names="demangled")
    rows = sql(
        export,
        "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName ORDER BY k.rowid",
    )
    assert df["name"].astype(str).tolist() == [r[0] for r in rows]


def test_nvtx_names_coalesce_text_and_text_id(export, sql, has_table):
    conn = open_readonly(export)
    df = events.nvtx(conn)
    if not has_table(export, "NVTX_EVENTS"):
        assert df.empty
        return
    rows = sql(
        export,
        "SELECT coalesce(n.text, s.value), n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType NOT IN (33, 75, 76) ORDER BY n.rowid",
    )
    assert len(df) == len(rows)
    assert df["start"].tolist() == [r[1] for r in rows]
    assert df["name"].astype(str).tolist() == [r[0] if r[0] is not None else events.UNNAMED_NVTX for r in rows]


def test_memcpy_labels_and_bytes(export, sql, has_table):
    conn = open_readonly(export)
    df = events.memcpy(conn)
    if not has_table(export, "CUPTI_ACTIVITY_KIND_MEMCPY"):
        assert df.empty
        return
    rows = sql(export, "SELECT copyKind, sum(bytes), count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind")
    labels = {1: "[CUDA memcpy HtoD]", 2: "[CUDA memcpy DtoH]", 8: "[CUDA memcpy DtoD]"}
    got = df.groupby("name", observed=True)["bytes"].agg(["sum", "size"])
    for kind, total, count in rows:
        assert got.loc[labels[kind], "sum"] == total
        assert got.loc[labels[kind], "size"] == count


def test_cpu_tables_match_counts(export, sql, has_table):
    conn = open_readonly(export)
    for fn, table in (
        (events.runtime, "CUPTI_ACTIVITY_KIND_RUNTIME"),
        (events.osrt, "OSRT_API"),
        (events.memset, "CUPTI_ACTIVITY_KIND_MEMSET"),
        (events.synchronization, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
    ):
        expected = sql(export, f"SELECT count(*) FROM {table}")[0][0] if has_table(export, table) else 0
        assert len(fn(conn)) == expected, table
    if has_table(export, "CUPTI_ACTIVITY_KIND_RUNTIME"):
        names = Counter(
            r[0]
            for r in sql(
                export, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
            )
        )
        assert Counter(events.runtime(conn)["name"].astype(str)) == names


def test_version_from_either_metadata_table(export, sql, has_table):
    conn = open_readonly(export)
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if has_table(export, table):
            expected = sql(export, f"SELECT value FROM {table} WHERE name = 'EXPORT_PRODUCT_VERSION'")[0][0]
            assert nsys_version(conn) == expected
            return
    assert nsys_version(conn) is None


def test_nvtx_domains_old_and_new_style(real):
    cudf = open_readonly(real("quasiben__nvtx-examples__cudf.sqlite"))  # DomainStrings + text rows
    domains = events.nvtx(cudf)["domain"].astype(str).value_counts().to_dict()
    assert domains == {"libcudf": 718, "cudf_python": 174}
    trt = open_readonly(real("LeiWang1999__memfusion_artifact__report1.sqlite"))  # DomainCreate rows
    assert set(events.nvtx(trt)["domain"].astype(str)) == {"TensorRT"}


def test_nccl_kernels_are_communication_on_two_devices(real, sql):
    conn = open_readonly(real("GindaChen__nsys-ai__mfu_2gpu_before.sqlite"))
    df = events.kernels(conn)
    comm = df[df["category"] == "communication"]
    expected = dict(
        sql(
            conn.path,
            "SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
            "ON s.id = k.shortName WHERE s.value LIKE 'nccl%' GROUP BY deviceId",
        )
    )
    assert comm.groupby("deviceId").size().to_dict() == expected
    assert set(expected) == {0, 1} and all(n > 0 for n in expected.values())


def test_launch_join_keys_are_per_process(real):
    """correlationIds repeat across processes; kernels join their own process's runtime call."""
    conn = open_readonly(real("GindaChen__nsys-ai__mfu_2gpu_before.sqlite"))
    k, r = events.kernels(conn), events.runtime(conn)
    assert k["pid"].nunique() == 2
    key_k = set(zip(k["pid"], k["correlationId"]))
    key_r = set(zip(r["pid"], r["correlationId"]))
    assert len(key_k & key_r) >= 0.99 * len(key_k)
    assert np.all(r["tid"].to_numpy() == (r["globalTid"].to_numpy() & 0xFFFFFF))


def test_schema_probe_lists_tables(real, sql):
    path = real("lockfuehrer__beast_ressoruces__report2.sqlite")  # oldest layout
    sch = schema_of(open_readonly(path))
    assert set(sch.tables) == {r[0] for r in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert "callchainId" not in sch.columns("CUPTI_ACTIVITY_KIND_RUNTIME")
    assert sch.columns("NO_SUCH_TABLE") == ()


def test_columns_kept_by_statement_are_what_pragma_says(real_export, sim_ranges, sql):
    """A table's columns are kept by its CREATE TABLE statement across connections: read again on a
    second connection (from what the first kept) they are what PRAGMA table_info says, every table."""
    for path in [real_export, *sorted(sim_ranges.glob("*.sqlite"))[:2]]:
        first = schema_of(open_readonly(path))
        tables = first.tables
        for table in tables:
            first.columns(table)  # the first connection asks SQLite (unless an earlier file had it)
        again = schema_of(open_readonly(path))
        for table in tables:
            rows = sql(path, f'PRAGMA table_info("{table}")')
            assert again.columns(table) == tuple(r[1] for r in rows)
            assert again.not_null(table) == {r[1] for r in rows if r[3]}


def test_mpi_from_tables_and_from_an_nvtx_domain(sim_ranges, sim_marks_old):
    new = events.mpi(open_readonly(sorted(sim_ranges.glob("*.sqlite"))[0]))  # MPI_COLLECTIVES_EVENTS
    old = events.mpi(open_readonly(sorted(sim_marks_old.glob("*.sqlite"))[0]))  # NVTX domain "MPI"
    assert len(new) and set(new["source"]) == {"table"} and (new["bytes"] >= 0).all()
    assert len(old) and set(old["source"]) == {"nvtx"}
    assert sorted(new["name"].astype(str)) == sorted(old["name"].astype(str))


def test_nvtx_integer_payloads_match_sql(export, sql, has_table):
    """uint64Value/int64Value per row as in the table; NULL_INT where the event (or the export) has none."""
    df = events.nvtx(open_readonly(export))
    assert {"uint64Value", "int64Value"} <= set(df.columns)
    if not has_table(export, "NVTX_EVENTS"):
        assert df.empty
        return
    present = {r[1] for r in sql(export, "PRAGMA table_info(NVTX_EVENTS)")}
    for column in ("uint64Value", "int64Value"):
        expr = column if column in present else "NULL"
        rows = sql(export, f"SELECT {expr} FROM NVTX_EVENTS WHERE eventType NOT IN (33, 75, 76) ORDER BY rowid")
        assert df[column].tolist() == [events.NULL_INT if r[0] is None else r[0] for r in rows]


def test_nvtx_payload_carries_simulated_nccl_sizes(tmp_path):
    """The simulator writes each NCCL range's message size into uint64Value: events.nvtx returns it."""
    from extradeep.simulate import simulate

    simulate(tmp_path, params={"ranks": [2]}, repetitions=1, epochs=1, train_steps=2, val_steps=1, ddp=True, seed=3)
    bucket_bytes = json.loads((tmp_path / "truth.json").read_text())["nccl_model"]["bucket_bytes"]
    df = events.nvtx(open_readonly(sorted(tmp_path.glob("*.sqlite"))[0]))
    sizes = df.loc[df["name"].astype(str) == "ncclAllReduce", "uint64Value"]
    assert len(sizes) > 0 and (sizes == bucket_bytes).all()
    other = df.loc[~df["name"].astype(str).str.startswith("nccl"), "uint64Value"]
    assert (other == events.NULL_INT).all()
