"""The workflows' guard for what they write: inputs are read-only, so an output path may never be an
input (a profile, a file found under a given folder, a manifest or settings file), a directory, a
special file or an SQLite database that extradeep did not write, and its folder must be writable.
Every workflow checks its outputs here when its options are built, before any reading, so a wrong
path costs nothing and destroys nothing. Errors name the option by its field (front ends show their
flag or widget)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from extradeep.errors import InputError, special_file_problem

SQLITE_MAGIC = b"SQLite format 3\x00"


def resolved(path) -> Path:
    return Path(path).expanduser().resolve()


def input_paths(given: Iterable) -> set[Path]:
    """Resolved paths of everything read: the given files and folders, the profiles found below each
    folder and a folder's `extradeep.toml`."""
    from extradeep.io.discover import find_exports

    paths = {Path(p) for p in given if p}
    folders = [p for p in paths if p.is_dir()]
    if folders:
        paths.update(find_exports(folders)[0])
        paths.update(p / "extradeep.toml" for p in folders)
    return {resolved(p) for p in paths}


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def check_output(field: str, path, inputs: set[Path]) -> None:
    """Refuse, with one line naming `field`, an output `path` that would destroy an input or a database."""
    target = resolved(path)
    if target in inputs:
        _fail(field, f"{path} is one of the inputs; refusing to overwrite it")
    if target.is_dir():
        _fail(field, f"{path} is a directory; give a file name")
    if special_file_problem(target):  # writing into a FIFO waits for a reader forever
        _fail(field, f"{path} {special_file_problem(target).split(';')[0]}; give a file name")
    if _is_sqlite(target):
        _fail(field, f"{path} is an existing SQLite database; refusing to overwrite it")
    check_writable(field, path, target.parent)


def check_writable(field: str | None, path, folder: Path, may_create: bool = False) -> None:
    """Refuse an output whose folder cannot be written: `folder`, or the nearest folder above it that
    exists (``may_create``: the workflow creates the missing ones). Tried with a temporary file, which
    is what counts (permissions, read-only mounts, root)."""
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


def check_outputs(outputs: dict, read: Iterable) -> None:
    """Check every output (`outputs`: field -> path or None) against what is `read` (paths), before
    anything is read; two outputs may not name the same file."""
    given = {name: path for name, path in outputs.items() if path}
    if not given:
        return
    inputs = input_paths(read)
    for name, path in given.items():
        check_output(name, path, inputs)
    targets = [resolved(p) for p in given.values()]
    if len(set(targets)) < len(targets):
        raise InputError(None, "two output options name the same file")


def _fail(field: str | None, problem: str):
    raise InputError(None, problem, field=field)
