"""ReaderSettings: hashable and serialisable (the per-file cache keys on them), validated up front."""

from __future__ import annotations

import json

import pytest

from extradeep.errors import InputError
from extradeep.io.settings import READER_VERSION, ReaderSettings


def test_hashable_and_round_trips():
    a = ReaderSettings(train_step_pattern=r"iter (\d+)", warmup_epochs=2)
    b = ReaderSettings.from_any(json.loads(json.dumps(a.to_dict())))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert ReaderSettings.from_any(None) == ReaderSettings()
    assert ReaderSettings.from_any({"warmup_epochs": None}) == ReaderSettings()  # None means default
    assert json.loads(a.key())["reader_version"] == READER_VERSION
    assert a.key() != ReaderSettings().key()


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"kernel_names": "long"}, "kernel names"),
        ({"warmup_steps": 1.5}, "warmup-steps"),
        ({"warmup_epochs": -1}, "warmup-epochs"),
        ({"epoch_regex": "x"}, "unknown reader setting"),
    ],
)
def test_invalid_settings(bad, match):
    with pytest.raises(InputError, match=match):
        ReaderSettings.from_any(bad)
