"""Help texts say exactly what the commands accept, and budget says what it varies."""

import pytest

from extradeep.cli import main
from extradeep.cli.common import DEFAULTS
from extradeep.simulate import simulate


def _help(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


@pytest.mark.parametrize("command", ["model", "evaluate", "report", "budget"])
def test_reading_commands_name_the_folder_settings_and_the_exact_config_keys(capsys, command):
    text = _help(capsys, command)
    assert "the folder's extradeep.toml is read" in text
    assert "any of these options" not in text
    config = text.split("--config FILE TOML file", 1)[1].split("--train-samples", 1)[0].replace("- ", "-")
    assert all(key.replace("_", "-") in config for key in DEFAULTS), config
    assert "command-line only" in config


def test_inspect_help_says_it_takes_folders(capsys):
    text = _help(capsys, "inspect")
    assert "PATH [PATH ...]" in text and "directories of them" in text


def test_budget_help_says_only_the_ranks_parameter_varies(capsys):
    assert "candidates vary only the ranks parameter" in _help(capsys, "budget")


def test_budget_with_two_parameters_says_what_is_fixed_and_names_the_unit_once(capsys, tmp_path):
    simulate(
        tmp_path / "runs",
        params={"ranks": [2, 3, 4, 5, 6], "batch": [32, 64]},
        repetitions=1,
        train_steps=2,
        val_steps=1,
        truth_replicates=0,
        progress=False,
    )
    code = main(
        [
            "budget",
            str(tmp_path / "runs"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--min-points",
            "2",
            "--max-cost",
            "5",
            "--price-per-gpu-hour",
            "2",
            "--at",
            "batch=64",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cost <= 5 (currency units);" in out and "cost (currency units) cost" not in out
    assert "the search varies ranks only; batch=64 stays fixed (give other values with --at)" in out
    assert out.count("varies ranks only") == 1
