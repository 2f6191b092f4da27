"""User-facing errors: one line that names the input and the problem, never a traceback."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """A problem with something the user gave us: a file (`source`), or an argument (`field`, the
    library's own name for it, such as ``train_samples``; front ends map it to their flag or widget)."""

    def __init__(self, source: str | Path | None, problem: str, *, field: str | None = None):
        self.source = None if source is None else str(source)
        self.problem = " ".join(str(problem).splitlines())  # one line, even when it quotes damaged text
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source if self.source is not None else self.field
        return self.problem if where is None else f"{where}: {self.problem}"

    def labelled(self, label: str) -> str:
        """The message with the field shown as `label` (a CLI flag, a dialog's field name)."""
        return f"{label}: {self.problem}" if self.field is not None and self.source is None else str(self)


def special_file_problem(path) -> str | None:
    """Why `path` must not be opened: a named pipe (FIFO), socket or device would make a read wait
    forever or never end. None for a regular file, a folder, or a path that does not exist (the
    caller's own checks word those)."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = (
        "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "no regular file"
    )
    return f"is {kind}, not a regular file; give a file (reading this could wait forever)"


def require_regular_file(path) -> None:
    """InputError (one line naming the path) for a FIFO, socket or device; see special_file_problem."""
    problem = special_file_problem(path)
    if problem:
        raise InputError(path, problem)


def read_problem(exc: Exception) -> str:
    """Why a text file could not be read, in words: a decoding error says which encoding it looks
    like (Windows tools save UTF-16 with a byte-order mark) rather than quoting the codec."""
    if isinstance(exc, UnicodeDecodeError):
        start = exc.object[:2] if isinstance(exc.object, bytes) else b""
        hint = "it looks like UTF-16: save it as UTF-8" if start in (b"\xff\xfe", b"\xfe\xff") else "is it binary?"
        return f"not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}, {hint}"
    return str(exc)
