"""Predicted parts stay within the whole (issue 20, item 3): no part above the time per epoch, "gpu
total" its defined sum, and the shares add up (computation + communication + memory + idle - overlap
= 100%), on sample_profiles/ and on simulated studies up to 16x the largest measured scale.

Before, each part was fitted on its own: on sample_profiles/ communication alone predicted 1.507 s at
128 ranks against an epoch of 1.343 s, and "gpu total" was not the sum of its parts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from extradeep import Dataset, load_experiment
from extradeep.analysis.core import analyse, extrapolation_notes, prediction_table
from extradeep.analysis.epoch import BREAKDOWN, EPOCH_TIME
from extradeep.analysis.parts import GPU_TOTAL, PARTS, Breakdown, PartModel, part_models
from extradeep.columns import OVERLAP
from extradeep.simulate import simulate

DATASET = Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64)
SMALL = {"repetitions": 2, "train_steps": 3, "val_steps": 1, "truth_replicates": 0, "progress": False}
FACTORS = (1, 2, 4, 8, 12, 16)  # multiples of the largest measured ranks


def assert_within_the_whole(analysis, ranks) -> pd.DataFrame:
    """The parts predicted at ``ranks``: each within the whole, gpu total their sum, shares adding up."""
    grid = pd.DataFrame({analysis.ranks_param: np.asarray(ranks, float)})
    for other in analysis.params[1:]:
        grid[other] = analysis.baseline[other]
    table = prediction_table(analysis, grid[analysis.params])
    wide = table.pivot_table(index=analysis.params, columns="quantity", values="T")
    whole = wide[EPOCH_TIME]
    for part in (*PARTS, GPU_TOTAL):
        assert part in wide.columns
    for part in PARTS:
        assert (wide[part] >= 0).all() and (wide[part] <= whole * (1 + 1e-9)).all(), (part, wide[part], whole)
    np.testing.assert_allclose(wide[GPU_TOTAL], wide[list(BREAKDOWN)].sum(axis=1), rtol=1e-12)
    busy = whole - wide["idle"]
    assert (busy >= wide[list(BREAKDOWN)].max(axis=1) * (1 - 1e-9)).all()  # the union covers each part
    overlap = wide[GPU_TOTAL] - busy
    assert (overlap >= -1e-9 * whole).all()
    shares = (wide[list(PARTS)].sum(axis=1) - overlap) / whole
    np.testing.assert_allclose(shares, 1.0, rtol=1e-9)
    return wide


@pytest.fixture(scope="module")
def sample_analysis(sample_saved):
    """The models `extradeep model --save` made of sample_profiles/, read back."""
    from extradeep import Experiment

    return analyse(Experiment.load(sample_saved[0]))


def test_sample_profiles_parts_stay_within_the_epoch_up_to_16x(sample_analysis):
    a = sample_analysis
    largest = float(a.points["ranks"].max())
    wide = assert_within_the_whole(a, [largest * f for f in FACTORS])  # 16 .. 256 ranks
    # the parts' own fits, left alone, did exceed it: communication alone passed the epoch at 128 ranks
    raw = next(m for m in a.application_models["model"] if isinstance(m, PartModel)).breakdown.raw
    assert raw["communication"].predict(np.array([128.0]))[0] > wide.loc[128.0, EPOCH_TIME]
    # and at the measured points the consistent parts still follow the measurements
    fitted = a.application_models.set_index("quantity")
    for part in (*PARTS, GPU_TOTAL):
        assert fitted.loc[part, "smape"] < 5.0, part


@pytest.fixture(scope="module")
def slow_network(tmp_path_factory):
    """A study on a slow network: communication outgrows the computation that hides it early."""
    root = tmp_path_factory.mktemp("parts_slow")
    simulate(root / "runs", params={"ranks": [2, 3, 4, 5, 6]}, seed=3, nccl_bandwidth_scale=0.25, **SMALL)
    return root


@pytest.fixture(scope="module", params=["slow network", "no replay", "per step", "two parameters"])
def simulated(request, slow_network, tmp_path_factory):
    """The slow network with its replayed trace and without it (the proportional overlap rule), and
    without dataset sizes (values per step); ranks x batch (no step composition: the parts' own
    models, kept within the whole)."""
    kind = request.param
    root, params, options = slow_network, ["ranks"], None
    if kind == "two parameters":  # a 3 x 3 grid, modeled from 3 points per parameter
        root, params, options = tmp_path_factory.mktemp("parts"), None, {"min_points": 3}
        grid = {"ranks": [2, 3, 4], "batch": [32, 64, 96]}
        simulate(root / "runs", params=grid, seed=3, **{**SMALL, "repetitions": 1})
    experiment = load_experiment(
        [root / "runs"],
        params=params,
        dataset=DATASET if kind in ("slow network", "no replay") else None,
        cache_dir=root / "cache",
        progress=False,
        replay=kind != "no replay",
    )
    return kind, analyse(experiment, options=options)


def test_simulated_parts_stay_within_the_whole_up_to_16x(simulated):
    kind, a = simulated
    largest = float(a.points["ranks"].max())
    assert_within_the_whole(a, [largest * f for f in FACTORS])
    composed = getattr(getattr(a.model(EPOCH_TIME), "train", a.model(EPOCH_TIME)), "choice", None)
    assert (composed is None) == (kind == "two parameters")


def test_parts_models_disagreeing_with_the_whole_are_scaled_and_warned_about(law):
    """A whole that stays at 1 s while a part's own law grows past it: the parts are scaled to fit
    (each within the whole, the shares adding up) and the excess is reported for a warning."""
    whole = law(lambda p: 1.0 + 0 * p)
    raw = {
        "computation": law(lambda p: 0.5 + 0 * p),
        "communication": law(lambda p: 0.05 * p),  # passes the whole at p = 20
        "memory": law(lambda p: 0.01 + 0 * p),
        "idle": law(lambda p: 0.1 + 0 * p),
    }
    models = part_models(whole, raw, 1)
    p = np.array([4.0, 10.0, 40.0])
    split = models["communication"].breakdown.split(p)
    assert np.allclose(split["communication"][:2], [0.2, 0.5])  # inside: the parts' own values
    assert np.isclose(split["communication"][2] + split["idle"][2], 1.0)  # beyond: scaled to fit
    assert np.isclose(split["idle"][2] / split["communication"][2], 0.1 / 2.0)  # in proportion
    excess = models["communication"].breakdown.excess(p)
    assert excess[0] == 0 and np.isclose(excess[2], 1 - 1.0 / 2.1)
    # time the parts do not explain is idle, by definition: a whole of 1 s over 0.66 s of parts
    short = part_models(whole, {**raw, "communication": law(lambda p: 0.05 + 0 * p)}, 1)
    assert np.isclose(short["idle"].predict(4.0), 1.0 - 0.56) and np.isclose(short[GPU_TOTAL].predict(4.0), 0.56)
    assert short["idle"].breakdown.split(4.0)[OVERLAP][0] == 0


def test_the_warning_names_the_points_where_parts_were_scaled(sample_analysis):
    from dataclasses import replace

    a = sample_analysis
    models = a.application_models.copy()
    breakdown = next(m for m in models["model"] if isinstance(m, PartModel)).breakdown
    # the direct fit of the step as the whole: no composition keeps the parts within it by construction,
    # and the communication's own fit outgrows it beyond the measured range (24% at 64 ranks, 71% at 256)
    whole = replace(breakdown.whole, train=breakdown.whole.train.direct)
    consistent = part_models(whole, breakdown.raw, 1)
    models["model"] = [consistent.get(q, m) for q, m in zip(models["quantity"], models["model"])]
    notes = extrapolation_notes(replace(a, application_models=models), pd.DataFrame({"ranks": [16.0, 256.0]}))
    warning = next(n for n in notes if "would exceed the epoch time" in n)
    assert "ranks=256" in warning and "ranks=16 " not in warning
    assert not any("would exceed" in n for n in extrapolation_notes(a, pd.DataFrame({"ranks": [64.0, 256.0]})))


def test_part_models_round_trip_through_their_dicts(sample_analysis):
    from extradeep.analysis.epoch import model_from_dict

    x = np.array([16.0, 64.0, 256.0])
    for quantity in (*PARTS, GPU_TOTAL):
        model = sample_analysis.model(quantity)
        again = model_from_dict(model.to_dict())
        assert isinstance(again, PartModel) and isinstance(again.breakdown, Breakdown)
        np.testing.assert_allclose(again.predict(x), model.predict(x), rtol=1e-12)
        np.testing.assert_allclose(again.interval(x), model.interval(x), rtol=1e-12)
        assert again.formula() == model.formula()
