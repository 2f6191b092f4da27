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


@pytest.fixture(scope="module")
def folder_evaluation(cache, tmp_path_factory):
    """`evaluate` of the exports with ranks 12 and 16 held out: (exit code, stdout, errors CSV)."""
    return _evaluate([str(SAMPLES), "--param", "ranks", *DATASET, *cache], tmp_path_factory.mktemp("folder"))


def _evaluate(source: list[str], folder: Path):
    import contextlib
    import io

    csv, out = folder / "errors.csv", io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["evaluate", *source, "--eval-points", "12,16", "--csv", str(csv)])
    return code, out.getvalue(), pd.read_csv(csv) if code == 0 else None


def test_held_out_points_give_percentage_errors_and_mpe_tables(folder_evaluation):
    code, out, errors = folder_evaluation
    assert code == 0, out
    assert "per category and metric" in out and "per region class and metric" in out
    epoch = errors[(errors.model_type == "application") & (errors.name == "epoch time")].set_index("ranks")
    assert list(epoch.index) == [2, 4, 6, 8, 10, 12, 16]
    assert set(epoch.loc[[12, 16], "role"]) == {"evaluation"} and set(epoch.loc[[2, 10], "role"]) == {"modeling"}
    recomputed = (epoch["predicted"] - epoch["value"]).abs() / epoch["value"] * 100
    np.testing.assert_allclose(epoch["error_pct"], recomputed)
    assert epoch.loc[16, "error_pct"] < 5.0  # 1.6x beyond the modeling range, 2% instance noise
    assert {"kernel", "memcpy", "step"} <= set(errors.kind)


def test_a_saved_experiment_is_evaluated_as_its_folder(folder_evaluation, sample_saved, tmp_path):
    """Honest evaluation (issue 20): the saved models saw the held-out points, so evaluate fits again
    without them, from the raw values the file keeps, and gets exactly what the folder gets. Before,
    it reused the saved models: 0.54% and 1.55% at 12 and 16 ranks, in-sample errors."""
    saved = sample_saved[0]  # `model --save` of the same folder (its extradeep.toml has these dataset sizes)
    code, out, errors = _evaluate([str(saved)], tmp_path)
    assert code == 0, out
    assert "fitted again without the evaluation points (ranks = 12, 16)" in out
    _, folder_out, expected = folder_evaluation
    assert "fitted again without the evaluation points" in folder_out
    key = ["model_type", "name", "kind", "category", "metric", "ranks"]
    got, want = (frame.sort_values(key).reset_index(drop=True) for frame in (errors, expected))
    assert got[key].equals(want[key]) and got["role"].equals(want["role"])
    for column in ("value", "predicted", "lo", "hi", "error_pct"):
        np.testing.assert_allclose(got[column], want[column], rtol=1e-9, err_msg=column)
    # and the saved models themselves (fitted on every point) would have predicted otherwise
    from extradeep.aggregate.experiment import Experiment
    from extradeep.analysis.core import analyse

    in_sample = analyse(Experiment.load(saved)).model("epoch time").predict(np.array([12.0, 16.0]))
    held = want[(want.name == "epoch time") & (want.model_type == "application")].set_index("ranks")
    assert not np.allclose(in_sample, held.loc[[12, 16], "predicted"], rtol=1e-6)


def test_eval_points_that_were_not_measured_are_refused(capsys, cache):
    code = main(["evaluate", str(SAMPLES), "--param", "ranks", *cache, "--eval-points", "12,99"])
    err = capsys.readouterr().err
    assert code == 2 and "99 not measured" in err
