"""Terms must explain more than the noise: constant truths stay constant, real growth is found.

Draws with a fixed seed (repetition noise, and noise that all repetitions of a point share, as
ranks and runs add in real profiles), plus the shipped sample_profiles against their truth.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from extradeep.errors import InputError
from extradeep.modeling import PMNFModeler, fit_models

REPO = Path(__file__).resolve().parents[2]
P = np.array([2.0, 4, 6, 8, 10])


def draws(n_regions, reps, shared, rep_noise, growth=0.0, seed=0) -> pd.DataFrame:
    """1 ms per step, times (1 + growth * log2(p) / log2(10)); `shared` noise per point, `rep_noise` per value."""
    rng = np.random.default_rng(seed)
    frames = []
    for r in range(n_regions):
        point = 1e-3 * (1 + growth * np.log2(P) / np.log2(10)) * (1 + shared * rng.standard_normal(len(P)))
        y = np.repeat(point, reps) * (1 + rep_noise * rng.standard_normal(len(P) * reps))
        frames.append(
            pd.DataFrame(
                {
                    "p": np.repeat(P, reps),
                    "rep": np.tile(np.arange(reps), len(P)),
                    "value": y,
                    "region": f"r{r}",
                    "metric": "time",
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def constant_share(df: pd.DataFrame, **options) -> float:
    table = fit_models(df, ["p"], rep="rep", options=options)
    return float(np.mean([len(m.terms) == 0 for m in table["model"]]))


@pytest.mark.parametrize(
    "reps, shared, rep_noise, at_least",
    [
        (2, 0.01, 0.01, 0.90),  # 2 repetitions that miss the per-point scatter (measured 94%; 83% before)
        (1, 0.0, 0.02, 0.92),  # one repetition: noise from leave-one-out residuals (96%; 71% before)
        (5, 0.0, 0.05, 0.97),  # the benchmark's design (99.7%; 96% before)
    ],
)
def test_constant_truth_stays_constant(reps, shared, rep_noise, at_least):
    assert constant_share(draws(300, reps, shared, rep_noise), n_terms=1) >= at_least


@pytest.mark.parametrize(
    "reps, shared, rep_noise, at_least",
    [
        (2, 0.01, 0.01, 0.93),  # measured 96% (100% before, when constants got growth too)
        (1, 0.0, 0.02, 0.70),  # measured 81%: one repetition of 5 points has little evidence
    ],
)
def test_growth_of_20_percent_is_found(reps, shared, rep_noise, at_least):
    assert 1 - constant_share(draws(300, reps, shared, rep_noise, growth=0.2, seed=1)) >= at_least


def test_significance_is_validated():
    with pytest.raises(InputError, match="significance"):
        PMNFModeler(significance=1.5).fit(P, P)
    model = PMNFModeler(significance=0.2).fit(np.repeat(P, 2), np.repeat(3.0 + P, 2)).model_
    assert len(model.terms) == 1


def test_sample_profiles_growth_classes_match_truth():
    """Every kernel whose true per-step time is constant gets a constant model, every growing one a
    growing model (which growth exactly is harder: see docs/performance.md)."""
    from extradeep import load_experiment
    from extradeep.analysis.epoch import step_values

    experiment = load_experiment([REPO / "sample_profiles"], params=["ranks"], progress=False, use_cache=False)
    steps = step_values(experiment, ("time",))
    steps = steps[(steps["phase"] == "train") & (steps["ranks"] <= 10)]  # 12 and 16 are for evaluation
    truth = {}
    for region in json.loads((REPO / "sample_profiles" / "truth.json").read_text())["regions"]:
        model = region["models"].get("train", {}).get("time")
        if model and region["kind"] == "kernel":
            truth[region["region"]] = any(t["exponents"] for t in model["terms"])
    table = fit_models(steps, ["ranks"], by=("region", "kind"), rep="rep")
    table = table[table["kind"] == "kernel"]
    grows = {}
    for row in table.itertuples(index=False):
        match = [name for name in truth if row.region.startswith(name[:40])]
        if match:
            grows[match[0]] = len(row.model.terms) > 0
    assert len(grows) >= 20
    wrong = {name: truth[name] for name in grows if grows[name] != truth[name]}
    assert not wrong, f"growth found where truth differs (True = truly grows): {wrong}"
