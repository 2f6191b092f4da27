"""Aggregation against a brute-force reference (plain loops and np.median) on random step sums.

The input is the read_export output schema (region, kind, category, metric, epoch, phase, step,
value) plus file bookkeeping, generated with known structure: regions missing from some steps,
ranks and repetitions, so the zero-for-absent rule is exercised.
"""

import numpy as np
import pandas as pd
import pytest

from extradeep.aggregate.medians import aggregate, padded_median

PHASE_STEPS = {"train": 5, "val": 2, "between": 1}


@pytest.fixture(scope="module")
def step_sums():
    rng = np.random.default_rng(7)
    rows, file_id = [], 0
    for ranks in (2, 4, 6, 8, 10, 12):
        for rep in (1, 2, 3):
            for rank in range(ranks):
                file_id += 1
                for phase, n_steps in PHASE_STEPS.items():
                    for step in range(n_steps):
                        for region, category in (
                            ("gemm", "computation"),
                            ("nccl", "communication"),
                            ("rare", "computation"),
                            ("late", "memory"),
                        ):
                            if region == "rare" and (rank != 0 or step != 0):
                                continue
                            if region == "nccl" and rng.random() < 0.3:
                                continue
                            if region == "late" and ranks < 8:  # measured at 3 points only
                                continue
                            value = rng.lognormal(np.log(ranks * 1e-3), 0.2)
                            rows.append(
                                (
                                    file_id,
                                    rank,
                                    rep,
                                    ranks,
                                    region,
                                    "kernel",
                                    category,
                                    "time",
                                    1,
                                    phase,
                                    step if phase != "between" else -1,
                                    value,
                                )
                            )
    cols = ["file", "rank", "rep", "ranks", "region", "kind", "category", "metric", "epoch", "phase", "step", "value"]
    return pd.DataFrame(rows, columns=cols)


def _reference(step_sums):
    """Loop version of the paper's steps (1)-(3), absent steps/ranks/reps counting as 0."""
    per_rank_rows = []
    for (ranks, region, phase), group in step_sums.groupby(["ranks", "region", "phase"]):
        for rep in (1, 2, 3):
            for rank in range(ranks):
                vals = group[(group["rep"] == rep) & (group["rank"] == rank)]["value"].tolist()
                vals += [0.0] * (PHASE_STEPS[phase] - len(vals))
                per_rank_rows.append((ranks, region, phase, rep, rank, np.median(vals)))
    return pd.DataFrame(per_rank_rows, columns=["ranks", "region", "phase", "rep", "rank", "value"])


def test_medians_and_spreads_match_brute_force(step_sums):
    values, points = aggregate(step_sums, ["ranks"], min_points=5)
    ref = _reference(step_sums)
    for (ranks, region, phase), group in ref.groupby(["ranks", "region", "phase"]):
        rep_medians = group.groupby("rep")["value"].median()
        row = points[(points["ranks"] == ranks) & (points["region"] == region) & (points["phase"] == phase)]
        assert len(row) == 1
        row = row.iloc[0]
        assert row["value"] == pytest.approx(np.median(rep_medians))
        assert row["rep_min"] == pytest.approx(rep_medians.min())
        assert row["rep_max"] == pytest.approx(rep_medians.max())
        assert row["rep_q1"] == pytest.approx(np.quantile(rep_medians, 0.25))
        assert row["rank_q3"] == pytest.approx(np.quantile(group["value"], 0.75))
        assert row["rank_min"] == pytest.approx(group["value"].min())
        assert row["n_reps"] == 3
        for rep, rep_group in group.groupby("rep"):
            vrow = values[
                (values["ranks"] == ranks)
                & (values["region"] == region)
                & (values["phase"] == phase)
                & (values["rep"] == rep)
            ].iloc[0]
            assert vrow["value"] == pytest.approx(np.median(rep_group["value"]))
            assert vrow["rank_q1"] == pytest.approx(np.quantile(rep_group["value"], 0.25))
            assert vrow["n_ranks"] == ranks and vrow["n_steps"] == PHASE_STEPS[phase]


def test_rare_region_gets_zero_median_not_inflated(step_sums):
    _, points = aggregate(step_sums, ["ranks"])
    rare = points[points["region"] == "rare"].set_index(["phase", "ranks"])
    # Once in 5 training steps on one rank: every rank's median is 0.
    assert (rare.loc["train", "value"] == 0).all() and (rare.loc["train", "rank_max"] == 0).all()
    # In the single "between" bucket rank 0 has it, the other ranks do not: median 0, spread shows it.
    between = rare.loc["between"]
    assert (between.loc[4:, "value"] == 0).all() and (between["rank_max"] > 0).all()


def test_regions_at_few_points_stay_but_are_not_modelable(step_sums):
    _, points = aggregate(step_sums, ["ranks"], min_points=5)
    late = points[points["region"] == "late"]
    assert sorted(late["ranks"].unique()) == [8, 10, 12]
    assert not late["modelable"].any()
    assert points[points["region"] == "gemm"]["modelable"].all()
    _, points3 = aggregate(step_sums, ["ranks"], min_points=3)
    assert points3[points3["region"] == "late"]["modelable"].all()


@pytest.mark.parametrize("seed", range(5))
def test_padded_median_equals_median_of_zero_padded_groups(seed):
    rng = np.random.default_rng(seed)
    groups = [np.sort(rng.normal(size=rng.integers(1, 7))) for _ in range(40)]
    totals = [len(g) + rng.integers(0, 5) for g in groups]
    got = padded_median(np.concatenate(groups), [len(g) for g in groups], totals)
    want = [np.median(np.concatenate([g, np.zeros(t - len(g))])) for g, t in zip(groups, totals)]
    np.testing.assert_allclose(got, want)
