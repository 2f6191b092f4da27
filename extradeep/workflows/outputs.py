"""The one guard for what a workflow writes: inputs are read-only, so an output path may never be an
input (a profile, an export found under a given folder or listed by the manifest, a settings file),
a directory, a special file, or an SQLite database that extradeep did not write; and its folder must
be writable. Every workflow checks its outputs here before any reading, so a wrong path costs
nothing and destroys nothing. Errors name the output by its field (`json`, `save`, `output`), which
front ends show as their flag or widget.
"""

from __future__ import annotations

from pathlib import Path

from extradeep.columns import PATH
from extradeep.errors import InputError, special_file_problem

SQLITE_MAGIC = b"SQLite format 3\x00"


def resolved(path) -> Path:
    return Path(path).expanduser().resolve()


def input_paths(profiles=(), manifest=None, config=None, eval_dir=None) -> set[Path]:
    """Resolved paths of everything a workflow reads: the profiles (and the exports found under
    them), the manifest (and the exports it lists), the settings file, the evaluation folder and a
    folder's extradeep.toml."""
    from extradeep.io.discover import find_exports, read_manifest

    given = [Path(p) for p in [*(profiles or []), eval_dir] if p]
    paths = set(given)
    exports, _ = find_exports(given) if given else ([], [])
    paths.update(exports)
    paths.update(p / "extradeep.toml" for p in given if p.is_dir())
    paths.update(Path(p) for p in (manifest, config) if p)
    if manifest:
        try:
            paths.update(Path(p) for p in read_manifest(manifest)[PATH])
        except (InputError, OSError, KeyError):
            pass  # reading the manifest reports its own problem later
    return {resolved(p) for p in paths}


def is_sqlite(path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def check_output_path(field: str, path, inputs: set[Path], experiment_ok: bool = False) -> None:
    """Refuse, in one line naming `field`, an output `path` that would destroy an input or a
    database. `experiment_ok`: an earlier saved experiment may be replaced (the `save` output)."""
    from extradeep.io.store import is_saved_experiment

    target = resolved(path)
    if target in inputs:
        _fail(field, f"{path} is one of the inputs; refusing to overwrite it")
    if target.is_dir():
        _fail(field, f"{path} is a directory; give a file name")
    if special_file_problem(target):  # writing into a FIFO waits for a reader forever
        _fail(field, f"{path} {special_file_problem(target).split(';')[0]}; give a file name")
    if experiment_ok and target.exists() and not is_saved_experiment(target):
        _fail(field, f"{path} exists and is not an experiment saved by extradeep; refusing to overwrite it")
    if not experiment_ok and is_sqlite(target):
        _fail(field, f"{path} is an existing SQLite database; refusing to overwrite it")
    check_writable(field, path, target.parent)


def check_output_dir(field: str, path) -> None:
    """A folder to write figures into: not an existing file (an input among them)."""
    target = resolved(path)
    if target.exists() and not target.is_dir():
        _fail(field, f"{path} exists and is not a directory; refusing to write into it")
    check_writable(field, path, target, may_create=True)


def check_writable(field: str | None, path, folder: Path, may_create: bool = False) -> None:
    """Refuse an output whose folder cannot be written: `folder`, or the nearest folder above it that
    exists (`may_create`: the workflow creates the missing ones). Tried by creating a temporary file
    there, which is what counts (permissions, read-only mounts, root)."""
    import os
    import tempfile

    existing = next((f for f in (folder, *folder.parents) if f.exists()), None)
    if existing is None or not existing.is_dir():
        _fail(field, f"{path}: {existing} is not a folder; cannot write there")
    if existing != folder and not may_create:
        _fail(field, f"{path}: folder {folder} does not exist; create it first")
    try:
        handle, name = tempfile.mkstemp(prefix=".extradeep-write-check-", dir=existing)
    except OSError as exc:
        _fail(field, f"{path}: cannot write in {existing} ({exc.strerror})")
    os.close(handle)
    os.unlink(name)


def check_outputs(files: dict, inputs: set[Path], save=None, plots=None) -> None:
    """Check every output before anything is read: `files` maps a field to its path (None when not
    given), `inputs` come from :func:`input_paths`, `save` is a saved-experiment file (field `save`),
    `plots` a figure folder (field `plots`). Two outputs may not name the same file."""
    for field, path in files.items():
        if path:
            check_output_path(field, path, inputs)
    if save:
        check_output_path("save", save, inputs, experiment_ok=True)
    if plots:
        check_output_dir("plots", plots)
    targets = [resolved(p) for p in [*files.values(), save] if p]
    if len(set(targets)) < len(targets):
        raise InputError(None, "two output options name the same file")


def _fail(field: str | None, problem: str):
    raise InputError(None, problem, field=field)
