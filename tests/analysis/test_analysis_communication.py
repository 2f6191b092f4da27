"""Communication of the step composition as per-collective pure durations plus the wait for the
slowest rank (extradeep.analysis.communication), on synthetic data with known truth: an all-reduce
growing like p log2 p, an all-gather like p, and waits from compute jitter that do not grow."""

import numpy as np
import pandas as pd
import pytest

from extradeep.analysis.communication import CommunicationSum, pure_times
from extradeep.analysis.epoch import model_from_dict
from extradeep.analysis.overlap import _choose, fit_step_composition

MODELING = [2, 4, 6, 8, 10]
B, SHARE, WAIT = 0.037, 0.43, 9e-4


def pure(p):
    return {"allreduce": 3e-4 + 2e-4 * p * np.log2(p), "allgather": 1e-5 + 1e-4 * p}


def measured(seed=0, noise=0.01):
    """(step parts, per-rank spreads as Experiment.values keeps them): each rank's collective time
    is its pure duration plus a wait in [0, 2 WAIT]; the last rank to arrive waits for nobody."""
    rng = np.random.default_rng(seed)
    parts, values = [], []
    for p in MODELING:
        for rep in (1, 2):
            comm = 0.0
            for region, time in pure(p).items():
                ranks = time * rng.lognormal(0, noise) + rng.uniform(0, 2 * WAIT, p) * (np.arange(p) > 0)
                comm += float(np.median(ranks))
                values.append(
                    {
                        "region": region,
                        "kind": "kernel",
                        "category": "communication",
                        "metric": "time",
                        "phase": "train",
                        "ranks": float(p),
                        "rep": rep,
                        "value": float(np.median(ranks)),
                        "rank_min": float(ranks.min()),
                    }
                )
            b = B * rng.lognormal(0, noise)
            o = SHARE * comm
            parts.append({"ranks": float(p), "rep": rep, "S": b + comm - o, "B": b, "C": comm, "O": o})
    return pd.DataFrame(parts), pd.DataFrame(values)


@pytest.fixture(scope="module")
def fitted():
    parts, values = measured()
    return (
        fit_step_composition(parts, ["ranks"], pure=pure_times(values, ["ranks"])),
        fit_step_composition(parts, ["ranks"]),
    )


def test_pure_times_take_the_lowest_rank_and_repetition():
    _, values = measured()
    table = pure_times(values, ["ranks"])
    assert len(table) == 2 * len(MODELING) and set(table["rep"]) == {1}
    row = table[(table.region == "allreduce") & (table.ranks == 8.0)]["pure"].iloc[0]
    rows = values[(values.region == "allreduce") & (values.ranks == 8.0)]
    assert row == rows["rank_min"].min() < rows["value"].min()
    assert pure_times(values.drop(columns="rank_min"), ["ranks"]).empty


def test_per_collective_sum_extrapolates_closer_than_the_category_sum(fitted):
    with_pure, category = fitted
    assert isinstance(with_pure.comm, CommunicationSum)
    assert set(with_pure.comm.kernels) == {"allreduce", "allgather"}
    # the median rank waits about WAIT in each of the two collectives
    assert with_pure.comm.wait == pytest.approx(2 * WAIT, rel=0.3)
    truth = sum(pure(40.0).values()) + 2 * WAIT
    assert with_pure.comm.predict(40.0) == pytest.approx(truth, rel=0.05)
    # the waits blur the growth of the category sum, so one PMNF of it extrapolates worse
    assert abs(category.comm.predict(40.0) - truth) > abs(with_pure.comm.predict(40.0) - truth)
    lo, hi = with_pure.comm.interval(40.0)
    assert lo <= with_pure.comm.predict(40.0) <= hi


def test_composition_with_pure_collectives_round_trips(fitted):
    model = fitted[0]
    copy = model_from_dict(model.to_dict())
    X = np.array([2.0, 12.0, 40.0])
    np.testing.assert_allclose(copy.predict(X), model.predict(X))
    np.testing.assert_allclose(copy.interval(X)[1], model.interval(X)[1])
    assert isinstance(copy.comm, CommunicationSum) and copy.formula() == model.formula()


def test_a_collective_missing_at_a_point_falls_back_to_the_category_sum():
    parts, values = measured()
    values = values[~((values.region == "allgather") & (values.ranks == 6.0))]
    model = fit_step_composition(parts, ["ranks"], pure=pure_times(values, ["ranks"]))
    assert not isinstance(model.comm, CommunicationSum)


def test_the_rule_changes_only_on_evidence_beyond_the_noise():
    assert _choose({"direct": 0.54, "proportional": 0.58, "saturated": 0.58}, noise=0.3) == "proportional"
    assert _choose({"direct": 0.54, "proportional": 0.58, "saturated": 0.58}, noise=0.0) == "direct"
    assert _choose({"direct": 2.6, "proportional": 1.38, "saturated": 0.93}, noise=0.25) == "saturated"
    assert _choose({"direct": 0.2, "proportional": 1.38, "saturated": 0.93}, noise=0.25) == "direct"
    assert _choose({}, noise=0.0) == "direct"
