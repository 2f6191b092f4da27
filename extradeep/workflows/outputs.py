"""One guard for every output of a workflow: inputs are read-only, so an output path may never be an
input (an export, a PROFILES path, the manifest, the settings file), a directory, or an SQLite
database that extradeep did not write. Workflows call :func:`check_outputs` before reading any
export, so a wrong path costs nothing and destroys nothing. Errors name the output by its option.
"""

from __future__ import annotations

from pathlib import Path

from extradeep.errors import InputError, special_file_problem

SQLITE_MAGIC = b"SQLite format 3\x00"


def input_paths(profiles=(), manifest=None, config=None, eval_dir=None) -> set[Path]:
    """Resolved paths of everything a reading workflow reads: the profiles (and the exports found
    under them), the manifest (and the exports it lists), the settings file, the evaluation folder
    and a folder's extradeep.toml."""
    from extradeep.io.discover import find_exports, read_manifest

    given = [Path(p) for p in [*(profiles or []), eval_dir] if p]
    paths = set(given)
    exports, _ = find_exports(given) if given else ([], [])
    paths.update(exports)
    paths.update(p / "extradeep.toml" for p in given if p.is_dir())
    paths.update(Path(p) for p in (manifest, config) if p)
    if manifest:
        try:
            paths.update(Path(p) for p in read_manifest(manifest)["path"])
        except (InputError, OSError, KeyError):
            pass  # reading the manifest reports its own problem later
    return {_resolved(p) for p in paths}


def _resolved(path) -> Path:
    return Path(path).expanduser().resolve()


def is_sqlite(path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def check_output_path(option: str, path, inputs: set[Path], experiment_ok: bool = False) -> None:
    """Refuse, with one line, an output ``path`` that would destroy an input or a database.
    ``experiment_ok``: an earlier extradeep experiment may be replaced (for --save)."""
    from extradeep.io.store import is_saved_experiment

    target = _resolved(path)
    if target in inputs:
        raise InputError(option, f"{path} is one of the inputs; refusing to overwrite it")
    if target.is_dir():
        raise InputError(option, f"{path} is a directory; give a file name")
    if special_file_problem(target):  # writing into a FIFO waits for a reader forever
        raise InputError(option, f"{path} {special_file_problem(target).split(';')[0]}; give a file name")
    if experiment_ok and target.exists() and not is_saved_experiment(target):
        raise InputError(option, f"{path} exists and is not an experiment saved by extradeep; refusing to overwrite it")
    if not experiment_ok and is_sqlite(target):
        raise InputError(option, f"{path} is an existing SQLite database; refusing to overwrite it")
    check_writable(option, path, target.parent)


def check_output_dir(option: str, path) -> None:
    """A folder for figures: not an existing file (an input among them)."""
    target = _resolved(path)
    if target.exists() and not target.is_dir():
        raise InputError(option, f"{path} exists and is not a directory; refusing to write into it")
    check_writable(option, path, target, may_create=True)


def check_writable(option: str | None, path, folder: Path, may_create: bool = False) -> None:
    """Refuse, before any work, an output whose folder cannot be written: `folder` itself, or the
    nearest folder above it that exists (where the missing ones would be created). Tried by creating
    a temporary file there, which is what counts (permissions, read-only mounts, root).
    ``may_create``: the command creates `folder` (and missing parents), so it need not exist yet."""
    import os
    import tempfile

    where = "" if option is None else f"{option} "
    existing = next((f for f in (folder, *folder.parents) if f.exists()), None)
    if existing is None or not existing.is_dir():
        raise InputError(None, f"{where}{path}: {existing} is not a folder; cannot write there")
    if existing != folder and not may_create:
        raise InputError(None, f"{where}{path}: folder {folder} does not exist; create it first")
    try:
        handle, name = tempfile.mkstemp(prefix=".extradeep-write-check-", dir=existing)
    except OSError as exc:
        raise InputError(None, f"{where}{path}: cannot write in {existing} ({exc.strerror})") from None
    os.close(handle)
    os.unlink(name)


def check_outputs(
    inputs: set[Path], files: dict[str, str | None], save: str | None = None, plots: str | None = None
) -> None:
    """Check every output before anything is read: `inputs` from :func:`input_paths`, `files` maps
    an option to its path (None when not given), `save` is an experiment file (option "save"),
    `plots` a figure folder (option "plots")."""
    for option, path in files.items():
        if path:
            check_output_path(option, path, inputs)
    if save:
        check_output_path("--save", save, inputs, experiment_ok=True)
    if plots:
        check_output_dir("--plots", plots)
    targets = [_resolved(p) for p in [*files.values(), save] if p]
    if len(set(targets)) < len(targets):
        raise InputError(None, "two output options name the same file")
