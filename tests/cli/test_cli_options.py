"""Option values are checked before any export is read, with one line each; --eval-dir works
without --param and refuses runs that cannot be compared with the models."""

import pandas as pd
import pytest

from extradeep.cli import main
from extradeep.simulate import simulate

SMALL = dict(repetitions=1, train_steps=2, val_steps=1, truth_replicates=0, progress=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("options")
    simulate(root / "runs", params={"ranks": [2, 3, 4, 5, 6]}, **SMALL)
    return root, ["--cache-dir", str(root / "cache")]


@pytest.mark.parametrize(
    "option, message",
    [
        (["--predict", "abc"], "--predict: 'abc' is not a number"),
        (["--cost-formula", "T/0"], "non-finite value"),
        (["--param", "ranks", "--cost-formula", "T * nodez"], "unknown variable 'nodez'"),
        (["--at", "batch"], "--at: 'batch' must be PARAM=VALUE"),
        (["--param", "ranks", "--at", "ranks=4"], "--at: ranks is the parameter predictions vary"),
        (["--level", "1.5"], "--level: must be between 0 and 1"),
        (["--top", "-3"], "--top: must be at least 0"),
        (["--jobs", "0"], "--jobs: must be at least 1"),
        (["--jobs", "-1"], "--jobs: must be at least 1"),
        (["--exponents-i", "1/0"], "--exponents-i: '1/0' is not a number or fraction"),
        (["--exponents-j", "-1"], "--exponents-j: '-1' is negative"),
    ],
)
def test_bad_values_fail_in_one_line_before_reading(capsys, runs, option, message):
    root, cache = runs
    assert main(["model", str(root / "runs"), *cache, *option]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("extradeep: error:")]
    assert len(lines) == 1 and message in lines[0], err
    assert "reading exports" not in err and "Traceback" not in err


def test_at_for_the_ranks_parameter_is_refused_after_reading_without_param(capsys, runs):
    root, cache = runs
    assert main(["model", str(root / "runs"), *cache, "--at", "ranks=4"]) == 2
    assert "--at: ranks is the parameter predictions vary" in capsys.readouterr().err


def test_a_good_run_does_read(capsys, runs):
    # the counterpart of the "before reading" checks above: a valid call does print the progress line
    root, cache = runs
    assert main(["model", str(root / "runs"), *cache, "--top", "0", "--predict", "8"]) == 0
    assert "reading exports" in capsys.readouterr().err


def test_inspect_top_must_not_be_negative(capsys, runs):
    root, _ = runs
    assert main(["inspect", str(root / "runs" / "cifar10.p2.r1.mpi0.sqlite"), "--top", "-1"]) == 2
    assert "--top: must be at least 0" in capsys.readouterr().err


@pytest.fixture(scope="module")
def eval_dirs(runs):
    root, _ = runs
    simulate(root / "same", params={"ranks": [8]}, seed=5, **SMALL)
    simulate(root / "extra", params={"ranks": [8], "b": [3]}, seed=5, **SMALL)
    simulate(root / "app", app="other", params={"ranks": [8]}, seed=5, **SMALL)
    return root


def test_eval_dir_without_param_uses_the_modeled_parameters(capsys, runs, eval_dirs, tmp_path):
    root, cache = runs
    csv = tmp_path / "errors.csv"
    code = main(["evaluate", str(root / "runs"), "--eval-dir", str(eval_dirs / "same"), "--csv", str(csv), *cache])
    assert code == 0, capsys.readouterr().err
    errors = pd.read_csv(csv)
    evaluation = errors[(errors.role == "evaluation") & (errors.model_type == "application")]
    assert set(evaluation["ranks"]) == {8}
    assert set(errors[errors.role == "modeling"]["ranks"]) == {2, 3, 4, 5, 6}


@pytest.mark.parametrize(
    "folder, message",
    [
        ("extra", "has parameters b, ranks; the modeling runs have ranks"),
        ("app", "holds application 'other', the models are of 'cifar10'"),
    ],
)
def test_eval_dir_of_incompatible_runs_is_refused(capsys, runs, eval_dirs, folder, message):
    root, cache = runs
    assert main(["evaluate", str(root / "runs"), "--eval-dir", str(eval_dirs / folder), *cache]) == 2
    err = capsys.readouterr().err
    assert message in err and "modeling" not in err.split(message)[-1], err


def test_a_text_file_named_sqlite_is_reported_as_not_sqlite(capsys, tmp_path):
    text = tmp_path / "text.sqlite"
    text.write_text("hello world\n")
    assert main(["model", str(text), "--cache-dir", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert f"{text}: not an SQLite database" in err and "unknown field" not in err


def test_per_step_weak_scaling_says_what_speedup_means(capsys, runs, tmp_path):
    root, cache = runs
    empty = tmp_path / "empty.toml"  # no dataset sizes: values stay per step
    empty.write_text("")
    base = ["model", str(root / "runs"), *cache, "--config", str(empty), "--top", "0"]
    assert main([*base, "--scaling", "weak"]) == 0
    out = capsys.readouterr().out
    assert "Values per training step" in out
    assert "per-step values, weak-scaling definitions: efficiency = T(baseline)/T; speedup = efficiency x" in out
    assert main([*base, "--scaling", "strong"]) == 0
    assert "weak-scaling definitions" not in capsys.readouterr().out


def test_jobs_from_a_config_file_are_checked_too(capsys, runs, tmp_path):
    root, cache = runs
    config = tmp_path / "c.toml"
    config.write_text("jobs = 0\n")
    assert main(["model", str(root / "runs"), *cache, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    # the value came from the file: named by the file and its key, as the user wrote it
    assert f"{config}: jobs: must be at least 1, got 0" in err and "reading exports" not in err
    assert main(["model", str(root / "runs"), *cache, "--jobs", "0"]) == 2  # given as a flag: named as one
    assert "--jobs: must be at least 1, got 0" in capsys.readouterr().err
