"""Reader settings: everything that changes what `read_export` returns (the per-file cache keys on them)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from extradeep.errors import InputError

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
    kernel_names: str = "short"

    def __post_init__(self):
        if self.kernel_names not in ("short", "demangled"):
            raise InputError(None, f"kernel names must be 'short' or 'demangled', not {self.kernel_names!r}")
        for name in ("warmup_epochs", "warmup_steps"):
            value = getattr(self, name)
            if int(value) != value or value < 0:
                raise InputError(None, f"{name.replace('_', '-')} must be a whole number >= 0, not {value!r}")
            object.__setattr__(self, name, int(value))

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
