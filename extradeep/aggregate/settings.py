"""What an Experiment keeps about how it was read and what later steps learned about it, as one typed
value instead of string keys (issue 22 item 4).

Saved as one JSON row per field in the saved experiment's `settings` table (`extradeep.io.store`); keys
that a file of another version holds and that are no field here stay in `extra`, so a file saves back
as it was read. The value still reads like the dict it replaces (`settings["system"]`,
`settings.get("notes", [])`), for saved notebooks; the library uses the fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass
class ExperimentSettings:
    """`reader`: the reader settings the exports were read with (`ReaderSettings.to_dict()`);
    `reader_version`: the reader's version (the cache's); `aliases`: file-name token -> parameter;
    `dataset`: `dataset_dict(Dataset)` or None (per-step values only); `min_points`: points a region
    needs to be modeled; `fixed_params`: parameters with one value across the experiment; `app`: the
    application's name; `notes`: the reader's and the replay's notes; `layout`: the cluster layout
    (`extradeep.io.placement.cluster_layout`); `system`: the cluster description (`System.to_dict()`)
    or None; `exposure`: the exposure replay's curves (`extradeep.predictor.exposure`) or None;
    `extra`: keys of other versions, kept as they were."""

    reader: dict = field(default_factory=dict)
    reader_version: str | None = None
    aliases: dict = field(default_factory=dict)
    dataset: dict | None = None
    min_points: int = 5
    fixed_params: dict = field(default_factory=dict)
    app: str | None = None
    notes: list = field(default_factory=list)
    layout: dict | None = None
    system: dict | None = None
    exposure: list | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_any(cls, value) -> ExperimentSettings:
        """The settings of a mapping (a saved file's, or the dict of an older caller), or `value` itself."""
        if isinstance(value, cls):
            return value
        value = dict(value or {})
        known = {k: value.pop(k) for k in _NAMES if k in value}
        return cls(**known, extra=value)

    def to_dict(self) -> dict:
        """One entry per field that is set (None: absent), then the extra keys: what is saved."""
        out = {k: getattr(self, k) for k in _NAMES if getattr(self, k) is not None}
        return {**out, **self.extra}

    # -- read like the dict it replaces ------------------------------------------------------------------
    def __getitem__(self, key: str):
        return self.to_dict()[key]

    def get(self, key: str, default=None):
        return self.to_dict().get(key, default)

    def __setitem__(self, key: str, value) -> None:
        if key in _NAMES:
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def __delitem__(self, key: str) -> None:
        if key in _NAMES:
            setattr(self, key, _DEFAULTS[key]())
        else:
            del self.extra[key]

    def __contains__(self, key: str) -> bool:
        return key in self.to_dict()

    def __iter__(self):
        return iter(self.to_dict())

    def keys(self):
        return self.to_dict().keys()

    def items(self):
        return self.to_dict().items()

    def values(self):
        return self.to_dict().values()


_FIELDS = [f for f in dataclasses.fields(ExperimentSettings) if f.name != "extra"]
_NAMES = tuple(f.name for f in _FIELDS)
_DEFAULTS = {  # a field's default, made anew (del settings["system"] leaves the default)
    f.name: f.default_factory if f.default is dataclasses.MISSING else (lambda v=f.default: v) for f in _FIELDS
}
