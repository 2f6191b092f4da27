"""Epoch-time predictions 4x beyond the modeled ranks on simulator data with known truth: the
gradient all-reduce is hidden behind the backward pass in proportion up to 10 ranks and outgrows it
between 20 and 40, which no measured point shows. Before the step composition the interval at 40
was [1.01, 1.27] s around a truth of 1.45 s."""

import json

import numpy as np
import pandas as pd
import pytest

from extradeep.analysis.analyse import analyse, prediction_table
from extradeep.analysis.epoch import EPOCH_TIME
from extradeep.experiment import Dataset

DATASET = Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64)


def expected_epoch(point) -> float:
    """truth.json's expected measured epoch time: n_t x train step + n_v x validation step."""
    step = {r["phase"]: r["expected"] for r in point["per_step"] if r["kind"] == "step" and r["metric"] == "time"}
    return point["n_t"] * step["train"] + point["n_v"] * step.get("val", 0.0)


@pytest.fixture(scope="module")
def default_network(tmp_path_factory):
    from extradeep.ingest import load_experiment
    from extradeep.simulate import simulate

    root = tmp_path_factory.mktemp("overlap_sim")
    simulate(root / "model", params={"ranks": [2, 4, 6, 8, 10]}, repetitions=1, train_steps=3, val_steps=1,
             seed=1)
    simulate(root / "eval", params={"ranks": [40]}, repetitions=1, train_steps=2, val_steps=1,
             seed=2)
    experiment = load_experiment([root / "model"], params=["ranks"], cache_dir=root / "cache", progress=False)
    truth = json.loads((root / "eval" / "truth.json").read_text())["points"][0]
    return analyse(experiment, DATASET), expected_epoch(truth)


def test_interval_at_4x_contains_the_truth_and_the_step_is_composed(default_network):
    analysis, truth = default_network
    model = analysis.model(EPOCH_TIME)
    assert type(model.train).__name__ == "StepComposition"
    row = prediction_table(analysis, pd.DataFrame({"ranks": [40.0]}))
    row = row[row["quantity"] == EPOCH_TIME].iloc[0]
    assert row["T_lo"] <= truth <= row["T_hi"]
    error = abs(row["T"] - truth) / truth
    assert error < 0.30, error  # docs/performance.md: 21% here; the exposed regime is not measured
    # the interval is not wider than needed inside the measured range
    lo, hi = model.interval(np.array([6.0]))
    assert (hi - lo) / model.predict(np.array([6.0])) < 0.15
