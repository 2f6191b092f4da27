"""95% prediction intervals cover about 95% of new measurements (many noisy draws, fixed seed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from extradeep.modeling import fit_models

P = np.array([4.0, 8, 16, 32, 64])
CLASSES = [(0, 0), (0, 1), (1, 0), (0.5, 0), (1, 1), (2, 0)]
NOISE = 0.05


def _truths(n, rng):
    out = []
    for r in range(n):
        i, j = CLASSES[r % len(CLASSES)]
        c0 = rng.uniform(5, 50)
        c1 = 0.0 if (i, j) == (0, 0) else c0 * rng.uniform(0.5, 3) / (64**i * 6**j)
        out.append((c0, c1, i, j))
    return out


def _value(truth, p):
    c0, c1, i, j = truth
    return c0 + c1 * p**i * np.log2(p) ** j


def _fit(truths, reps, rng):
    rows = [
        (f"r{r:04d}", p, k, _value(t, p) * (1 + NOISE * rng.standard_normal()))
        for r, t in enumerate(truths)
        for p in P
        for k in range(reps)
    ]
    df = pd.DataFrame(rows, columns=["region", "p", "rep", "value"])
    return fit_models(df, ["p"], by=["region"], rep="rep")["model"]


@pytest.fixture(scope="module")
def draws():
    rng = np.random.default_rng(20231112)
    truths = _truths(600, rng)
    return truths, {reps: _fit(truths, reps, rng) for reps in (5, 1)}, rng


def _coverage(draws, reps, at):
    truths, models, rng = draws
    hits = 0
    for truth, model in zip(truths, models[reps]):
        new = _value(truth, at) * (1 + NOISE * rng.standard_normal())
        lo, hi = model.interval(at)
        hits += lo <= new <= hi
    return hits, len(truths)


@pytest.mark.parametrize("reps, at", [(5, 16.0), (5, 24.0), (5, 48.0), (1, 16.0), (1, 24.0), (1, 48.0)])
def test_coverage_is_about_95_percent_in_the_modeling_range(draws, reps, at):
    """Not below 95% beyond binomial noise, and not uselessly wide (leave-one-out variance is a
    little conservative)."""
    hits, n = _coverage(draws, reps, at)
    assert binomtest(hits, n, 0.95, alternative="less").pvalue > 0.001, f"coverage {hits / n:.3f} at p={at}"
    assert hits / n <= 0.985, f"coverage {hits / n:.3f} at p={at}: intervals too wide"


@pytest.mark.parametrize("at", [128.0, 256.0])
def test_coverage_when_extrapolating_2x_and_4x(draws, at):
    """Rival hypotheses widen the interval where the exponents are uncertain: >= 90% at 4x
    (without them it is about 67%; see docs/performance.md)."""
    hits, n = _coverage(draws, 5, at)
    assert 0.90 <= hits / n <= 0.985, f"coverage {hits / n:.3f} at p={at}"


def test_interval_level_widens_and_contains_prediction(draws):
    _, models, _ = draws
    model = models[5][7]
    lo90, hi90 = model.interval(np.array([24.0, 256.0]), level=0.90)
    lo99, hi99 = model.interval(np.array([24.0, 256.0]), level=0.99)
    pred = model.predict(np.array([24.0, 256.0]))
    assert np.all(lo99 < lo90) and np.all(lo90 < pred) and np.all(pred < hi90) and np.all(hi90 < hi99)
    # farther from the data, more uncertainty relative to the value
    assert (hi90[1] - lo90[1]) / pred[1] > (hi90[0] - lo90[0]) / pred[0]
