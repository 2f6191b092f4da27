"""User-facing errors: one line that names the input and the problem, never a traceback."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """A problem with something the user gave us (a file, a flag, a formula)."""

    def __init__(self, source: str | Path | None, problem: str):
        self.source = None if source is None else str(source)
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        return self.problem if self.source is None else f"{self.source}: {self.problem}"
