"""The exposure curve (extradeep.predictor.exposure) against regenerated truth: replaying one run
with its collectives k times longer must give the step time of the same run simulated with a
network that makes them k times longer, and ingest keeps the curves of the largest runs."""

import numpy as np
import pytest

from extradeep import load_experiment
from extradeep.analysis.communication import pure_times
from extradeep.analysis.overlap import Exposure
from extradeep.io.discover import file_sha256
from extradeep.predictor.exposure import exposure_curve
from extradeep.simulate import simulate

RUN = dict(params={"ranks": [8]}, repetitions=1, epochs=2, train_steps=3, val_steps=1, seed=3)


def _run(tmp_path_factory, name, bandwidth):
    out = tmp_path_factory.mktemp(name)
    simulate(out, nccl_bandwidth_scale=bandwidth, **RUN)
    experiment = load_experiment(out, ["ranks"], use_cache=False, progress=False, replay=False, min_points=1)
    return out, experiment


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return _run(tmp_path_factory, "exposure_default", 1.0)


def _train_step(experiment) -> float:
    points = experiment.points
    row = points[(points["region"] == "step") & (points["phase"] == "train") & (points["metric"] == "time")]
    return float(row["value"].iloc[0])


def _pure_sum(experiment) -> float:
    return float(pure_times(experiment.values, ["ranks"])["pure"].sum())


def test_the_curve_at_k_1_is_the_measured_step_and_the_hidden_share_falls(traced):
    folder, experiment = traced
    before = {p.name: file_sha256(p) for p in folder.glob("*.sqlite")}
    curve = exposure_curve(sorted(folder.glob("*.sqlite")))
    assert {p.name: file_sha256(p) for p in folder.glob("*.sqlite")} == before
    at_one = float(curve.loc[curve["k"] == 1.0, "step"].iloc[0])
    assert at_one == pytest.approx(_train_step(experiment), rel=0.01)
    assert (np.diff(curve["step"]) > 0).all()  # longer collectives never make the step shorter
    beyond = curve[curve["k"] >= 1.0]["hidden"].to_numpy()
    assert (np.diff(beyond) <= 1e-3).all() and beyond[-1] < 0.5 * beyond[0]  # the window fills


def test_the_reader_step_conventions_decide_which_steps_are_replayed(traced):
    folder, _ = traced
    paths = sorted(folder.glob("*.sqlite"))
    nowhere = {"train_step_pattern": r"no step (\d+)", "val_step_pattern": r"no step (\d+)"}
    assert exposure_curve(paths, factors=(0.0, 1.0, 2.0), settings=nowhere).empty
    assert len(exposure_curve(paths, factors=(0.0, 1.0, 2.0))) == 3


@pytest.mark.parametrize("bandwidth", [0.5, 0.25])
def test_replayed_longer_collectives_match_a_slower_network(traced, tmp_path_factory, bandwidth):
    folder, experiment = traced
    _, slower = _run(tmp_path_factory, f"exposure_{bandwidth}", bandwidth)
    k = _pure_sum(slower) / _pure_sum(experiment)  # how much longer the slower network's collectives are
    assert k > 1.5
    curve = exposure_curve(sorted(folder.glob("*.sqlite")))
    predicted = float(np.interp(k, curve["k"], curve["step"]))
    assert predicted == pytest.approx(_train_step(slower), rel=0.02)
    # the step the uniform rule would predict (the hidden share kept) is further off
    share = float(np.interp(1.0, curve["k"], curve["hidden"]))
    pure = _pure_sum(experiment)
    kept = float(curve.loc[curve["k"] == 0.0, "step"].iloc[0]) + (1 - share) * k * pure
    assert abs(predicted - _train_step(slower)) < abs(kept - _train_step(slower))


def _must_not_run(paths, settings=None):
    raise AssertionError("replayed again although the curve is cached")


def test_ingest_keeps_the_curves_of_the_largest_runs(tmp_path, monkeypatch):
    from extradeep.aggregate.experiment import Experiment
    from extradeep.analysis.core import subset_experiment

    folder = tmp_path / "run"
    simulate(folder, params={"ranks": [2, 3, 4, 6]}, repetitions=2, epochs=2, train_steps=2, val_steps=1, seed=4)
    experiment = load_experiment(folder, ["ranks"], cache_dir=tmp_path / "cache", progress=False)
    curves = experiment.settings["exposure"]
    assert [c["point"] for c in curves] == [{"ranks": 3}, {"ranks": 4}, {"ranks": 6}]
    assert all(c["rep"] == 1 and len(c["k"]) == len(c["hidden"]) for c in curves)
    exposure = Exposure.from_experiment(experiment)
    assert exposure.x_ref == 6.0 and exposure.relative(1.0)[0] == pytest.approx(1.0)
    # a model of the points without the largest uses the next curve, never a held-out point's
    points = experiment.points[["ranks"]].drop_duplicates()
    assert Exposure.from_experiment(subset_experiment(experiment, points[points["ranks"] < 6])).x_ref == 4.0
    assert Exposure.from_experiment(experiment, upto=5).x_ref == 4.0
    assert Exposure.from_experiment(subset_experiment(experiment, points[points["ranks"] < 3])) is None
    # cached: a second load does not replay again
    import extradeep.predictor.exposure as exposure_module

    monkeypatch.setattr(exposure_module, "exposure_curve", _must_not_run)
    # jobs=1: a replay would run in this process, where the patch is (workers import the module afresh)
    again = load_experiment(folder, ["ranks"], cache_dir=tmp_path / "cache", progress=False, jobs=1)
    assert again.settings["exposure"] == curves
    saved = tmp_path / "exp.sqlite"
    experiment.save(saved)
    assert Experiment.load(saved).settings["exposure"] == curves
    assert "exposure" not in load_experiment(folder, ["ranks"], use_cache=False, progress=False, replay=False).settings


def test_a_run_that_cannot_be_replayed_is_a_note_not_an_error(tmp_path, monkeypatch):
    import extradeep.predictor.exposure as exposure_module

    simulate(tmp_path, params={"ranks": [2, 3]}, repetitions=1, epochs=2, train_steps=2, val_steps=1, seed=4)

    def broken(paths, settings=None, frames=None):
        raise ValueError("collectives do not match across ranks")

    monkeypatch.setattr(exposure_module, "exposure_curve", broken)
    # jobs=1: the replays run in this process, where the patch is (workers import the module afresh)
    experiment = load_experiment(tmp_path, ["ranks"], use_cache=False, progress=False, jobs=1)
    assert experiment.settings["exposure"] == []
    failed = [n for n in experiment.settings["notes"] if "could not be replayed (ValueError: collectives do not" in n]
    assert len(failed) == 2 and "ranks=3, repetition 1" in failed[1]
