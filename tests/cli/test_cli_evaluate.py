"""`extradeep evaluate` end to end on sample_profiles/ (ranks 12 and 16 held out)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from extradeep.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"
DATASET = ["--train-samples", "50000", "--val-samples", "10000", "--batch-size", "64"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return ["--cache-dir", str(tmp_path_factory.getbasetemp() / "extradeep-cache")]


def test_held_out_points_give_percentage_errors_and_mpe_tables(capsys, cache, tmp_path):
    csv = tmp_path / "errors.csv"
    code = main(
        ["evaluate", str(SAMPLES), "--param", "ranks", *DATASET, *cache, "--eval-points", "12,16", "--csv", str(csv)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "per category and metric" in out and "per region class and metric" in out
    errors = pd.read_csv(csv)
    epoch = errors[(errors.model_type == "application") & (errors.name == "epoch time")].set_index("ranks")
    assert list(epoch.index) == [2, 4, 6, 8, 10, 12, 16]
    assert set(epoch.loc[[12, 16], "role"]) == {"evaluation"} and set(epoch.loc[[2, 10], "role"]) == {"modeling"}
    recomputed = (epoch["predicted"] - epoch["value"]).abs() / epoch["value"] * 100
    np.testing.assert_allclose(epoch["error_pct"], recomputed)
    assert epoch.loc[16, "error_pct"] < 5.0  # 1.6x beyond the modeling range, 2% instance noise
    assert {"kernel", "memcpy", "step"} <= set(errors.kind)


def test_eval_points_that_were_not_measured_are_refused(capsys, cache):
    code = main(["evaluate", str(SAMPLES), "--param", "ranks", *cache, "--eval-points", "12,99"])
    err = capsys.readouterr().err
    assert code == 2 and "99 not measured" in err
