"""The output guard of the library (:mod:`extradeep.workflows.outputs`) for the commands that check
their outputs from parsed arguments: inputs are read-only, so an output path may never be an input,
a directory, or an SQLite database that extradeep did not write."""

from __future__ import annotations

from extradeep.workflows.outputs import check_output_dir, check_output_path, check_writable, is_sqlite

__all__ = ["check_output_dir", "check_output_path", "check_outputs", "check_writable", "input_paths", "is_sqlite"]


def input_paths(args):
    """Resolved paths of everything a reading command reads: PROFILES (and the exports found under
    them), --manifest (and the exports it lists), --config, --eval-dir and a folder's extradeep.toml."""
    from extradeep.workflows.outputs import input_paths as paths

    return paths(
        getattr(args, "profiles", None) or [],
        getattr(args, "manifest", None),
        getattr(args, "config", None),
        getattr(args, "eval_dir", None),
    )


def check_outputs(args, files: dict[str, str | None], save: str | None = None, plots: str | None = None) -> None:
    """Check every output of a command before anything is read: ``files`` maps an option to its
    path (None when not given), ``save`` is an experiment file, ``plots`` a figure folder."""
    from extradeep.workflows.outputs import check_outputs as check

    if any(files.values()) or save or plots:
        check(input_paths(args), files, save, plots)
