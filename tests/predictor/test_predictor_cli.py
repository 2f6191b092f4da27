"""`extradeep predict` end to end: output, JSON, errors, inputs untouched."""

from __future__ import annotations

import json

import pytest

from extradeep.cli import main


def test_cli_prints_replay_breakdown_and_what_ifs(ddp_run, tmp_path, capsys, sha256):
    before = {p: sha256(p) for p in ddp_run.glob("*.sqlite")}
    out = tmp_path / "p.json"
    rc = main(
        [
            "predict",
            str(ddp_run),
            "--what-if",
            "kernel:*gemm*=0.5",
            "--ranks",
            "64",
            "--json",
            str(out),
            "--timeline",
            str(tmp_path / "t.csv"),
            "--plot",
            str(tmp_path / "p.png"),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    for needle in (
        "measured",
        "replayed",
        "Critical path",
        "compute",
        "T4",
        "What-if",
        "kernel:*gemm*=0.5",
        "ranks=64",
    ):
        assert needle in text
    data = json.loads(out.read_text())
    scenarios = {r["scenario"] for r in data["summary"]}
    assert {"measured durations", "kernel:*gemm*=0.5", "ranks=64; comm.algorithm=ring"} <= scenarios
    assert len(scenarios) == 3  # baseline and the two scenarios: nothing is combined without --combine
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


def _summary_of(path) -> dict:
    rows = json.loads(path.read_text())["summary"]
    return {(r["scenario"], r["phase"]): r["predicted"] for r in rows}


def test_combine_is_opt_in_and_applies_each_change_once(ddp_run, ddp_prediction, tmp_path):
    out = tmp_path / "c.json"
    args = [
        "predict",
        str(ddp_run),
        "--what-if",
        "kernel:*gemm*=0.5",
        "--what-if",
        "comm.bandwidth=2",
        "--what-if",
        "kernel:*gemm*=0.5",
        "--json",
        str(out),
    ]
    assert main(args) == 0
    assert {s for s, _ in _summary_of(out)} == {"measured durations", "kernel:*gemm*=0.5", "comm.bandwidth=2"}
    assert main(args + ["--combine"]) == 0
    got = _summary_of(out)
    combined = "kernel:*gemm*=0.5; comm.bandwidth=2"
    assert {s for s, _ in got} == {"measured durations", "kernel:*gemm*=0.5", "comm.bandwidth=2", combined}
    # the same as the explicit one-scenario spec (which tests/predictor/test_predictor_whatif.py
    # compares with the regenerated run): each change applied once
    want = ddp_prediction.summary.set_index(["scenario", "phase"])["predicted"]
    for phase in ("train", "val"):
        assert got[(combined, phase)] == pytest.approx(want[(combined, phase)], rel=1e-9)


def test_help_says_how_scenarios_combine(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "each --what-if is ONE scenario" in text and "--combine" in text and "once per scenario" in text


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in err
    return lines[0]


def test_a_key_twice_in_one_scenario_is_refused(ddp_run, capsys):
    assert main(["predict", str(ddp_run), "--what-if", "kernel:*gemm*=0.5; kernel:*GEMM*=0.5"]) == 2
    assert "given twice" in _one_error_line(capsys)
    assert main(["predict", str(ddp_run), "--what-if", "cpu=0.5", "--what-if", "cpu=2", "--combine"]) == 2
    assert "cpu has two values" in _one_error_line(capsys)


def test_ranks_below_one_is_refused(ddp_run, capsys):
    for value in ("0", "-3"):
        assert main(["predict", str(ddp_run), "--ranks", value]) == 2
        line = _one_error_line(capsys)
        assert "--ranks" in line and ">= 1" in line


def test_a_pattern_that_matches_nothing_is_warned_about(ddp_run, capsys):
    assert main(["predict", str(ddp_run), "--what-if", "kernel:nomatch*=2", "--what-if", "kernel:*gemm*=0.5"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "'nomatch*'" in warnings[0]


def test_outputs_never_overwrite_inputs_or_databases(ddp_run, tmp_path, capsys, sha256):
    export = sorted(ddp_run.glob("*.sqlite"))[0]
    other_db = tmp_path / "other.sqlite"
    other_db.write_bytes(export.read_bytes())
    before = {p: sha256(p) for p in [*ddp_run.glob("*.sqlite"), other_db]}
    for option, target in (
        ("--json", export),
        ("--timeline", export),
        ("--plot", other_db),
        ("--json", ddp_run / ".." / ddp_run.name / export.name),
    ):
        assert main(["predict", str(ddp_run), option, str(target)]) == 2
        err = capsys.readouterr().err
        assert "refusing to overwrite" in err and option in err
        assert "reading" not in err  # refused before any export was read
    assert before == {p: sha256(p) for p in [*ddp_run.glob("*.sqlite"), other_db]}


def test_a_folder_with_bad_files_goes_on_with_the_usable_ones(ddp_run, tmp_path):
    import shutil

    from extradeep.predictor import predict

    shutil.copy(sorted(ddp_run.glob("*.sqlite"))[0], tmp_path / "good.sqlite")
    (tmp_path / "empty.sqlite").write_bytes(b"")
    (tmp_path / "text.sqlite").write_text("not a database")
    pred = predict(tmp_path)
    assert list(pred.files["path"].map(lambda p: p.rsplit("/", 1)[-1])) == ["good.sqlite"]
    skipped = [n for n in pred.notes if n.startswith("skipped")]
    assert len(skipped) == 2 and any("empty.sqlite" in n for n in skipped) and any("text.sqlite" in n for n in skipped)


def test_cli_step_mark_options_reach_the_predictor(ddp_run, tmp_path):
    """The reading commands' step options work on predict: with --warmup-epochs 0 the first of the
    simulated run's 2 epochs (3 train + 1 val steps each, on 4 ranks) is analysed too."""
    counts = {}
    for warmup in ("1", "0"):
        out = tmp_path / f"w{warmup}.json"
        assert main(["predict", str(ddp_run), "--warmup-epochs", warmup, "--json", str(out)]) == 0
        steps = json.loads(out.read_text())["steps"]
        counts[warmup] = sum(not s["warmup"] for s in steps)
    assert counts == {"1": 1 * (3 + 1) * 4, "0": 2 * (3 + 1) * 4}
    # a training-step pattern that matches nothing: the training steps are gone, validation stays
    out = tmp_path / "none.json"
    assert main(["predict", str(ddp_run), "--train-step-pattern", "no such step (\\d+)", "--json", str(out)]) == 0
    phases = {s["phase"] for s in json.loads(out.read_text())["steps"]}
    assert phases == {"val"}
