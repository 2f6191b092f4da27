"""Reader settings: everything that changes what `read_export` returns (the per-file cache keys on them)."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Literal

from extradeep.errors import InputError

KernelNames = Literal["short", "demangled"]
KERNEL_NAMES = ("short", "demangled")
PATTERNS = ("epoch_pattern", "train_step_pattern", "val_step_pattern")

# Bump when read_export's output changes for the same file and settings.
READER_VERSION = "2"  # 2: region "gpu busy" (union of GPU activity per step)


@dataclass(frozen=True)
class ReaderSettings:
    """How to read one export: step-mark patterns, warm-up exclusion and kernel naming.

    `epoch_pattern`, `train_step_pattern`, `val_step_pattern`: regular expressions searched for
    anywhere in NVTX range names (re.search; anchor with ^...$ to match whole names only);
    `DOMAIN:REGEX` restricts one to an NVTX domain of that name. A given
    pattern replaces the built-in conventions for its level only. The first capture group, if any,
    is the epoch/step number. `warmup_epochs` leading epochs are excluded; when the export holds a
    single epoch, its first `warmup_steps` steps of each phase are excluded instead.
    `kernel_names`: "short" (`ncclDevKernel_SendRecv`) or "demangled" (full signature).
    """

    epoch_pattern: str | None = None
    train_step_pattern: str | None = None
    val_step_pattern: str | None = None
    warmup_epochs: int = 1
    warmup_steps: int = 1
    kernel_names: KernelNames = "short"

    def __post_init__(self):
        if self.kernel_names not in KERNEL_NAMES:
            raise InputError(None, f"kernel names must be 'short' or 'demangled', not {self.kernel_names!r}")
        for name in ("warmup_epochs", "warmup_steps"):
            value = getattr(self, name)
            whole = isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
            if not whole or value < 0:
                raise InputError(None, f"{name.replace('_', '-')} must be a whole number >= 0, not {value!r}")
            object.__setattr__(self, name, int(value))
        for name in PATTERNS:
            _check_pattern(name, getattr(self, name))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def key(self) -> str:
        """A stable text for cache keys."""
        return json.dumps({"reader_version": READER_VERSION, **self.to_dict()}, sort_keys=True)

    @classmethod
    def from_any(cls, settings) -> ReaderSettings:
        """ReaderSettings from None, a ReaderSettings or a dict (unknown keys are refused; None
        values mean the default)."""
        if settings is None:
            return cls()
        if isinstance(settings, cls):
            return settings
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise InputError(None, f"unknown reader setting(s): {', '.join(unknown)}")
        return cls(**{k: v for k, v in settings.items() if v is not None})


def _check_pattern(name: str, pattern) -> None:
    """A step pattern is text that compiles as a regular expression, as a whole or after a
    `DOMAIN:` prefix (whether DOMAIN is an NVTX domain only the file can tell): refused once, here,
    not once per file."""
    if pattern is None:
        return
    if not isinstance(pattern, str):
        raise InputError(None, f"{name.replace('_', '-')} must be text (a regular expression), not {pattern!r}")
    head, sep, rest = pattern.partition(":")
    problems = []
    for text in [pattern] + ([rest] if sep and head else []):
        try:
            re.compile(text)
            return
        except re.error as exc:
            problems.append(exc)
    raise InputError(None, f"invalid step pattern {pattern!r}: {problems[0]}")
