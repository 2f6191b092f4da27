"""Which format a profile is in: Nsight Systems SQLite exports or PyTorch profiler (Kineto) Chrome-trace
JSON. The format is decided by the file's first bytes, so a trace renamed without its suffix still
reads; the file name only decides which files a folder offers (`extradeep.io.discover`).
"""

from __future__ import annotations

from pathlib import Path

from extradeep.errors import InputError, require_regular_file
from extradeep.io.sqlite import SQLITE_MAGIC, unreadable

NSYS = "nsys"
KINETO = "kineto"
GZIP_MAGIC = b"\x1f\x8b"
NSYS_SUFFIXES = (".sqlite",)
KINETO_SUFFIXES = (".json", ".json.gz")  # covers *.pt.trace.json[.gz]
PROFILE_SUFFIXES = NSYS_SUFFIXES + KINETO_SUFFIXES
META_TABLE = "extradeep_meta"  # marks an SQLite file as an experiment saved by extradeep (`extradeep.io.store`)


def format_by_name(path) -> str | None:
    """nsys or kineto from the file name's suffix; None for other names."""
    name = str(path).lower()
    if name.endswith(NSYS_SUFFIXES):
        return NSYS
    if name.endswith(KINETO_SUFFIXES):
        return KINETO
    return None


def strip_suffix(name: str) -> str:
    """The file name without its profile suffix (`.sqlite`, `.pt.trace.json.gz`, `.json`, ...)."""
    lower = name.lower()
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite"):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_input(path, limit: int = -1) -> bytes:
    """The first `limit` bytes (all with -1) of a user's file, opened read-only; InputError with one
    line for a missing, unreadable path or a directory."""
    path = Path(path)
    require_regular_file(path)  # a FIFO named like a profile would block the open forever
    try:
        with open(path, "rb") as fh:  # read-only: inputs are never written
            return fh.read(limit)
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a profile") from None
    except OSError as exc:
        raise InputError(path, unreadable(exc)) from None  # one wording for an unreadable file everywhere


def profile_format(path) -> str:
    """nsys or kineto by content (SQLite header; gzip or JSON text); InputError for anything else."""
    path = Path(path)
    head = read_input(path, 64)
    if head.startswith(SQLITE_MAGIC):
        return NSYS
    if head.startswith(GZIP_MAGIC) or head.lstrip()[:1] in (b"{", b"["):
        return KINETO
    if not head:
        raise InputError(path, "empty file")
    # the nsys layer words its errors for what a .sqlite name promises (truncated, not SQLite, ...)
    return NSYS if format_by_name(path) != KINETO else KINETO
