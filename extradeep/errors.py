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
