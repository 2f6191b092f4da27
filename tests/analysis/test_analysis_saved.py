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
    experiment = load_experiment([root / "runs"], params=["ranks"], dataset=DATASET, cache_dir=root / "cache",
                                 progress=False)
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
