"""Models saved with an experiment are read back, not refitted, while they were fitted the same way."""

import numpy as np
import pytest

from extradeep import Dataset, Experiment, analyse, load_experiment
from extradeep.analysis.saved import models_tables
from extradeep.simulate import simulate

DATASET = Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved-models")
    simulate(root / "runs", params={"ranks": [2, 4, 6, 8, 10]}, repetitions=2, train_steps=3, val_steps=1, seed=5)
    experiment = load_experiment(
        [root / "runs"], params=["ranks"], dataset=DATASET, cache_dir=root / "cache", progress=False
    )
    fitted = analyse(experiment)
    experiment.save(root / "exp.sqlite", extra_tables=models_tables(fitted))
    return root / "exp.sqlite", fitted


def _forbid_fitting(monkeypatch):
    import extradeep.modeling
    import extradeep.modeling.modeler as modeler

    def refuse(*args, **kwargs):
        raise AssertionError("a model was fitted although saved models apply")

    monkeypatch.setattr(modeler, "fit_models", refuse)
    monkeypatch.setattr(extradeep.modeling, "fit_models", refuse)


def test_saved_models_are_reused_and_predict_the_same(saved, monkeypatch):
    path, fitted = saved
    _forbid_fitting(monkeypatch)
    again = analyse(Experiment.load(path))
    grid = np.array([16.0, 32.0, 64.0])
    for quantity in ("epoch time", "computation", "communication"):
        assert np.allclose(again.model(quantity).predict(grid), fitted.model(quantity).predict(grid))
        assert np.allclose(again.model(quantity).interval(grid)[1], fitted.model(quantity).interval(grid)[1])
    assert len(again.region_models) == len(fitted.region_models)
    assert again.region_models["formula"].tolist() == fitted.region_models["formula"].tolist()


def test_other_options_or_refit_fit_again(saved):
    path, _ = saved
    other = analyse(Experiment.load(path), options={"n_terms": 2})
    assert any("refitted" in note for note in other.notes)
    asked = analyse(Experiment.load(path), refit=True)
    assert not any("refitted" in note for note in asked.notes)  # asked for: no surprise to explain


def test_other_dataset_sizes_fit_again(saved, monkeypatch):
    path, _ = saved
    experiment = Experiment.load(path)
    bigger = Dataset(train_samples=100_000, val_samples=10_000, batch_per_rank=64)
    _forbid_fitting(monkeypatch)
    with pytest.raises(AssertionError, match="fitted although"):
        analyse(experiment, dataset=bigger)


@pytest.fixture(scope="module")
def saved_on_one_node(tmp_path_factory):
    """Weak scaling inside one 8-GPU node, saved with its models and no system file: its
    collectives' network part is unknown ("none") in the saved models."""
    root = tmp_path_factory.mktemp("saved-one-node")
    sim = simulate(
        root / "runs",
        params={"ranks": [2, 3, 4, 6, 8]},
        topology="dgx-8-nvswitch",
        scaling="weak",
        repetitions=1,
        epochs=2,
        train_steps=3,
        val_steps=1,
        truth_ranks=[32],
    )
    data = Dataset(50_000, 10_000, 64, weak_scaling=True)
    experiment = load_experiment([root / "runs"], dataset=data, use_cache=False, progress=False)
    fitted = analyse(experiment)
    experiment.save(root / "exp.sqlite", extra_tables=models_tables(fitted))
    return root / "exp.sqlite", fitted, sim


def _network_sources(analysis) -> set[str]:
    comm = analysis.model("epoch time").train.comm
    return {getattr(m, "inter_source", "pmnf") for m in comm.kernels.values()}


def test_another_system_refits_the_communication_models(saved_on_one_node):
    path, fitted, sim = saved_on_one_node
    assert "none" in _network_sources(fitted)
    told = analyse(load_experiment(path, system="dgx-8-nvswitch", progress=False))
    assert any("other system (--system), so they were refitted" in n for n in told.notes)
    assert "system" in _network_sources(told) and "none" not in _network_sources(told)
    # refitted on the system's links, the prediction beyond the node is the simulator's truth
    truth = {p["params"]["ranks"]: p["epoch_time"] for p in sim.truth["truth_points"]}
    assert abs(told.model("epoch time").predict(32.0) / truth[32] - 1) <= 0.10
    assert not any("WARNING: every measured point" in n for n in told.notes)


def test_the_same_system_reuses_the_saved_models(saved_on_one_node, tmp_path, monkeypatch):
    path, _, _ = saved_on_one_node
    told = load_experiment(path, system="dgx-8-nvswitch", progress=False)
    refitted = analyse(told)
    told.save(tmp_path / "with-system.sqlite", extra_tables=models_tables(refitted))
    _forbid_fitting(monkeypatch)
    again = analyse(load_experiment(tmp_path / "with-system.sqlite", system="dgx-8-nvswitch", progress=False))
    assert again.model("epoch time").predict(32.0) == pytest.approx(refitted.model("epoch time").predict(32.0))
    assert not any("refitted" in n for n in again.notes)
