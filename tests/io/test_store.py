"""The saved-experiment file: atomic saves and one clear line for a damaged file (issue 17, item 3)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3

import pytest

from extradeep import load_experiment
from extradeep.aggregate.experiment import Experiment
from extradeep.errors import InputError
from extradeep.io import store
from extradeep.simulate import simulate

SMALL = {"repetitions": 1, "train_steps": 2, "val_steps": 1, "truth_replicates": 0, "progress": False}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    simulate(root / "runs", params={"ranks": [2, 3]}, **SMALL)
    experiment = load_experiment(root / "runs", cache_dir=root / "cache", progress=False)
    experiment.save(root / "exp.sqlite")
    return experiment, root / "exp.sqlite"


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_save_that_fails_half_way_leaves_the_earlier_file_and_no_debris(saved, monkeypatch):
    experiment, path = saved
    before = _sha(path)
    written = []

    def failing_write(db, name, frame):
        written.append(name)
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        return real_write(db, name, frame)

    real_write = store._write
    monkeypatch.setattr(store, "_write", failing_write)
    with pytest.raises(OSError):
        experiment.save(path)
    assert len(written) == 3 and _sha(path) == before
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []
    monkeypatch.undo()
    assert len(Experiment.load(path).points) == len(experiment.points)  # the earlier save still loads


def test_a_save_replaces_the_earlier_experiment_in_one_step(saved, tmp_path):
    experiment, path = saved
    target = tmp_path / "again.sqlite"
    shutil.copy(path, target)
    experiment.save(target)
    loaded = Experiment.load(target)
    assert loaded.params == experiment.params and len(loaded.points) == len(experiment.points)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ("DROP TABLE provenance", "table provenance missing"),
        ("DROP TABLE settings", "table settings missing"),
        ("ALTER TABLE measurements_by_rep DROP COLUMN rep", "measurements_by_rep lacks column(s) rep"),
        ("ALTER TABLE measurements DROP COLUMN ranks", "measurements lacks column(s) ranks"),
        ("UPDATE settings SET value = 'nan nan' WHERE key = 'reader'", "setting 'reader' is missing or not valid JSON"),
        ("UPDATE extradeep_meta SET value = '[1, 2]' WHERE key = 'params'", "is not a list of names"),
    ],
)
def test_a_damaged_experiment_is_one_line_naming_the_missing_part(saved, tmp_path, edit, expected):
    _, path = saved
    target = tmp_path / "damaged.sqlite"
    shutil.copy(path, target)
    with sqlite3.connect(target) as conn:
        conn.execute(edit)
    before = _sha(target)
    with pytest.raises(InputError) as caught:
        Experiment.load(target)
    assert str(target) in str(caught.value) and "damaged saved experiment" in str(caught.value)
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    assert _sha(target) == before
