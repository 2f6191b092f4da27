"""Warnings for unreliable models and Eq. 12 models that agree with the prediction table."""

from dataclasses import replace

import numpy as np
import pandas as pd

from extradeep.analysis.core import (
    Analysis,
    analyse,
    derived_models,
    extrapolation_notes,
    prediction_table,
    reliability_notes,
)
from extradeep.analysis.epoch import EPOCH_TIME


def _models(**smapes):
    return pd.DataFrame([{"quantity": q, "model": object(), "smape": s} for q, s in smapes.items()])


def test_poor_fits_are_flagged_primary_first():
    notes = reliability_notes(_models(**{EPOCH_TIME: 31.5, "computation": 34.7, "memory": 2.0}), "epoch")
    assert len(notes) == 2
    assert notes[0].startswith("WARNING: the epoch time model") and "31.5%" in notes[0]
    assert "computation (34.7%)" in notes[1] and "memory" not in notes[1]
    assert reliability_notes(_models(**{EPOCH_TIME: 3.0}), "epoch") == []


def test_wide_intervals_are_flagged(synthetic, law):
    make, _, dataset = synthetic
    analysis = analyse(make([2, 4, 6, 8, 10], dataset))
    grid = pd.DataFrame({"ranks": [12.0, 16.0]})
    assert not any("interval" in n for n in extrapolation_notes(analysis, grid))
    models = analysis.application_models.copy()
    rows = models["quantity"] == EPOCH_TIME
    models.loc[rows, "model"] = [law(lambda p: 10.0 / p, width=0.4)]
    wide = replace(analysis, application_models=models)
    notes = [n for n in extrapolation_notes(wide, grid) if "interval" in n]
    assert len(notes) == 1 and "ranks=12 (+-40%)" in notes[0] and "ranks=16 (+-40%)" in notes[0]


def test_eq12_models_agree_with_the_table_when_a_second_parameter_varies(law):
    """Perfect weak scaling in ranks; a larger batch halves the epoch (fewer steps). Efficiency vs
    the baseline (ranks=2, batch=32) is 1 at batch 32; a fit across both batches would mix in the
    batch ratio 2 and say ~1.2-1.5."""
    points = pd.DataFrame(
        [(p, b) for p in (2.0, 4.0, 6.0, 8.0, 10.0) for b in (32.0, 64.0)], columns=["ranks", "batch"]
    )
    model = law(lambda X: 100.0 * 32.0 / np.atleast_2d(X)[:, 1])
    app_points = points.assign(quantity=EPOCH_TIME, value=100.0, rep_min=100.0, rep_max=100.0, n_reps=1)
    empty = pd.DataFrame()
    analysis = Analysis(
        ["ranks", "batch"],
        "ranks",
        "step",
        "weak",
        {"ranks": 2.0, "batch": 32.0},
        empty,
        app_points,
        pd.DataFrame(
            [{"quantity": EPOCH_TIME, "model": model, "formula": "", "growth": "", "smape": 0.0, "reason": ""}]
        ),
        empty,
        empty,
        empty,
        options={"min_points": 3},
    )
    derived = derived_models(analysis).set_index("derived")
    assert derived.loc["efficiency", "at"] == "batch=32"
    grid = pd.DataFrame({"ranks": [16.0, 32.0], "batch": [32.0, 32.0]})
    table = prediction_table(analysis, grid)
    for name in ("efficiency", "speedup"):
        fitted = derived.loc[name, "model"].predict(grid["ranks"].to_numpy())
        np.testing.assert_allclose(fitted, table[name].to_numpy(), rtol=1e-6)
