"""Shared reading options (extradeep/cli/common.py): dataset checks, --last-batch, the folder's
extradeep.toml for every command that reads profiles, and the --config help."""

import argparse
import shutil

import pytest

from extradeep.cli import main
from extradeep.cli.common import DEFAULTS, add_reading_arguments, experiment_from_args, resolve_options
from extradeep.errors import InputError
from extradeep.simulate import simulate

SMALL = dict(repetitions=1, train_steps=2, val_steps=1, truth_replicates=0, progress=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("common")
    simulate(root / "runs", params={"ranks": [2, 3, 4, 5, 6]}, **SMALL)
    return root


def parse(argv):
    parser = argparse.ArgumentParser()
    add_reading_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    "option, message",
    [
        (["--train-samples", "-5"], "--train-samples: must be a number > 0, got -5"),
        (["--train-samples", "0"], "--train-samples: must be a number > 0"),
        (["--train-samples", "100", "--val-samples", "-1"], "--val-samples: must be a number >= 0"),
        (["--batch-size", "0"], "--batch-size: must be a number > 0"),
        (["--batch-size", "-64"], "--batch-size: must be a number > 0"),
        (["--gpus-param", "0"], "--gpus-param: must be a number > 0"),
        (["--model-parallel", "-2"], "--model-parallel: must be a number > 0"),
    ],
)
def test_bad_dataset_sizes_fail_in_one_line_before_reading(capsys, runs, option, message):
    argv = [
        "model",
        str(runs / "runs"),
        "--no-cache",
        "--param",
        "ranks",
        "--train-samples",
        "1000",
        "--batch-size",
        "8",
    ]
    assert main(argv + option) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("extradeep: error:")]
    assert len(lines) == 1 and message in lines[0], err
    assert "reading exports" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    "text, message",
    [
        ("train-samples = -5\nbatch-size = 8\n", "train-samples: must be a number > 0"),
        ('train-samples = 1000\nbatch-size = 8\nlast-batch = "pad"\n', "last-batch: must be one of drop, keep"),
        ("min-points = 0\n", "min-points: must be at least 1, got 0"),
        ('jobs = "4"\n', "jobs: must be at least 1, got '4'"),
        ("warmup-epochs = -1\n", "warmup-epochs: warmup-epochs must be a whole number >= 0"),
        ('kernel-names = "long"\n', "kernel-names: kernel names must be 'short' or 'demangled'"),
        ("no-replay = 3\n", "no-replay: must be true or false, got 3"),
    ],
)
def test_values_from_a_config_file_are_named_by_the_file_and_its_key(runs, tmp_path, text, message):
    """A bad value the settings file set is named as the user gave it: the file and its key, not a flag."""
    config = tmp_path / "c.toml"
    config.write_text(text)
    with pytest.raises(InputError) as caught:
        experiment_from_args(parse([str(runs / "runs"), "--no-cache", "--config", str(config)]))
    assert str(caught.value).startswith(f"{config}: {message}"), caught.value


def test_last_batch_option_reaches_the_dataset(runs, tmp_path):
    args = ["--cache-dir", str(tmp_path), "--param", "ranks", "--train-samples", "1000", "--batch-size", "64"]
    drop = experiment_from_args(parse([str(runs / "runs"), *args]))
    keep = experiment_from_args(parse([str(runs / "runs"), *args, "--last-batch", "keep"]))
    assert drop.dataset.last_batch == "drop" and keep.dataset.last_batch == "keep"
    ranks = sorted(drop.points["ranks"].unique())
    n_drop = drop.epoch_table().drop_duplicates("ranks").set_index("ranks")["n_t"]
    n_keep = keep.epoch_table().drop_duplicates("ranks").set_index("ranks")["n_t"]
    assert [n_drop[r] for r in ranks] == [1000 // (r * 64) for r in ranks]
    assert [n_keep[r] for r in ranks] == [-(-1000 // (r * 64)) for r in ranks]


def test_the_folders_config_is_read_by_every_reading_command(runs, tmp_path, capsys):
    folder = tmp_path / "runs"
    shutil.copytree(runs / "runs", folder)
    (folder / "extradeep.toml").write_text(
        'train-samples = 1000\nbatch-size = 8\nparam = "ranks"\nlast-batch = "keep"\n'
    )
    experiment = experiment_from_args(parse([str(folder), "--cache-dir", str(tmp_path / "cache")]))
    err = capsys.readouterr().err
    assert err.count(f"extradeep: using settings from {folder / 'extradeep.toml'}") == 1
    assert experiment.dataset.train_samples == 1000 and experiment.dataset.last_batch == "keep"
    given = experiment_from_args(parse([str(folder), "--cache-dir", str(tmp_path / "cache"), "--train-samples", "500"]))
    assert given.dataset.train_samples == 500  # the command line wins


@pytest.mark.parametrize("command", ["model", "evaluate", "report", "budget"])
def test_config_help_lists_exactly_the_accepted_keys(command):
    from extradeep.cli import build_parser

    parser = build_parser()._subparsers._group_actions[0].choices[command]
    (help_text,) = [a.help for a in parser._actions if a.dest == "config"]
    listed = help_text.split("TOML file with any of these keys: ")[1].split(" (")[0]
    assert listed.split(", ") == [k.replace("_", "-") for k in DEFAULTS]


def test_unknown_config_keys_are_named(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("top = 3\n")
    with pytest.raises(InputError, match="unknown key"):
        resolve_options(parse(["--config", str(config)]))


def test_options_are_one_typed_value_with_the_config_keys():
    """The options object has exactly the settings file's keys (and their defaults), and the API
    builds it as the command line does: checked when built, errors naming the library's field."""
    import dataclasses

    from extradeep import Options

    fields = {f.name: f for f in dataclasses.fields(Options) if f.init and f.name not in ("origins", "explicit")}
    assert list(fields) == list(DEFAULTS)
    defaults = Options()
    assert {k: getattr(defaults, k) for k in DEFAULTS} == {
        k: tuple(v) if isinstance(v, list) else v for k, v in DEFAULTS.items()
    }
    with pytest.raises(InputError) as caught:
        Options(train_samples=100, batch_size=0)
    assert caught.value.field == "batch_size" and caught.value.labelled("--batch-size").startswith("--batch-size:")


def test_each_command_resolves_its_options_once(runs, tmp_path, monkeypatch, capsys):
    """model, evaluate, budget, report and plan each resolve the options (command line, the folder's
    extradeep.toml, defaults) once, and parse the settings file once, however many steps use them."""
    import extradeep.io.config as config
    from extradeep import Options

    folder = tmp_path / "runs"
    shutil.copytree(runs / "runs", folder)
    (folder / "extradeep.toml").write_text("train-samples = 1000\nbatch-size = 8\nmin-points = 4\n")
    counts = {"resolve": 0, "parse": 0}
    resolve, read_config = Options.resolve.__func__, config.read_config

    def counted_resolve(cls, *args, **kwargs):
        counts["resolve"] += 1
        return resolve(cls, *args, **kwargs)

    def counted_parse(path):
        counts["parse"] += 1
        return read_config(path)

    monkeypatch.setattr(Options, "resolve", classmethod(counted_resolve))
    monkeypatch.setattr(config, "read_config", counted_parse)
    reading = [str(folder), "--cache-dir", str(tmp_path / "cache"), "--no-replay", "--jobs", "1"]
    commands = {
        "model": ["model", *reading],
        "evaluate": ["evaluate", *reading, "--eval-points", "6"],
        "budget": ["budget", *reading, "--max-time", "1h"],
        "report": ["report", *reading, "--output", str(tmp_path / "r.html")],
        "plan": ["plan", *reading, "--target", "16", "--max-ranks", "8", "-k", "1"],
    }
    for name, argv in commands.items():
        counts.update(resolve=0, parse=0)
        assert main(argv) == 0, capsys.readouterr().err
        assert counts == {"resolve": 1, "parse": 1}, name
    capsys.readouterr()


def test_the_gui_and_the_cli_open_a_folder_with_the_same_options(runs, tmp_path):
    from extradeep import Options

    folder = tmp_path / "runs"
    shutil.copytree(runs / "runs", folder)
    (folder / "extradeep.toml").write_text('train-samples = 1000\nbatch-size = 8\nlast-batch = "keep"\n')
    cli = resolve_options(parse([str(folder)]))
    gui = Options.resolve(folder=folder)  # what gui/workspace.py opens a folder with
    assert gui.load_arguments() == cli.load_arguments()
    assert gui.dataset.last_batch == "keep" and gui.origins["last_batch"] == str(folder / "extradeep.toml")
