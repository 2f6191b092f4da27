"""`extradeep predict` end to end: output, JSON, errors, inputs untouched."""

from __future__ import annotations

import json

from extradeep.cli import main


def test_cli_prints_replay_breakdown_and_what_ifs(ddp_run, tmp_path, capsys, sha256):
    before = {p: sha256(p) for p in ddp_run.glob("*.sqlite")}
    out = tmp_path / "p.json"
    rc = main(["predict", str(ddp_run), "--what-if", "kernel:*gemm*=0.5", "--ranks", "64", "--json", str(out), "--timeline", str(tmp_path / "t.csv"), "--plot", str(tmp_path / "p.png")])
    assert rc == 0
    text = capsys.readouterr().out
    for needle in ("measured", "replayed", "Critical path", "compute", "T4", "What-if", "kernel:*gemm*=0.5",
                   "ranks=64"):
        assert needle in text
    data = json.loads(out.read_text())
    scenarios = {r["scenario"] for r in data["summary"]}
    assert {"measured durations", "kernel:*gemm*=0.5", "ranks=64; comm.algorithm=ring"} <= scenarios
    assert len(scenarios) == 4  # baseline, two scenarios and their combination
    assert (tmp_path / "t.csv").stat().st_size > 0 and (tmp_path / "p.png").stat().st_size > 0
    assert before == {p: sha256(p) for p in ddp_run.glob("*.sqlite")}


def test_cli_rejects_bad_what_if_with_one_line(ddp_run, capsys):
    rc = main(["predict", str(ddp_run), "--what-if", "kernel:gemm=abc"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "abc" in err and "Traceback" not in err


def test_cli_on_a_file_that_is_not_sqlite(tmp_path, capsys):
    bad = tmp_path / "x.sqlite"
    bad.write_text("not a database")
    assert main(["predict", str(bad)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "x.sqlite" in err[0] and "not an SQLite database" in err[0]


def test_cli_on_the_real_two_gpu_export(real_nsys_dir, capsys, sha256):
    path = real_nsys_dir / "GindaChen__nsys-ai__mfu_2gpu_before.sqlite"
    before = sha256(path)
    assert main(["predict", str(path), "--what-if", "comm.bandwidth=2"]) == 0
    assert "span" in capsys.readouterr().out
    assert sha256(path) == before


def test_a_broken_file_in_the_run_is_skipped_with_a_note(ddp_run, tmp_path):
    import shutil

    from extradeep.predictor import predict

    for p in sorted(ddp_run.glob("*.sqlite"))[:3]:
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "cifar10.p4.r1.mpi3.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 10)
    pred = predict(tmp_path)
    assert len(pred.files) == 3
    assert any(n.startswith("skipped") and "mpi3" in n for n in pred.notes)
    assert pred.steps["error"].abs().max() <= 0.03
