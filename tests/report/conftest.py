"""A small simulated experiment, analysed once per session, for the report tests."""

import pytest


@pytest.fixture(scope="session")
def small_analysis(tmp_path_factory):
    from extradeep import load_experiment
    from extradeep.aggregate.experiment import Dataset
    from extradeep.analysis.core import analyse
    from extradeep.simulate import simulate

    root = tmp_path_factory.mktemp("report-sim")
    simulate(root / "runs", params={"ranks": [2, 4, 6, 8, 10]}, repetitions=2, train_steps=3, val_steps=1, seed=3)
    experiment = load_experiment([root / "runs"], params=["ranks"], cache_dir=root / "cache", progress=False)
    return analyse(experiment, Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64))
