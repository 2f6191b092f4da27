"""Valid scales and kept options (issue 20, item 5): rank counts are positive whole numbers, points far
beyond what the models support are refused in one line, and a saved experiment keeps its modeling
options for every command on it.

Before: `--predict 2.5` printed a row for 2.5 ranks, `--predict 1e12` printed "0 s" and a NaN
speedup, and `budget` on a file saved with `--min-points 4` refitted with the default and failed
("need at least 5")."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from extradeep.cli import main
from extradeep.simulate import simulate

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"
DATASET = ["--train-samples", "50000", "--val-samples", "10000", "--batch-size", "64"]
# the last rank count whose epoch still has one full training step: floor(D_t / (G B)) >= 1
LAST_WITH_A_STEP = math.floor(50_000 / 64)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return ["--cache-dir", str(tmp_path_factory.getbasetemp() / "extradeep-cache")]


@pytest.fixture(scope="module")
def saved(sample_saved):
    return sample_saved[0]


def one_line_error(capsys, argv) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "error" in line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


@pytest.mark.parametrize("command", ["model", "report"])
def test_fractional_ranks_are_refused_before_reading(capsys, tmp_path, command):
    # a folder that does not exist: the option is refused before anything is read
    line = one_line_error(capsys, [command, str(tmp_path / "missing"), "--predict", "16,2.5"])
    assert "--predict" in line and "2.5" in line and "whole" in line


def test_fractional_budget_candidates_are_refused(capsys, saved):
    line = one_line_error(capsys, ["budget", str(saved), "--max-time", "1h", "--candidates", "8,12.5"])
    assert "--candidates" in line and "12.5" in line


@pytest.mark.parametrize("value", ["1e12", str(LAST_WITH_A_STEP + 1)])
def test_predictions_beyond_the_supported_range_are_refused(capsys, saved, value):
    line = one_line_error(capsys, ["model", str(saved), "--predict", f"64,{value}"])
    assert "--predict" in line and f"at most {LAST_WITH_A_STEP}" in line and "training step" in line


def test_the_last_supported_point_is_predicted_with_a_real_number(capsys, saved):
    assert main(["model", str(saved), "--predict", str(LAST_WITH_A_STEP)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith(f"ranks={LAST_WITH_A_STEP} "))
    assert "nan" not in row.lower() and " 0 s" not in row


def test_budget_and_plan_refuse_targets_beyond_the_range(capsys, saved):
    line = one_line_error(capsys, ["budget", str(saved), "--max-time", "1h", "--max-ranks", "5000"])
    assert "--max-ranks" in line and f"at most {LAST_WITH_A_STEP}" in line
    line = one_line_error(capsys, ["plan", str(saved), "--target", "5000", "--max-ranks", "64"])
    assert "--target" in line and f"at most {LAST_WITH_A_STEP}" in line


@pytest.fixture(scope="module")
def four_points(tmp_path_factory, cache):
    """A study of 4 configurations saved with --min-points 4 and --terms 2."""
    root = tmp_path_factory.mktemp("four")
    simulate(root / "runs", params={"ranks": [2, 4, 6, 8]}, repetitions=1, train_steps=3, val_steps=1, seed=4)
    path = root / "exp.sqlite"
    argv = ["model", str(root / "runs"), *DATASET, *cache, "--min-points", "4", "--terms", "2", "--save", str(path)]
    assert main(argv) == 0
    return path


def test_commands_on_a_saved_experiment_keep_its_options(capsys, four_points):
    from extradeep.aggregate.experiment import Experiment
    from extradeep.analysis.core import analyse

    capsys.readouterr()
    for argv in (
        ["budget", str(four_points), "--max-time", "1h", "--epochs", "10"],
        ["plan", str(four_points), "--target", "16", "--max-ranks", "16"],
        ["model", str(four_points), "--predict", "16"],
    ):
        code = main(argv)
        captured = capsys.readouterr()
        assert code in (0, 1) and "need at least 5" not in captured.out + captured.err, argv
        assert argv[0] == "plan" or "using the models saved with the experiment" in captured.err, argv
    analysis = analyse(Experiment.load(four_points))
    assert analysis.options["min_points"] == 4 and analysis.options["n_terms"] == 2
    # an option given on the command line still wins, and says that it refits
    code = main(["model", str(four_points), "--terms", "1", "--predict", "16"])
    captured = capsys.readouterr()
    assert code == 0 and "modeler options" in captured.out and "need at least 5" not in captured.out


@pytest.mark.parametrize("value,problem", [("1", "below the smallest measured ranks"), ("1e20", "the limit is 100000")])
def test_budget_max_ranks_errors_name_the_flag(capsys, saved, value, problem):
    """They once named the library's 'max_ranks' (and, for 1e20, an internal 'range: 2:1e+20:2')."""
    line = one_line_error(capsys, ["budget", str(saved), "--max-time", "1h", "--max-ranks", value])
    assert line.startswith("extradeep: error: --max-ranks: ") and problem in line
