"""floor() in the steps per epoch (paper Eq. 2): samples per epoch, skipped data, efficiency per
sample and budget picks. The per-step time is constant (perfect strong scaling of the work per
sample), so the only thing that changes the epoch time is the number of steps."""

import numpy as np
import pandas as pd
import pytest

from extradeep.aggregate.experiment import Dataset
from extradeep.analysis.budget import BudgetLimits, budget_search
from extradeep.analysis.cost import CostSettings
from extradeep.analysis.epoch import EpochModel, work_samples

DATASET = Dataset(train_samples=50_000, val_samples=0, batch_per_rank=64)
RANKS = pd.DataFrame({"ranks": np.arange(2, 129, 2, dtype=float)})
STEP = 0.05  # seconds per training step at any ranks


def steps_model(law):
    return EpochModel(law(lambda p: STEP + 0 * p), None, DATASET, ["ranks"], {})


def test_work_samples_count_whole_batches_and_never_the_padding():
    p = RANKS["ranks"].to_numpy()
    expected = np.floor(50_000 / p / 64) * p * 64  # independent: whole batches of 64 on every rank
    np.testing.assert_array_equal(work_samples(DATASET, RANKS), expected)
    assert work_samples(DATASET, RANKS)[list(p).index(112.0)] == 43_008
    # keeping the last partial batch pads it: the epoch trains on the whole data set, not more
    keep = Dataset(train_samples=50_000, val_samples=0, batch_per_rank=64, last_batch="keep")
    np.testing.assert_array_equal(work_samples(keep, RANKS), 50_000)


def test_efficiency_per_sample_cannot_exceed_one_from_rounding(law):
    """Perfect scaling of the work per sample gives E = 1 everywhere; comparing epoch times
    would give up to 1.16 at ranks = 112 (an epoch that leaves out 14% of the data)."""
    result = budget_search(
        steps_model(law), RANKS, ["ranks"], BudgetLimits(max_time=1e9), CostSettings(), {"ranks": 2.0}, "strong"
    )
    np.testing.assert_allclose(result.table["efficiency"], 1.0, rtol=1e-12)
    time_ratio = result.table["T_base"] / result.table["T"] * 2 / result.table["ranks"]
    assert time_ratio.max() > 1.1  # what the epoch-time ratio alone would have said


def test_budget_flags_and_avoids_epochs_that_skip_data(law):
    """The fastest valid epoch is ranks=112 only because it processes 43,008 of 50,000 samples;
    the best-by-time pick must be a configuration that processes (almost) all of them."""
    result = budget_search(
        steps_model(law),
        RANKS,
        ["ranks"],
        BudgetLimits(max_time=3600.0, epochs=90),
        CostSettings(),
        {"ranks": 2.0},
        "strong",
    )
    table = result.table.set_index("ranks")
    assert table["T"].idxmin() in (112.0, 114.0, 116.0, 118.0)
    best = result.best.set_index("criterion")
    assert table.loc[best.loc["time", "ranks"], "skipped_share"] <= 0.03
    assert any("skip more than 3%" in n and "ranks=112 (43,008 of 50,000" in n for n in result.notes)


def test_prediction_table_reports_samples_and_per_sample_efficiency(synthetic):
    from extradeep.analysis.core import analyse, extrapolation_notes, prediction_table

    make, _, _ = synthetic
    analysis = analyse(make([2, 4, 6, 8, 10], DATASET))
    grid = pd.DataFrame({"ranks": [16.0, 56.0, 112.0]})
    table = prediction_table(analysis, grid)
    comp = table[table["quantity"] == "computation"].set_index("ranks")
    # computation per step is constant in the synthetic truth: per-sample efficiency ~ 1, never 1.15
    np.testing.assert_allclose(comp["efficiency"], 1.0, atol=0.03)
    assert comp.loc[112.0, "samples"] == 43_008
    assert comp.loc[112.0, "skipped_share"] == pytest.approx(0.13984)
    notes = extrapolation_notes(analysis, grid)
    assert any("ranks=56" in n and "ranks=112" in n and "ranks=16 " not in n for n in notes)
