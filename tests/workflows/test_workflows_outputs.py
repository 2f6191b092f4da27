"""Output options never overwrite inputs (exports, PROFILES, the saved experiment, extradeep.toml),
directories or SQLite databases, and they are checked before any export is read."""

import hashlib
from pathlib import Path

import pytest

from extradeep.cli import main
from extradeep.errors import InputError
from extradeep.simulate import simulate
from extradeep.workflows.outputs import check_output_path, input_paths


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Five small simulated configurations plus an experiment saved from them."""
    root = tmp_path_factory.mktemp("outputs")
    simulate(
        root / "runs",
        params={"ranks": [2, 3, 4, 5, 6]},
        repetitions=1,
        train_steps=2,
        val_steps=1,
        truth_replicates=0,
        progress=False,
    )
    cache = ["--cache-dir", str(root / "cache")]
    saved = root / "exp.sqlite"
    assert main(["model", str(root / "runs"), "--save", str(saved), *cache]) == 0
    return root / "runs", saved, cache


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _refused(capsys, argv, victim, option):
    before = _sha(victim)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"extradeep: error: {option}:" in err and "refusing" in err, err
    assert "reading exports" not in err and "modeling" not in err  # refused before any reading
    assert _sha(victim) == before


def test_model_json_onto_an_input_export_is_refused(capsys, runs):
    folder, _, cache = runs
    export = folder / "cifar10.p2.r1.mpi1.sqlite"
    _refused(capsys, ["model", str(folder), "--json", str(export), *cache], export, "--json")


def test_model_save_onto_an_input_export_is_refused(capsys, runs):
    folder, _, cache = runs
    export = folder / "cifar10.p4.r1.mpi0.sqlite"
    _refused(capsys, ["model", str(folder), "--save", str(export), *cache], export, "--save")


def test_report_onto_the_saved_experiment_it_reads_is_refused(capsys, runs):
    _, saved, cache = runs
    _refused(capsys, ["report", str(saved), "-o", str(saved), *cache], saved, "--output")


def test_report_onto_an_export_or_the_folder_config_is_refused(capsys, runs):
    folder, _, cache = runs
    for victim in (folder / "cifar10.p4.r1.mpi0.sqlite", folder / "extradeep.toml"):
        _refused(capsys, ["report", str(folder), "-o", str(victim), *cache], victim, "--output")


def test_evaluate_csv_onto_an_eval_dir_export_is_refused(capsys, runs):
    folder, _, cache = runs
    export = folder / "cifar10.p6.r1.mpi0.sqlite"
    _refused(capsys, ["evaluate", str(folder), "--eval-points", "6", "--csv", str(export), *cache], export, "--csv")


def test_json_onto_a_database_that_is_not_an_input_is_refused(capsys, runs, tmp_path):
    folder, saved, cache = runs
    copy = tmp_path / "other.sqlite"
    copy.write_bytes(saved.read_bytes())
    _refused(capsys, ["model", str(folder), "--json", str(copy), *cache], copy, "--json")


def test_save_onto_a_file_that_is_not_an_experiment_is_refused_before_reading(capsys, runs, tmp_path):
    folder, _, cache = runs
    text = tmp_path / "notes.sqlite"
    text.write_text("my notes\n")
    _refused(capsys, ["model", str(folder), "--save", str(text), *cache], text, "--save")


def test_directories_are_refused_as_output_files(capsys, runs, tmp_path):
    folder, _, cache = runs
    assert main(["report", str(folder), "-o", str(tmp_path), *cache]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_plots_folder_that_is_a_file_is_refused(capsys, runs):
    folder, _, cache = runs
    truth = folder / "truth.json"
    _refused(
        capsys,
        ["report", str(folder), "-o", str(folder.parent / "r.html"), "--plots", str(truth), *cache],
        truth,
        "--plots",
    )


def test_inputs_cover_exports_under_profiles_and_relative_spellings(runs, monkeypatch):
    folder, _, _ = runs
    monkeypatch.chdir(folder.parent)

    inputs = input_paths([folder.name])
    assert folder / "cifar10.p3.r1.mpi2.sqlite" in inputs and folder / "extradeep.toml" in inputs
    with pytest.raises(InputError, match="one of the inputs"):
        check_output_path("json", f"./{folder.name}/../{folder.name}/cifar10.p3.r1.mpi2.sqlite", inputs)
    check_output_path("json", "fresh.json", inputs)  # a new file is fine
