"""`extradeep plan --layout-model`: small layout runs within the budget and the largest allocation,
written as CSV; a missing --global-batch is one line."""

from __future__ import annotations

import pandas as pd
import pytest

from extradeep.cli import main

SHAPE = "layers = 8\nhidden = 1024\nheads = 16\nseq-len = 1024\nvocab = 51200\n"


def test_plan_layout_runs_within_budget(tmp_path, capsys):
    model = tmp_path / "gpt.toml"
    model.write_text(SHAPE)
    out = tmp_path / "runs.csv"
    args = ["plan", "--layout-model", str(model), "--target", "64,256", "--global-batch", "512"]
    assert main([*args, "--max-ranks", "8", "--budget", "1", "-o", str(out)]) == 0
    runs = pd.read_csv(out)
    assert len(runs) >= 3 and runs["gpu_hours"].sum() <= 1 + 1e-9 and (runs["gpus"] <= 8).all()
    assert (runs["gpus"] == runs["tp"] * runs["pp"] * runs["dp"]).all()
    assert "V-optimal" in capsys.readouterr().out


def test_plan_layouts_without_global_batch_is_one_line(tmp_path, capsys):
    model = tmp_path / "gpt.toml"
    model.write_text(SHAPE)
    assert main(["plan", "--layout-model", str(model), "--target", "64", "--max-ranks", "8", "-k", "2"]) != 0
    err = capsys.readouterr().err
    assert "--global-batch" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "extra,problem",
    [
        # a negative start-up time once made runs cost negative GPU-hours, silently
        (
            ["--target", "64", "--global-batch", "512", "--run-seconds=-300"],
            "--run-seconds: must be a number of seconds > 0",
        ),
        # a target past 2^31 GPUs once hung the command (its divisors counted one by one)
        (
            ["--target", "99999999999999999999", "--global-batch", "512"],
            "--target: GPU counts are whole numbers from 1 to",
        ),
        (
            ["--target", "64", "--global-batch", "99999999999999999999"],
            "--global-batch: must be a whole number from 1 to",
        ),
    ],
)
def test_plan_layouts_options_out_of_range_are_one_line(tmp_path, capsys, extra, problem):
    model = tmp_path / "gpt.toml"
    model.write_text(SHAPE)
    assert main(["plan", "--layout-model", str(model), "--max-ranks", "8", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and "\n" not in err


def test_a_budget_below_the_cheapest_run_names_budget_and_the_cheapest_cost(tmp_path, capsys):
    """An empty plan used to print a table of no runs with exit 0 and no reason."""
    model = tmp_path / "gpt.toml"
    model.write_text(SHAPE)
    out = tmp_path / "runs.csv"
    args = ["plan", "--layout-model", str(model), "--target", "64", "--global-batch", "512", "--max-ranks", "8"]
    assert main([*args, "--budget", "1", "-o", str(out)]) == 0
    cheapest = pd.read_csv(out)["gpu_hours"].min()
    capsys.readouterr()
    assert main([*args, "--budget", f"{cheapest / 2:g}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("extradeep: error: --budget: ")
    assert "cannot pay for one run" in err
    # the cheapest candidate costs no more than the cheapest run a plan chose
    assert float(err.split("needs ")[1].split()[0]) <= cheapest * 1.001
