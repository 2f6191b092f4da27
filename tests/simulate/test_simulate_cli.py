"""`extradeep simulate` and write_nvtx_export."""

from __future__ import annotations

import json

import pytest

from extradeep.cli import main
from extradeep.simulate import write_nvtx_export
from extradeep.simulate.schema import load_layout


def test_cli_writes_exports_and_truth(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "simulate",
            str(out),
            "--param",
            "ranks=2",
            "--param",
            "batch=16,32",
            "--repetitions",
            "1",
            "--marks",
            "marks",
            "--layout",
            "2022",
            "--quiet",
            "--kernel-scale",
            "bn_*=2",
        ]
    )
    assert code == 0
    names = sorted(p.name for p in out.glob("*.sqlite"))
    assert names == [f"cifar10.p2.b{b}.r1.mpi{r}.sqlite" for b in (16, 32) for r in (0, 1)]
    truth = json.loads((out / "truth.json").read_text())
    assert truth["layout"] == "2022" and truth["kernel_scale"] == {"bn_*": 2.0}
    assert "wrote 4 exports" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--param", "batch=2"], "'ranks' is required"),
        (["--param", "ranks"], "NAME=VALUE"),
        (["--param", "ranks=2", "--noise", "1,2"], "three non-negative numbers"),
        (["--param", "ranks=2.5"], "positive integers"),
        (["--param", "ranks=2", "--batch", "0"], "batch and train samples must be >= 1"),
        (["--param", "ranks=2", "--warmup-factor", "-1"], "warmup factor must be > 0"),
        (["--param", "ranks=2", "--kernel-scale", "*gemm*=-1"], "kernel scale *gemm*=-1: factors must be > 0"),
        (["--param", "ranks=2", "--prefix", "ranks=r"], "prefix ranks=r"),
        (["--param", "ranks=2", "--param", "rate=1,2"], "prefix rate=r"),  # default prefix: the first letter
        (["--param", "ranks=2", "--param", "bs=1", "--prefix", "bs=p"], "prefix bs=p"),
        (["--param", "ranks=2", "--param", "bs=1", "--param", "bx=2"], "share a file-name prefix"),
        (["--param", "ranks=2", "--app", "a.b"], "no dots"),
        (["--param", "ranks=2", "--buckets", "0"], "buckets must be >= 1"),
        (["--param", "ranks=2", "--param", "ranks=4"], "--param: ranks is given twice"),
    ],
)
def test_cli_user_errors_are_one_line(tmp_path, capsys, argv, problem):
    assert main(["simulate", str(tmp_path / "x"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()  # nothing written that extradeep would then reject


def test_nvtx_export_round_trip(tmp_path, ro):
    ranges = [("epoch 0", None, 100, 900, 1000), ("step 1", "Keras", 150, 300, 1000), ("tick", None, 400, None, 1001)]
    path = write_nvtx_export(tmp_path / "n.sqlite", ranges, nvtx_strings="textId")
    with ro(path) as conn:
        rows = conn.execute(
            "SELECT n.start, n.end, n.eventType, s.value, n.domainId, n.globalTid & 0xFFFFFF,"
            " (n.globalTid >> 24) & 0xFFFFFF FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId"
            " ORDER BY n.rowid"
        ).fetchall()
    assert rows == [
        (100, 900, 59, "epoch 0", 0, 1000, 1000),
        (150, None, 75, "Keras", 1, 1000, 1000),
        (150, 300, 59, "step 1", 1, 1000, 1000),
        (400, None, 34, "tick", 0, 1001, 1000),
    ]
    with ro(path) as conn:
        ddl = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    layout = load_layout("2026")
    assert "NVTX_EVENTS" in ddl and all(sql == layout.tables[name] for name, sql in ddl.items())
    with pytest.raises(FileExistsError):
        write_nvtx_export(path, ranges)
    with pytest.raises(ValueError, match="ends before"):
        write_nvtx_export(tmp_path / "bad.sqlite", [("x", None, 10, 5, 1)])


def test_a_folder_of_foreign_exports_is_not_overwritten(tmp_path, capsys):
    from extradeep.cli import main

    outdir = tmp_path / "profiles"
    outdir.mkdir()
    foreign = outdir / "cifar10.p2.r1.mpi0.sqlite"
    foreign.write_bytes(b"a user's export")
    assert main(["simulate", str(outdir), "--param", "ranks=2", "--repetitions", "1", "--quiet"]) == 2
    assert "did not simulate" in capsys.readouterr().err
    assert foreign.read_bytes() == b"a user's export"
