"""The simulator's exports have the real Nsight Systems schema."""

from __future__ import annotations

import pytest

from extradeep.simulate.schema import load_layout


def _tables(conn) -> dict[str, str]:
    return dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())


@pytest.fixture(scope="module")
def real_ddl(real_nsys_dir, ro):
    def ddl(source: str) -> dict[str, str]:
        with ro(real_nsys_dir / source) as conn:
            return _tables(conn)

    return ddl


@pytest.mark.real
@pytest.mark.parametrize("layout", ["2026", "2022"])
def test_stored_ddl_equals_the_real_exports(layout, real_ddl):
    lay = load_layout(layout)
    compared = 0
    for table, source in lay.source.items():
        if source.endswith(".sqlite"):
            assert lay.tables[table] == real_ddl(source)[table], table
            compared += 1
    assert compared >= (40 if layout == "2026" else 19)


@pytest.mark.real
def test_enum_rows_equal_the_real_export(real_nsys_dir, ro):
    lay = load_layout("2026")
    with ro(real_nsys_dir / "GindaChen__nsys-ai__mfu_2gpu_before.sqlite") as conn:
        for table, rows in lay.enum_rows.items():
            assert [list(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY rowid")] == rows, table


@pytest.mark.real
def test_every_written_table_has_the_real_ddl(all_sims, real_ddl, ro):
    for sim in all_sims:
        lay = load_layout(sim.truth["layout"])
        real = {}
        for path in sim.files.path:
            with ro(path) as conn:
                for table, sql in _tables(conn).items():
                    source = lay.source[table]
                    if source.endswith(".sqlite"):
                        real.setdefault(source, real_ddl(source))
                        assert sql == real[source][table], (path, table)
                    else:  # cuBLAS/cuDNN/MPI: no real export has them; NVIDIA's documented DDL
                        assert sql == lay.tables[table]


def test_tables_are_lazy_and_no_not_null_column_is_empty(all_sims, ro):
    for sim in all_sims:
        for path in sim.files.path[:3]:
            with ro(path) as conn:
                for table in _tables(conn):
                    assert conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0] > 0, (path, table)
                    for _, col, typ, notnull, *_ in conn.execute(f"PRAGMA table_info([{table}])"):
                        if notnull:
                            empty = conn.execute(
                                f"SELECT count(*) FROM [{table}] WHERE [{col}] IS NULL"
                                f" OR ([{col}] = '' AND typeof([{col}]) = 'text')"
                            ).fetchone()[0]
                            assert empty == 0, (path, table, col)


def test_values_have_their_declared_type(all_sims, ro):
    storage = {"INTEGER": {"integer"}, "TEXT": {"text"}, "REAL": {"real", "integer"}}
    for sim in all_sims:
        with ro(sim.files.path[0]) as conn:
            for table in _tables(conn):
                for _, col, typ, *_ in conn.execute(f"PRAGMA table_info([{table}])"):
                    kinds = {r[0] for r in conn.execute(f"SELECT DISTINCT typeof([{col}]) FROM [{table}]")}
                    assert kinds - {"null"} <= storage[typ], (table, col, kinds)


def test_layouts_carry_their_metadata_table(sim_default, sim_2022, ro):
    with ro(sim_default.files.path[0]) as conn:
        meta = dict(conn.execute("SELECT name, value FROM META_DATA_EXPORT"))
        assert meta["EXPORT_PRODUCT_VERSION"] == "2026.2.1.210"
        assert conn.execute("SELECT count(*) FROM ENUM_NSYS_EVENT_TYPE").fetchone()[0] == 155
    with ro(sim_2022.files.path[0]) as conn:
        names = set(_tables(conn))
        assert "EXPORT_META_DATA" in names and "META_DATA_EXPORT" not in names
        assert not any(n.startswith("ENUM_") for n in names)
        assert dict(conn.execute("SELECT name, value FROM EXPORT_META_DATA"))["EXPORT_PRODUCT_VERSION"] == "2022.1.3.3"


def test_global_ids_pack_pid_and_tid(sim_default, ro):
    with ro(sim_default.files.path[1]) as conn:
        (pid,) = conn.execute("SELECT pid FROM PROCESSES").fetchone()
        gpids = {r[0] for r in conn.execute("SELECT DISTINCT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL")}
        tids = {r[0] for r in conn.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    assert {(g >> 24) & 0xFFFFFF for g in gpids} == {pid}
    assert {((t >> 24) & 0xFFFFFF, t & 0xFFFFFF) for t in tids} == {(pid, pid)}


@pytest.mark.real
def test_reading_the_real_exports_leaves_them_byte_identical(real_nsys_dir, real_ddl):
    import hashlib

    sources = {s for name in ("2026", "2022") for s in load_layout(name).source.values() if s.endswith(".sqlite")}
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    before = {s: digest(real_nsys_dir / s) for s in sources}
    for source in sources:
        assert real_ddl(source)
    assert {s: digest(real_nsys_dir / s) for s in sources} == before
