"""`extradeep layouts` end to end on the published vTrain table: the fit, the search with its Pareto
front and best layout, the written table, and one line for each user error before any work."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from extradeep.cli import main

MODEL = 'name = "GPT 18.4B"\nparameters = "18.4B"\nlayers = 40\nhidden = 6144\nheads = 48\nseq-len = 2048\n'
HARDWARE = 'gpu = "a100-80gb"\ngpus-per-node = 8\nintra-bandwidth = "150 GB/s"\ninter-bandwidth = "25 GB/s"\nnics-per-node = 4\n'


@pytest.fixture
def files(tmp_path, published):
    model, hardware = tmp_path / "gpt18b.toml", tmp_path / "cluster.toml"
    model.write_text(MODEL)
    hardware.write_text(HARDWARE + "price-per-gpu-hour = 4.1\nprice-per-kwh = 0.15\n")
    return published("vtrain_multi_node.csv"), model, hardware


def test_fit_prints_the_formula_and_held_out_errors(files, capsys):
    table, _, hardware = files
    assert main(["layouts", "--table", str(table), "--hardware", str(hardware)]) == 0
    out = capsys.readouterr().out
    assert "step = (m + (p - 1) / v) * work" in out
    assert "calibrated by" in out and "step totals" in out
    for workload in ("3.6B", "18.4B", "39.1B"):
        assert workload in out  # in-sample fit and held-out errors per model


def test_search_prints_the_front_and_writes_every_layout(files, tmp_path, capsys):
    table, model, hardware = files
    digest = hashlib.sha256(table.read_bytes()).hexdigest()
    out_file = tmp_path / "layouts.csv"
    args = ["layouts", "--table", str(table), "--hardware", str(hardware), "--model", str(model)]
    args += ["--gpus", "128,256", "--global-batch", "1024", "--samples-per-epoch", "1024000", "-o", str(out_file)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "on the Pareto front of time against cost" in out and "Best by time under the limits" in out
    written = pd.read_csv(out_file)
    assert set(written["gpus"]) == {128, 256} and written["fits"].any()
    assert (written.loc[written["best"], "fits"]).all() and written["best"].sum() == 1
    assert hashlib.sha256(table.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize(
    "extra,problem",
    [
        (["--gpus", "128"], "a search needs --gpus and --global-batch"),
        (["--gpus", "128", "--global-batch", "1024", "--zero", "5"], "--zero: ZeRO stages are 0, 1, 2 and 3"),
        (["--gpus", "128", "--global-batch", "1024", "--recompute", "most"], "--recompute: unknown most"),
        (["--gpus", "12x", "--global-batch", "1024"], "--gpus"),
        # a count past 2^31 once hung the search (its divisors counted one by one) or wrapped around
        # into negative step times
        (
            ["--gpus", "99999999999999999999", "--global-batch", "1024"],
            "--gpus: GPU counts are whole numbers from 1 to",
        ),
        (
            ["--gpus", "128", "--global-batch", "99999999999999999999"],
            "--global-batch: must be a whole number from 1 to",
        ),
    ],
)
def test_search_option_errors_are_one_line(files, capsys, extra, problem):
    table, model, _ = files
    assert main(["layouts", "--table", str(table), "--model", str(model), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and "\n" not in err and "Traceback" not in err


def test_outputs_never_overwrite_inputs_and_bad_tables_are_named(files, tmp_path, capsys):
    table, model, _ = files
    assert main(["layouts", "--table", str(table), "-o", str(table)]) == 2
    assert "is one of the inputs" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("tp,pp,dp,micro batch,global batch,step_time\n1,1,x,1,8,1.0\n")
    assert main(["layouts", "--table", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and "row 1" in err and "\n" not in err
    assert main(["layouts"]) == 2
    assert "give --table" in capsys.readouterr().err


def test_the_shipped_layout_study_runs_on_physics_alone(tmp_path, capsys):
    """The README's tour line: the model and hardware files in sample_profiles/layouts/, no table."""
    from pathlib import Path

    study = Path(__file__).resolve().parents[2] / "sample_profiles" / "layouts"
    out_file = tmp_path / "layouts.json"
    args = ["layouts", "--model", str(study / "gpt-39b.toml"), "--hardware", str(study / "a100-cluster.toml")]
    assert (
        main([*args, "--gpus", "128,256,512", "--global-batch", "1536", "--max-time", "30", "-o", str(out_file)]) == 0
    )
    out = capsys.readouterr().out
    assert "prior" in out and "Best by time under the limits" in out
    assert out_file.stat().st_size > 0


@pytest.fixture
def damaged_study(tmp_path):
    """The shipped simulated layout study, copied, with one rank's trace cut to half its bytes and
    one run's traces all emptied."""
    import shutil

    from shared_data import REPO

    study = tmp_path / "study"
    shutil.copytree(REPO / "sample_profiles" / "layouts" / "profiles", study)
    cut = sorted(study.glob("gpt.p4.tp2.pp1.*.mpi1.pt.trace.json.gz"))[0]
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    emptied = sorted(study.glob("gpt.p2.tp1.pp2.*.pt.trace.json.gz"))
    for trace in emptied:
        trace.write_bytes(b"")
    return study, cut, emptied


def test_damaged_profiles_are_skipped_named_and_summarised(damaged_study, capsys):
    """Empty traces were once passed over without a word; the skipped lines had no summary after the
    tables, and a folder of nothing but damaged traces made one line of every problem."""
    study, cut, emptied = damaged_study
    argv = ["layouts", str(study), "--model", str(study / "model.toml"), "--gpus", "64", "--global-batch", "512"]
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    skipped = [line for line in err if line.startswith("extradeep: skipped ")]
    assert any(f"{cut}: damaged gzip file" in line for line in skipped)
    assert all(any(f"{trace}: empty file" in line for line in skipped) for trace in emptied)
    assert err[-1] == f"extradeep: {len(skipped)} profile(s) or run(s) skipped (listed above)"
    for trace in study.glob("*.pt.trace.json.gz"):
        trace.write_bytes(b"")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("extradeep: error: no readable profiles (16 problems; the first: ") and "empty file)" in err
