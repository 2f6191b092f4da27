"""`extradeep evaluate --eval-dir` on simulator data with known truth: how far predictions reach.

Modeling points: ranks 2-10 (2 repetitions); evaluation points 20 (2x) and 40 (4x) from a second
simulation. The truth is the simulator's noise-free expected epoch time (truth.json).
Measured figures (benchmarks/bench_analysis.py, docs/performance.md): at 2x the error against the
truth is about 1%, within the measurement noise; at 4x about 13%: the gradient all-reduce, hidden
behind the backward pass in proportion up to 10 ranks, fills the overlap window between 20 and 40
ranks, which no measured point shows (the communication itself is extrapolated within ~2%).
"""

import json

import pandas as pd
import pytest

from extradeep.cli import main
from extradeep.simulate import simulate

STEPS = dict(train_steps=3, val_steps=1)
DATASET = ["--train-samples", "50000", "--val-samples", "10000", "--batch-size", "64"]


@pytest.fixture(scope="module")
def errors(tmp_path_factory):
    root = tmp_path_factory.mktemp("simulated")
    simulate(root / "model", params={"ranks": [2, 4, 6, 8, 10]}, repetitions=2, seed=1, **STEPS)
    simulate(root / "eval", params={"ranks": [20, 40]}, repetitions=1, seed=2, **STEPS)
    csv = root / "errors.csv"
    code = main(
        [
            "evaluate",
            str(root / "model"),
            "--eval-dir",
            str(root / "eval"),
            "--param",
            "ranks",
            *DATASET,
            "--cache-dir",
            str(root / "cache"),
            "--csv",
            str(csv),
        ]
    )
    assert code == 0
    truth = json.loads((root / "eval" / "truth.json").read_text())
    table = pd.read_csv(csv)
    epoch = table[(table.model_type == "application") & (table.name == "epoch time")].set_index("ranks")
    epoch["truth"] = pd.Series({p["params"]["ranks"]: p["epoch_time"] for p in truth["points"]})
    return epoch


def test_modeling_points_are_fitted_closely(errors):
    modeling = errors[errors.role == "modeling"]
    assert len(modeling) == 5 and (modeling.error_pct < 2.0).all()


def test_twice_beyond_the_range_the_prediction_is_within_the_noise(errors):
    row = errors.loc[20]
    noise = abs(row["value"] - row["truth"]) / row["truth"]  # measured vs noise-free truth
    error = abs(row["predicted"] - row["truth"]) / row["truth"]
    assert error < max(2 * noise, 0.03), (error, noise)


def test_four_times_beyond_the_range_the_error_is_reported_honestly(errors):
    row = errors.loc[40]
    error = abs(row["predicted"] - row["truth"]) / row["truth"]
    print(f"\n4x beyond the modeling range: {error:.1%} from the truth, {row['error_pct']:.1f}% from the measurement")
    # Regression guard on the figure in the module docstring (about 13%; 20% before communication
    # was modeled per collective): the overlap window is not measured.
    assert error < 0.18
    # The interval reaches the exposed regime: the truth and the measurement are inside it.
    assert row["lo"] <= row["truth"] <= row["hi"]
    assert bool(row["inside_interval"]) == (row["lo"] <= row["value"] <= row["hi"]) and row["inside_interval"]
