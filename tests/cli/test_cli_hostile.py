"""Hostile inputs across every command (issues 17 and 24): each case must end in one clear line naming the file
and the problem (or a warning and a correct answer), never a traceback or a crash signal, and must leave
every input byte-identical.

One parametrised suite: each case is (command line, expected exit status, text the output must hold).
The inputs come from the simulator (a strong-scaling study from 1 rank, a single configuration, a saved
experiment and damaged copies of it) plus a few files that are hostile by construction (a plain SQLite
database, a text file, a truncated export, a named pipe, JSON that is no trace) and variants of Extra-P's
own text-format test inputs (tests/modeling/data/extrap_text_inputs). Unreadable files are simulated by making `open` and
`sqlite3.connect` raise PermissionError for them (chmod 000 does not stop root; the chmod test runs too
when the suite runs as another user).
"""

from __future__ import annotations

import builtins
import hashlib
import io
import os
import shutil
import sqlite3
import warnings
from pathlib import Path

import pytest
from hostile_world import EXTRAP, REPO, build_world

import extradeep.cli as cli
from extradeep.cli import main

UNWRITABLE = "/proc"  # no file can be created there, even by root


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    build_world(root)
    return root


# id: (argv with {root} for the fixture folder, expected exit status (None: 0 or 1), text in stdout+stderr,
#      file made unreadable or None)
NO_CACHE = ["--no-cache", "--jobs", "1"]
CASES = {
    # 1: unreadable exports
    "model-unreadable-in-folder": (
        ["model", "{root}/runs", *NO_CACHE, "--min-points", "4"],
        0,
        "permission denied",
        "runs/cifar10.p1.r1.mpi0.sqlite",
    ),
    "model-unreadable-file": (
        ["model", "{root}/runs/cifar10.p2.r1.mpi0.sqlite", *NO_CACHE],
        2,
        "permission denied",
        "runs/cifar10.p2.r1.mpi0.sqlite",
    ),
    "inspect-unreadable-file": (
        ["inspect", "{root}/runs/cifar10.p2.r1.mpi0.sqlite"],
        2,
        "permission denied",
        "runs/cifar10.p2.r1.mpi0.sqlite",
    ),
    "inspect-unreadable-in-folder": (
        ["inspect", "{root}/single"],
        0,
        "permission denied",
        "single/other.p2.r1.mpi0.sqlite",
    ),
    "predict-unreadable-file": (
        ["predict", "{root}/runs/cifar10.p2.r1.mpi0.sqlite"],
        2,
        "permission denied",
        "runs/cifar10.p2.r1.mpi0.sqlite",
    ),
    "predict-unreadable-rank": (
        ["predict", "{root}/runs", "--run", "ranks=3"],
        0,
        "permission denied",
        "runs/cifar10.p3.r1.mpi2.sqlite",
    ),
    "budget-unreadable-in-folder": (
        ["budget", "{root}/runs", *NO_CACHE, "--min-points", "4", "--max-time", "1h"],
        None,
        "permission denied",
        "runs/cifar10.p5.r1.mpi0.sqlite",
    ),
    "evaluate-unreadable-config": (
        ["evaluate", "{root}/runs", *NO_CACHE, "--min-points", "3", "--eval-points", "5"],
        0,
        "permission denied",
        "runs/cifar10.p1.r1.mpi0.sqlite",
    ),
    # 2: outputs that cannot be written, refused before the work
    "model-save-missing-folder": (
        ["model", "{root}/runs", "--save", "{root}/nowhere/exp.sqlite"],
        2,
        "does not exist",
        None,
    ),
    "model-save-unwritable": (["model", "{root}/runs", "--save", UNWRITABLE + "/exp.sqlite"], 2, "cannot write", None),
    "model-json-unwritable": (["model", "{root}/runs", "--json", UNWRITABLE + "/m.json"], 2, "cannot write", None),
    "evaluate-csv-missing-folder": (
        ["evaluate", "{root}/runs", "--eval-points", "5", "--csv", "{root}/nowhere/e.csv"],
        2,
        "does not exist",
        None,
    ),
    "report-output-unwritable": (
        ["report", "{root}/exp.sqlite", "-o", UNWRITABLE + "/r.html"],
        2,
        "cannot write",
        None,
    ),
    "report-plots-unwritable": (
        ["report", "{root}/exp.sqlite", "-o", "{root}/out/r.html", "--plots", UNWRITABLE + "/plots"],
        2,
        "cannot write",
        None,
    ),
    "predict-json-unwritable": (
        ["predict", "{root}/runs", "--run", "ranks=2", "--json", UNWRITABLE + "/p.json"],
        2,
        "cannot write",
        None,
    ),
    "simulate-unwritable": (
        ["simulate", UNWRITABLE + "/sim", "--param", "ranks=2", "--quiet"],
        2,
        "cannot write",
        None,
    ),
    "simulate-over-foreign-exports": (
        ["simulate", "{root}/mixed", "--param", "ranks=2", "--quiet"],
        2,
        "did not simulate",
        None,
    ),
    "instrument-out-unwritable": (
        ["instrument", str(REPO / "tests/data/instrument_project"), "--out", UNWRITABLE + "/instr"],
        2,
        "cannot write",
        None,
    ),
    # 3: damaged saved experiments
    "model-damaged-table": (["model", "{root}/damaged_no_table.sqlite"], 2, "table measurements missing", None),
    "model-damaged-settings": (
        ["model", "{root}/damaged_bad_settings.sqlite"],
        2,
        "'dataset' is missing or not valid",
        None,
    ),
    "model-damaged-column": (["model", "{root}/damaged_no_column.sqlite"], 2, "lacks column(s) value", None),
    "model-damaged-params": (["model", "{root}/damaged_no_params.sqlite"], 2, "parameter list", None),
    "model-damaged-dataset": (["model", "{root}/damaged_bad_dataset.sqlite"], 2, "setting 'dataset' is unusable", None),
    "report-damaged-table": (
        ["report", "{root}/damaged_no_table.sqlite", "-o", "{root}/out/r.html"],
        2,
        "table measurements missing",
        None,
    ),
    "evaluate-damaged-table": (
        ["evaluate", "{root}/damaged_no_table.sqlite", "--eval-points", "5"],
        2,
        "table measurements missing",
        None,
    ),
    "budget-damaged-settings": (
        ["budget", "{root}/damaged_bad_settings.sqlite", "--max-time", "1h"],
        2,
        "not valid JSON",
        None,
    ),
    "predict-damaged-experiment": (
        ["predict", "{root}/runs", "--run", "ranks=2", "--experiment", "{root}/damaged_no_column.sqlite"],
        2,
        "lacks column",
        None,
    ),
    # 4 and 12: one configuration
    "evaluate-single-configuration": (
        ["evaluate", "{root}/single", "--eval-points", "2"],
        2,
        "one configuration",
        None,
    ),
    "model-single-configuration": (["model", "{root}/single"], 2, "one configuration", None),
    "budget-single-configuration": (["budget", "{root}/single", "--max-time", "1h"], 2, "one configuration", None),
    "report-single-configuration": (
        ["report", "{root}/single", "-o", "{root}/out/s.html"],
        2,
        "one configuration",
        None,
    ),
    # 6: parameter value 1 is a measurement like any other
    "model-from-one-rank": (["model", "{root}/runs"], 0, "ranks=1 ", None),
    "model-extrap-second-parameter-from-one": (["model", "{root}/two_from_one.txt"], 0, "3 * log2(n)", None),
    # 7: unrelated exports are not one run
    "predict-unrelated-exports": (["predict", "{root}/mixed"], 2, "not one run", None),
    # 10: a step pattern that matches nothing
    "model-pattern-matches-nothing": (
        ["model", "{root}/runs", "--train-step-pattern", "trian_step", "--val-step-pattern", "^nothing$", *NO_CACHE],
        2,
        "closest names: 'train step",
        None,
    ),
    "inspect-pattern-matches-nothing": (
        ["inspect", "{root}/single", "--train-step-pattern", "^iteration$"],
        0,
        "matched no NVTX range name; closest names",
        None,
    ),
    # 11 and 12: inspect and other messages
    "inspect-empty-folder": (["inspect", "{root}/empty"], 2, "no profiles in this folder", None),
    "inspect-plain-sqlite": (["inspect", "{root}/plain.sqlite"], 2, "not an Nsight Systems export", None),
    "model-plain-sqlite": (["model", "{root}/plain.sqlite", *NO_CACHE], 2, "not an Nsight Systems export", None),
    "inspect-saved-experiment": (["inspect", "{root}/exp.sqlite"], 2, "saved by extradeep", None),
    "inspect-truncated-export": (["inspect", "{root}/truncated.sqlite"], 2, "truncated", None),
    "model-empty-folder": (["model", "{root}/empty"], 2, "no profiles", None),
    "model-warning-is-one-line": (
        ["model", "{root}/with_zero.txt"],
        0,
        "extradeep: warning: dropped 1 measurement(s) with a parameter value <= 0",
        None,
    ),
    "model-extrap-garbage": (["model", "{root}/garbage.txt"], 2, "garbage.txt", None),
    "model-negative-predict": (["model", "{root}/runs", "--predict", "-4,0"], 2, "must be a positive number", None),
    "budget-negative-candidates": (
        ["budget", "{root}/exp.sqlite", "--max-time", "1h", "--candidates", "-4,8"],
        2,
        "must be a positive number",
        None,
    ),
    "predict-far-beyond-measured": (
        ["predict", "{root}/runs", "--run", "ranks=4", "--ranks", "100000"],
        0,
        "25,000x the 4 rank(s) measured",
        None,
    ),
    "predict-saved-experiment": (["predict", "{root}/exp.sqlite"], 2, "not an Nsight Systems export", None),
    "predict-empty-folder": (["predict", "{root}/empty"], 2, "no profiles", None),
    "model-readonly-cache": (
        ["model", "{root}/runs", "--cache-dir", UNWRITABLE + "/cache"],
        0,
        "nothing is cached",
        None,
    ),
    "model-single-label": (["model", "{root}/single", *NO_CACHE], 2, "replaying the traces of 1 run(s)", None),
    "profile-cmd-negative-ranks": (
        ["profile-cmd", "--ranks", "-2", "--", "python", "train.py"],
        2,
        "positive whole numbers",
        None,
    ),
    "gui-missing-path": (["gui", "{root}/nothing-here"], 2, "no such file or folder", None),
    # issue 24, 2: Extra-P's text format, all of it (files from Extra-P's own test inputs)
    "model-extrap-parameters-x-y-z": (["model", str(EXTRAP / "three_parameter_1.txt")], 0, "Region models", None),
    "model-extrap-tabs": (["model", "{root}/extrap/tabs.txt"], 0, "Region models", None),
    "model-extrap-four-parameters": (["model", str(EXTRAP / "mpa/4_param_base.txt")], 0, "Region models", None),
    "model-extrap-duplicate-points": (
        ["model", "{root}/extrap/duplicate_points.txt"],
        2,
        "duplicate_points.txt: line 4: point (20) is listed twice",
        None,
    ),
    "model-extrap-too-few-data-lines": (
        ["model", "{root}/extrap/two_data_lines.txt"],
        2,
        "2 DATA line(s) for 5 POINTS",
        None,
    ),
    "model-extrap-values-near-float-limit": (["model", "{root}/extrap/huge_values.txt"], 0, "would overflow", None),
    # issue 24, 3: no hangs, no runaways
    "model-slurm-without-sbatch": (
        ["model", "{root}/runs", *NO_CACHE, "--scheduler", "slurm"],
        2,
        "--scheduler slurm: sbatch is not on PATH",
        None,
    ),
    "inspect-named-pipe": (["inspect", "{root}/pipe.sqlite"], 2, "pipe.sqlite: is a named pipe (FIFO)", None),
    "model-named-pipe": (["model", "{root}/pipe.sqlite", *NO_CACHE], 2, "pipe.sqlite: is a named pipe (FIFO)", None),
    "model-config-named-pipe": (
        ["model", "{root}/runs", *NO_CACHE, "--config", "{root}/pipe.sqlite"],
        2,
        "is a named pipe (FIFO)",
        None,
    ),
    "simulate-a-million-ranks": (
        ["simulate", "{root}/out/million", "--param", "ranks=1000000", "--repetitions", "1", "--quiet"],
        2,
        "this simulation needs 1,000,000 files",
        None,
    ),
    # issue 24, 5: the right words
    "model-kineto-folder": (["model", "{root}/kineto", *NO_CACHE], 2, "only 2 measurement point(s)", None),
    "model-kineto-without-steps": (["model", "{root}/no_steps", *NO_CACHE], 2, "torch.profiler", None),
    "inspect-kineto-without-steps": (["inspect", "{root}/no_steps"], 0, "prof.step()", None),
    "predict-kineto-of-two-jobs": (
        ["predict", "{root}/kineto_jobs"],
        2,
        "not one run (a.pt.trace.json.gz and b.pt.trace.json.gz: rank 1 of 2 vs rank 0 of 4)",
        None,
    ),
    "predict-kineto-of-many-runs": (["predict", "{root}/kineto_many"], 2, "not one run", None),
    "inspect-json-without-trace-events": (["inspect", "{root}/numbers.json"], 2, "holds no trace events", None),
    "model-json-without-trace-events": (["model", "{root}/numbers.json", *NO_CACHE], 2, "holds no trace events", None),
    "inspect-string-times-nan-durations": (
        ["inspect", "{root}/string_times.json"],
        2,
        "has a finite numeric ts and dur",
        None,
    ),
    "model-zero-byte-sqlite": (
        ["model", "{root}/zero.sqlite", *NO_CACHE, "--param", "ranks"],
        2,
        "zero.sqlite: empty file",
        None,
    ),
    "model-garbage-sqlite": (
        ["model", "{root}/garbage.sqlite", *NO_CACHE, "--param", "ranks"],
        2,
        "garbage.sqlite: not an SQLite database",
        None,
    ),
    "model-one-profile": (
        ["model", "{root}/runs/cifar10.p2.r1.mpi0.sqlite", *NO_CACHE],
        2,
        "models need measurements at several values of a parameter",
        None,
    ),
    "plan-target-zero": (
        ["plan", "{root}/exp.sqlite", "--target", "0", "--max-ranks", "64"],
        2,
        "--target: '0' must be a positive number",
        None,
    ),
    "model-bad-value-in-extradeep-toml": (
        ["model", "{root}/configured", *NO_CACHE],
        2,
        "configured/extradeep.toml: min-points: must be at least 1, got 0",
        None,
    ),
    "budget-cost-formula-unknown-variable": (
        ["budget", "{root}/exp.sqlite", "--max-time", "1h", "--cost-formula", "-1 * gpu_hours"],
        2,
        "--cost-formula: '-1 * gpu_hours': unknown variable 'gpu_hours'",
        None,
    ),
    "budget-negative-max-time": (
        ["budget", "{root}/exp.sqlite", "--max-time", "-2h"],
        2,
        "--max-time: '-2h' must be a positive duration",
        None,
    ),
}
# text that must not appear: the wrong tool's advice, or the wrong diagnosis
FORBIDDEN = {
    "model-kineto-folder": ["nsys", "SQLite"],
    "model-kineto-without-steps": ["nsys"],
    "inspect-kineto-without-steps": ["nsys"],
    "predict-kineto-of-many-runs": ["dependency cycle"],
    "inspect-json-without-trace-events": ["CPU only"],
    "model-zero-byte-sqlite": ["no parameter"],
    "model-garbage-sqlite": ["no parameter"],
    "model-one-profile": ["no parameter"],
    "plan-target-zero": ["--predict"],
    "model-bad-value-in-extradeep-toml": ["--min-points"],
    "budget-cost-formula-unknown-variable": ["negative cost"],
    "model-extrap-values-near-float-limit": ["Warning"],
}
NO_PATH = {"model-slurm-without-sbatch"}
show_warning = cli._show_warning  # run with an empty PATH: no Slurm client on any machine


def _hashes(root: Path) -> dict:
    skip = {root / "out", root / "cache"}
    return {
        p: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and not any(s in p.parents for s in skip)
    }


def deny(monkeypatch, path: Path) -> None:
    """Make `path` unreadable as chmod 000 does for a normal user: stat works, opening fails."""
    target = str(path.resolve())

    def denied(name) -> bool:
        text = os.fsdecode(name) if isinstance(name, (str, bytes, os.PathLike)) else ""
        return text.removeprefix("file://").split("?")[0] in (target, str(path))

    def guard(real):
        def opened(name, *args, **kwargs):
            if denied(name):
                raise PermissionError(13, "Permission denied", os.fsdecode(name))
            return real(name, *args, **kwargs)

        return opened

    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    monkeypatch.setattr(io, "open", guard(io.open))
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):
        if denied(database):
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors are a clean exit too
        code = exc.code
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_hostile_input_gets_one_clear_line(world, case, capsys, monkeypatch):
    argv, status, expected, unreadable = CASES[case]
    argv = [a.replace("{root}", str(world)) for a in argv]
    if "--cache-dir" not in argv and "--no-cache" not in argv and argv[0] in ("model", "evaluate", "budget", "report"):
        argv += ["--cache-dir", str(world / "cache")]
    before = _hashes(world)
    if unreadable:
        deny(monkeypatch, world / unreadable)
    if case in NO_PATH:
        monkeypatch.setenv("PATH", str(world / "empty"))
    shown = []  # the category of every warning the command printed (as "extradeep: warning: ...")
    monkeypatch.setattr(
        cli,
        "_show_warning",
        lambda message, category, *rest: shown.append(category) or show_warning(message, category, *rest),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # every warning reaches the command's printer, none is hidden,
        warnings.simplefilter("ignore", ResourceWarning)  # but those Python itself never shows a user
        code, text = run_cli(argv, capsys)
    monkeypatch.undo()
    assert "Traceback" not in text and "Warning" not in text, text
    # extradeep's own words only: no numpy RuntimeWarning, no pandas FutureWarning or DeprecationWarning
    assert all(c is UserWarning for c in shown), (shown, text[-2000:])
    assert not [s for s in FORBIDDEN.get(case, []) if s in text], text[-2000:]
    assert expected in text, text[-2000:]
    if status is None:
        assert code in (0, 1), text[-2000:]
    else:
        assert code == status, text[-2000:]
    if code == 2:
        errors = [line for line in text.splitlines() if line.startswith(("extradeep: error:", "extradeep gui:"))]
        assert len(errors) == 1, text[-2000:]
    assert _hashes(world) == before


def test_suite_is_large_enough():
    commands = {argv[0] for argv, *_ in CASES.values()}
    assert len(CASES) >= 75
    assert commands >= {
        "model",
        "evaluate",
        "budget",
        "report",
        "inspect",
        "predict",
        "simulate",
        "instrument",
        "profile-cmd",
        "gui",
    }


def test_the_work_is_not_done_before_an_unwritable_save(world, capsys):
    code, text = run_cli(["model", str(world / "runs"), "--save", UNWRITABLE + "/exp.sqlite"], capsys)
    assert code == 2 and "reading exports" not in text and "modeling" not in text


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root reads files whatever their mode; the monkeypatched "
    "PermissionError cases above cover unreadable exports",
)
def test_chmod_000_export_is_one_line(world, tmp_path, capsys):
    target = tmp_path / "locked.sqlite"
    shutil.copy(world / "runs" / "cifar10.p2.r1.mpi0.sqlite", target)
    target.chmod(0)
    try:
        for command in (["inspect"], ["predict"], ["model", "--no-cache"]):
            code, text = run_cli([command[0], str(target), *command[1:]], capsys)
            assert code == 2 and "permission denied" in text and "Traceback" not in text
    finally:
        target.chmod(0o644)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; the /proc cases cover it")
def test_save_into_a_read_only_folder_is_refused_first(world, tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        code, text = run_cli(["model", str(world / "runs"), "--save", str(folder / "e.sqlite")], capsys)
        assert code == 2 and "cannot write" in text and "modeling" not in text
    finally:
        folder.chmod(0o755)
