"""Epoch models on a synthetic application whose per-step truth is known (tests/analysis/conftest.py)."""

import numpy as np
import pandas as pd
import pytest

from extradeep.aggregate.experiment import NEED_DATASET
from extradeep.analysis.core import analyse, measured_points, prediction_table, subset_experiment
from extradeep.analysis.epoch import EPOCH_TIME, EpochModel, model_from_dict

MODELING = [2, 4, 6, 8, 10]


def truth_epoch(p, dataset, truth_step):
    n_t = np.floor(dataset.train_samples / p / dataset.batch_per_rank)
    n_v = np.floor(dataset.val_samples / p / dataset.batch_per_rank)
    return n_t * truth_step(p, "train") + n_v * truth_step(p, "val")


@pytest.fixture(scope="module")
def fitted(synthetic):
    make, truth_step, dataset = synthetic
    return analyse(make(MODELING, dataset)), truth_step, dataset


def test_measured_epoch_time_is_step_time_times_steps(fitted):
    analysis, truth_step, dataset = fitted
    measured = analysis.application_points[analysis.application_points["quantity"] == EPOCH_TIME]
    expected = truth_epoch(measured["ranks"].to_numpy(float), dataset, truth_step)
    # 1% lognormal noise per step; medians over 4 steps, p ranks and 2 repetitions
    np.testing.assert_allclose(measured["value"], expected, rtol=0.02)


def test_epoch_predictions_4x_beyond_modeling_range_are_within_noise(fitted):
    analysis, truth_step, dataset = fitted
    grid = pd.DataFrame({"ranks": [20.0, 40.0]})
    table = prediction_table(analysis, grid)
    epoch = table[table["quantity"] == EPOCH_TIME]
    truth = truth_epoch(grid["ranks"].to_numpy(), dataset, truth_step)
    errors = np.abs(epoch["T"].to_numpy() - truth) / truth
    assert errors.max() < 0.03, errors
    assert ((epoch["T_lo"].to_numpy() <= truth) & (truth <= epoch["T_hi"].to_numpy())).all()


def test_breakdown_and_idle_follow_the_truth(fitted):
    analysis, truth_step, dataset = fitted
    points = analysis.application_points.pivot_table(index="ranks", columns="quantity", values="value")
    np.testing.assert_allclose(points["gpu total"], points[["computation", "communication", "memory"]].sum(axis=1))
    n_t = np.floor(dataset.train_samples / points.index.to_numpy(float) / dataset.batch_per_rank)
    n_v = np.floor(dataset.val_samples / points.index.to_numpy(float) / dataset.batch_per_rank)
    np.testing.assert_allclose(points["idle"], 0.003 * (n_t + n_v), rtol=0.25)
    comm = analysis.model("communication")
    assert "p log p" in comm.growth() or "p^1 log p" in comm.growth()


def test_strong_scaling_efficiency_of_computation_is_near_one(fitted):
    analysis, _, _ = fitted
    table = prediction_table(analysis, pd.DataFrame({"ranks": [8.0, 32.0]}))
    comp = table[table["quantity"] == "computation"]
    # per-step computation is constant, steps fall like 1/p (up to the floor in n_t)
    np.testing.assert_allclose(comp["efficiency"], 1.0, atol=0.05)
    epoch = table[table["quantity"] == EPOCH_TIME]
    assert (epoch["efficiency"] < 0.9).all()  # communication grows like p log p per step


def test_without_dataset_everything_is_per_step_with_a_note(synthetic):
    make, truth_step, _ = synthetic
    analysis = analyse(make(MODELING))
    assert analysis.per == "step" and NEED_DATASET in analysis.notes
    assert not isinstance(analysis.model(EPOCH_TIME), EpochModel)  # a per-step Model or StepComposition
    assert analysis.model(EPOCH_TIME).predict(40.0) == pytest.approx(truth_step(40.0, "train"), rel=0.03)


def test_epoch_model_round_trips_through_dict(fitted):
    analysis, _, _ = fitted
    model = analysis.model(EPOCH_TIME)
    copy = model_from_dict(model.to_dict())
    X = np.array([2.0, 7.0, 64.0])
    np.testing.assert_allclose(copy.predict(X), model.predict(X))
    np.testing.assert_allclose(copy.interval(X)[1], model.interval(X)[1])
    assert copy.formula() == model.formula() and "n_t" in model.formula()


def test_measured_points_of_held_out_configurations(synthetic):
    make, _, dataset = synthetic
    experiment = make([2, 4, 6, 8, 10, 20], dataset)
    keep = pd.DataFrame({"ranks": [20.0]})
    app, regions = measured_points(subset_experiment(experiment, keep), dataset)
    assert set(app["ranks"]) == {20} and set(regions["ranks"]) == {20}
    assert EPOCH_TIME in set(app["quantity"])


def test_far_extrapolation_is_flagged(fitted):
    from extradeep.analysis.core import extrapolation_notes

    analysis, _, _ = fitted
    assert extrapolation_notes(analysis, pd.DataFrame({"ranks": [12.0, 20.0]})) == []
    notes = extrapolation_notes(analysis, pd.DataFrame({"ranks": [20.0, 40.0]}))
    assert len(notes) == 1 and "ranks = 40 " in notes[0] and "(10)" in notes[0]
