"""Epoch-time predictions 2x and 4x beyond the modeled ranks (2-10, 2 repetitions) on simulator
data with known truth, for three networks. The gradient all-reduce (p log2 p) is hidden behind the
backward pass in proportion while it is short; on the slow network the overlap window fills inside
the measured range, on the default one between 20 and 40 ranks, which no measured point shows.
Figures: docs/performance.md, "Epoch predictions beyond the measured range"."""

import json

import numpy as np
import pandas as pd
import pytest

from extradeep.aggregate.experiment import Dataset
from extradeep.analysis.communication import CommunicationSum
from extradeep.analysis.core import analyse, prediction_table
from extradeep.analysis.epoch import EPOCH_TIME

DATASET = Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64)
NETWORKS = {"default": 1.0, "fast": 16.0, "slow": 0.25}


def expected_epoch(point) -> float:
    """truth.json's expected measured epoch time: n_t x train step + n_v x validation step."""
    step = {r["phase"]: r["expected"] for r in point["per_step"] if r["kind"] == "step" and r["metric"] == "time"}
    return point["n_t"] * step["train"] + point["n_v"] * step.get("val", 0.0)


@pytest.fixture(scope="module", params=list(NETWORKS))
def network(request, tmp_path_factory):
    from extradeep import load_experiment
    from extradeep.simulate import simulate

    root = tmp_path_factory.mktemp(f"overlap_{request.param}")
    scale = NETWORKS[request.param]
    simulate(
        root / "model",
        params={"ranks": [2, 4, 6, 8, 10]},
        repetitions=2,
        train_steps=3,
        val_steps=1,
        seed=1,
        nccl_bandwidth_scale=scale,
    )
    simulate(
        root / "eval",
        params={"ranks": [20, 40]},
        repetitions=1,
        train_steps=2,
        val_steps=1,
        seed=2,
        nccl_bandwidth_scale=scale,
    )
    analyses = {}
    for replay in (True, False):
        experiment = load_experiment(
            [root / "model"], params=["ranks"], cache_dir=root / "cache", progress=False, replay=replay
        )
        analyses[replay] = analyse(experiment, DATASET)
    truth = {
        p["params"]["ranks"]: expected_epoch(p)
        for p in json.loads((root / "eval" / "truth.json").read_text())["points"]
    }
    return request.param, analyses, truth


def errors_from_truth(name: str, analysis, truth: dict) -> dict:
    """Relative error of the epoch-time prediction at 20 and 40 ranks; the truth must be inside the interval."""
    table = prediction_table(analysis, pd.DataFrame({"ranks": [20.0, 40.0]}))
    table = table[table["quantity"] == EPOCH_TIME].set_index("ranks")
    errors = {}
    for ranks in (20, 40):
        row = table.loc[float(ranks)]
        assert row["T_lo"] <= truth[ranks] <= row["T_hi"], (name, ranks)
        errors[ranks] = abs(row["T"] - truth[ranks]) / truth[ranks]
    return errors


def test_predictions_beyond_the_range_against_the_truth(network):
    name, analyses, truth = network
    model = analyses[True].model(EPOCH_TIME)
    assert type(model.train).__name__ == "StepComposition"
    assert isinstance(model.train.comm, CommunicationSum)  # per collective, waits apart
    assert model.train.choice == "replayed"
    errors = errors_from_truth(name, analyses[True], truth)
    print(f"\n{name} network: {errors[20]:.1%} at 2x, {errors[40]:.1%} at 4x from the truth")
    # 3 training steps: measurement noise is up to 2%; the default network's overlap window fills between 20 and 40
    # ranks, which only the replayed trace shows
    assert errors[20] < 0.03 and errors[40] < 0.04, errors


def test_without_the_replay_the_interval_still_holds_the_truth(network):
    name, analyses, truth = network
    assert analyses[False].model(EPOCH_TIME).train.choice != "replayed"
    errors = errors_from_truth(name, analyses[False], truth)
    assert errors[20] < 0.03, errors
    if name == "default":
        # from the step times alone the overlap keeps its measured share: about 13% low at 4x
        assert errors[40] > 0.05, errors


def test_the_interval_stays_narrow_inside_the_measured_range(network):
    _, analyses, _ = network
    model = analyses[True].model(EPOCH_TIME)
    lo, hi = model.interval(np.array([6.0]))
    assert (hi - lo) / model.predict(np.array([6.0])) < 0.15
