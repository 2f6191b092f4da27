"""One pass per file: `extradeep model` opens each export once (with or without the exposure replay),
a warm cache opens none, and a Kineto trace is parsed once. Counted on simulator output by wrapping
`sqlite3.connect` and the trace loader, the only ways the readers open a profile's content."""

import sqlite3
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import extradeep.io.kineto.load as kineto_load
from extradeep import load_experiment
from extradeep.cli import main
from extradeep.simulate import simulate

RANKS = [2, 3, 4]  # three points: with --min-points 3, enough to model and to replay the largest three


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("one_pass")
    simulate(out, params={"ranks": RANKS}, repetitions=1, epochs=2, train_steps=2, val_steps=1, seed=3)
    return out


@pytest.fixture
def sqlite_opens(monkeypatch):
    """Counter of sqlite3.connect calls by the resolved path of the database they open."""
    opens: Counter = Counter()
    real = sqlite3.connect

    def counting(database, *args, **kwargs):
        text = str(database)
        path = unquote(urlparse(text).path) if text.startswith("file:") else text
        opens[str(Path(path).resolve())] += 1
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting)
    return opens


def _exports(folder: Path) -> list[str]:
    return sorted(str(p.resolve()) for p in folder.glob("*.sqlite"))


@pytest.mark.parametrize("replay", [False, True], ids=["no-replay", "replay"])
def test_model_opens_each_export_once(study, sqlite_opens, replay):
    argv = ["model", str(study), "--param", "ranks", "--no-cache", "--jobs", "1", "--min-points", "3"]
    assert main(argv + ([] if replay else ["--no-replay"])) == 0
    exports = _exports(study)
    assert len(exports) == sum(RANKS)
    assert {path: sqlite_opens[path] for path in exports} == dict.fromkeys(exports, 1)
    assert set(sqlite_opens) == set(exports)  # nothing else (no second reader, no placement pass)


def test_the_replay_uses_the_frames_of_the_pass(study, sqlite_opens):
    experiment = load_experiment(study, ["ranks"], use_cache=False, progress=False, jobs=1, min_points=3)
    assert len(experiment.settings["exposure"]) == 3  # the 3 largest points were replayed
    assert all(curve["hidden"] for curve in experiment.settings["exposure"])
    assert max(sqlite_opens.values()) == 1


def test_a_warm_cache_opens_no_export(study, sqlite_opens, tmp_path):
    cache = tmp_path / "cache"
    first = load_experiment(study, ["ranks"], cache_dir=cache, progress=False, jobs=1, min_points=3)
    assert max(sqlite_opens.values()) == 1
    sqlite_opens.clear()
    second = load_experiment(study, ["ranks"], cache_dir=cache, progress=False, jobs=1, min_points=3)
    assert [p for p in sqlite_opens if p in _exports(study)] == []
    assert second.settings["exposure"] == first.settings["exposure"]
    assert second.settings["layout"] == first.settings["layout"]


def test_a_cached_step_sum_with_a_missing_curve_opens_the_replayed_exports_once(study, sqlite_opens, tmp_path):
    cache = tmp_path / "cache"
    load_experiment(study, ["ranks"], cache_dir=cache, progress=False, jobs=1, replay=False, min_points=3)
    sqlite_opens.clear()
    experiment = load_experiment(study, ["ranks"], cache_dir=cache, progress=False, jobs=1, min_points=3)
    replayed = {p for p in sqlite_opens if p in _exports(study)}
    assert len(replayed) == sum(RANKS[-3:])  # only the runs at the 3 largest points, each once
    assert max(sqlite_opens.values()) == 1
    assert len(experiment.settings["exposure"]) == 3


def test_a_kineto_trace_is_parsed_once(tmp_path, monkeypatch):
    simulate(
        tmp_path,
        params={"ranks": [2, 3, 4]},
        repetitions=1,
        epochs=2,
        train_steps=2,
        val_steps=1,
        seed=3,
        formats=("kineto",),
    )
    loads: Counter = Counter()
    real = kineto_load.load
    monkeypatch.setattr(kineto_load, "load", lambda path: loads.update([str(path)]) or real(path))
    import extradeep.io.kineto.read as kineto_read
    import extradeep.io.kineto.replay as kineto_replay

    monkeypatch.setattr(kineto_read, "load", kineto_load.load)
    monkeypatch.setattr(kineto_replay, "load", kineto_load.load)
    experiment = load_experiment(tmp_path, ["ranks"], use_cache=False, progress=False, jobs=1, min_points=3)
    traces = sorted(str(p) for p in tmp_path.glob("*.json.gz"))
    assert len(traces) == 9 and len(experiment.provenance) == 9
    assert {str(Path(p)): n for p, n in loads.items()} == dict.fromkeys(traces, 1)
    assert experiment.settings["exposure"]  # replayed from the frames of the one parse
