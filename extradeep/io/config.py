"""The settings a profiles folder opens with: extradeep's reading and dataset options, from a TOML file.

A folder of exports may carry an `extradeep.toml` with any key of `DEFAULTS` (`train-samples = 50000`
or `train_samples = 50000`). `folder_config(path)` gives the options a folder opens with (defaults,
overlaid by its file); `merge_options(given, config)` lays options given elsewhere (the command line)
over a config; `reader_settings(options)` turns them into the reader's settings. The CLI and the GUI
both open folders through these functions, so they cannot read a folder differently.
"""

from __future__ import annotations

from pathlib import Path

from extradeep.errors import InputError

# key: default of every option that a config file may also set
DEFAULTS = {
    "profiles": [],
    "param": [],
    "alias": [],
    "manifest": None,
    "epoch_pattern": None,
    "train_step_pattern": None,
    "val_step_pattern": None,
    "warmup_epochs": 1,
    "warmup_steps": 1,
    "kernel_names": "short",
    "min_points": 5,
    "jobs": None,
    "cache_dir": None,
    "no_cache": False,
    "no_replay": False,
    "scheduler": None,
    "slurm": {},
    "system": None,
    "train_samples": None,
    "val_samples": None,
    "batch_size": None,
    "gpus_param": "ranks",
    "model_parallel": 1,
    "weak_scaling": False,
    "last_batch": "drop",
}
CONFIG_NAME = "extradeep.toml"  # the settings file of a profiles folder
POSITIVE_INT_OPTIONS = ("jobs", "min_points")
READER_KEYS = (
    "epoch_pattern",
    "train_step_pattern",
    "val_step_pattern",
    "warmup_epochs",
    "warmup_steps",
    "kernel_names",
)


def read_config(path) -> dict:
    """The options in a TOML settings file (keys with `_` or `-`); unknown keys are an InputError."""
    from extradeep.io.discover import read_toml

    data = read_toml(path)
    config = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(str(k) for k in data if str(k).replace("-", "_") not in DEFAULTS)  # as the file spells them
    if unknown:
        raise InputError(
            path, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(k.replace('_', '-') for k in DEFAULTS)}"
        )
    for key in ("profiles", "param", "alias"):
        if isinstance(config.get(key), str):
            config[key] = [config[key]]
    return config


def folder_config_path(path) -> Path | None:
    """The `extradeep.toml` of a profiles folder, or None (not a folder, or none there)."""
    path = Path(path)
    config = path / CONFIG_NAME
    return config if path.is_dir() and config.is_file() else None


def folder_config(path) -> dict:
    """The options the profiles folder `path` opens with: DEFAULTS, overlaid by its `extradeep.toml`."""
    config_path = folder_config_path(path)
    return merge_options({}, read_config(config_path) if config_path else {})


def merge_options(given: dict, config: dict) -> dict:
    """Options in `given` (None or [] when not given) over `config` over DEFAULTS, as one dict of
    DEFAULTS keys; the whole-number options are checked here (one line naming the option)."""
    options = {}
    for key, default in DEFAULTS.items():
        value = given.get(key)
        options[key] = value if value not in (None, []) else config.get(key, default)
    for key in POSITIVE_INT_OPTIONS:
        value = options[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(None, field=key, problem=f"must be at least 1, got {value!r}")
    return options


def number_or_name(value):
    """`"64"` -> 64.0; `"b"` -> "b" (a parameter name)."""
    if value is None or isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except ValueError:
        return str(value)


def reader_settings(options: dict):
    """The ReaderSettings passed to `read_export` (step patterns, warm-up, kernel names)."""
    from extradeep.io.settings import ReaderSettings

    return ReaderSettings.from_any({k: options[k] for k in READER_KEYS})
