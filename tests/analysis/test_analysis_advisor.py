"""The measurement advisor against simulated experiments: budgets, node boundaries, interval shrink."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import extradeep as xd
from extradeep.analysis.advisor import MeasurementAdvisor
from extradeep.analysis.advisor_fit import candidate_ranks
from extradeep.analysis.core import measured_values
from extradeep.analysis.cost import CostSettings
from extradeep.analysis.hypothetical import (
    PointData,
    check_consistent,
    interval_width,
    updated_model,
)
from extradeep.errors import InputError
from extradeep.simulate import simulate


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    out = tmp_path_factory.mktemp("advisor_sim")
    simulate(out, params={"ranks": [2, 4, 6, 8, 10]}, repetitions=2, truth_replicates=0, seed=5)
    return xd.load_experiment(out, params=["ranks"], progress=False, use_cache=False, replay=False, jobs=1)


@pytest.fixture(scope="module")
def fitted(experiment):
    return MeasurementAdvisor(40, 16, gpus_per_node=8).fit(experiment)


def test_from_nothing_respects_budget_allocation_and_node_boundary():
    advisor = MeasurementAdvisor(128, 32, gpus_per_node=8, budget_gpu_hours=20, run_seconds=300).fit()
    plan = advisor.propose()
    ranks = plan["ranks"].to_numpy()
    assert len(set(ranks)) >= 5 and (ranks <= 32).all() and (ranks >= 2).all()
    assert plan["gpu_hours"].sum() <= 20 * advisor.initial_share + 1e-9
    # GPU-hours = repetitions x ranks x the length of a run
    assert np.allclose(plan["gpu_hours"], plan["reps"] * plan["ranks"] * 300 / 3600)
    assert (ranks <= 8).sum() >= 2 and (ranks > 8).sum() >= 2
    assert (plan["nodes"] == np.ceil(plan["ranks"] / 8)).all()


def test_a_larger_budget_buys_points_closer_to_the_target():
    small = MeasurementAdvisor(128, 64, 8, 10).fit().propose()
    large = MeasurementAdvisor(128, 64, 8, 60).fit().propose()
    assert large["ranks"].max() > small["ranks"].max()


def test_propose_uses_the_settings_of_the_fit_until_the_next_fit():
    """sklearn style: a setting changed after fit takes effect at the next fit, not half-way."""
    with pytest.raises(RuntimeError, match="fit"):
        MeasurementAdvisor(128, 64, 8, 10).propose()
    advisor = MeasurementAdvisor(128, 64, 8, 10).fit()
    small = advisor.propose()
    advisor.budget_gpu_hours = 60
    pd.testing.assert_frame_equal(advisor.propose(), small)
    assert advisor.fit().propose()["ranks"].max() > small["ranks"].max()


def test_a_budget_too_small_is_one_line_naming_what_it_needs():
    with pytest.raises(InputError) as err:
        MeasurementAdvisor(128, 32, 8, 0.01).fit().propose()
    assert "--budget" in str(err.value) and "GPU-hours" in str(err.value) and "\n" not in str(err.value)


def test_user_cost_model_prices_the_runs():
    cost = CostSettings(price_per_gpu_hour=2.5)
    plan = MeasurementAdvisor(64, 16, 4, 40, cost=cost).fit().propose()
    assert np.allclose(plan["cost"], 2.5 * plan["gpu_hours"])


def test_hypothetical_update_starts_from_the_models_own_covariance(fitted):
    m = fitted.measurements_
    data = PointData.from_values(m["ranks"], m["value"])
    assert check_consistent(fitted.model_, data)
    # a measurement at the target itself removes most of the extrapolation uncertainty
    before = interval_width(fitted.model_, np.array([40.0]), 0.95)[0]
    after = interval_width(updated_model(fitted.model_, data, 40.0, 2)[0], np.array([40.0]), 0.95)[0]
    assert after < 0.6 * before


def test_experiment_proposals_cross_the_node_boundary_first_and_never_reuse_a_repetition(fitted, experiment):
    plan = fitted.propose(4)
    assert len(plan) == 4 and (plan["ranks"] <= 16).all()
    # measured: 2..10 with a node of 8, so only 10 lies beyond; the first run adds a second one
    assert plan["ranks"].iloc[0] > 8 and "node boundary" in plan["reason"].iloc[0]
    measured = measured_values(experiment)
    taken = set(zip(measured["ranks"], measured["rep"]))
    planned = {(r.ranks, r.first_rep + k) for r in plan.itertuples() for k in range(r.reps)}
    assert not planned & taken and len(planned) == plan["reps"].sum()
    shrink = plan["interval_before_pct"] - plan["interval_after_pct"]
    assert (shrink >= 0).all() and np.allclose(
        plan["interval_before_pct"].iloc[1:], plan["interval_after_pct"].iloc[:-1]
    )


def test_the_proposed_run_really_narrows_the_interval(fitted, experiment, tmp_path):
    """Measure the first proposal with the simulator and refit: the interval at the target narrows."""
    first = fitted.propose(1).iloc[0]
    out = tmp_path / "next"
    simulate(out, params={"ranks": [int(first.ranks)]}, repetitions=int(first.reps), truth_replicates=0, seed=6)
    extra = measured_values(
        xd.load_experiment(out, params=["ranks"], progress=False, use_cache=False, replay=False, jobs=1)
    )
    extra = extra[extra["quantity"] == "epoch time"].assign(rep=lambda f: f["rep"] + int(first.first_rep) - 1)
    data = pd.concat([fitted.measurements_, extra[["ranks", "rep", "value"]]], ignore_index=True)
    refit = MeasurementAdvisor(40, 16, gpus_per_node=8).fit(data)
    assert refit.current_["interval_pct"].iloc[0] < fitted.current_["interval_pct"].iloc[0]


def test_budget_limits_the_follow_up(experiment):
    plan = MeasurementAdvisor(40, 16, 8, budget_gpu_hours=1.0).fit(experiment).propose(5)
    assert plan["gpu_hours"].sum() <= 1.0 + 1e-9
    assert "budget is spent" in " ".join(plan.attrs["notes"])


def test_layout_in_the_experiment_gives_the_node_size(experiment):
    """The profiles' layout first (here each rank on its own host: 1 GPU per node), a system file
    where the profiles carry none; a system file that contradicts the profiles is overruled, with a warning."""
    from extradeep.system import System

    layout = experiment.settings["layout"]
    experiment.settings["system"] = System(gpus_per_node=4).to_dict()
    try:
        told = MeasurementAdvisor(40, 16).fit(experiment)
        experiment.settings["layout"] = {**layout, "source": "none", "gpus_per_node": None}
        bare = MeasurementAdvisor(40, 16).fit(experiment)
    finally:
        del experiment.settings["system"]
        experiment.settings["layout"] = layout
    assert layout["source"] == "hostname" and told.gpus_per_node_ == layout["gpus_per_node"] == 1
    assert any("profiles' host names" in n for n in told.notes_)
    assert any(n.startswith("WARNING: the system file says 4 GPUs per node") for n in told.notes_)
    assert bare.gpus_per_node_ == 4 and any("from the experiment's system file" in n for n in bare.notes_)


def test_beyond_one_node_only_whole_nodes_unless_partial_nodes_are_allowed():
    whole = MeasurementAdvisor(64, 16, gpus_per_node=4).fit()
    plan = whole.propose()
    assert whole.candidates_ == [2, 4, 8, 12, 16] == candidate_ranks(16, 4, whole_nodes=True)
    assert all(r <= 4 or r % 4 == 0 for r in plan["ranks"])
    assert any("whole nodes (4 ranks each)" in n for n in plan.attrs["notes"])
    partial = MeasurementAdvisor(64, 16, gpus_per_node=4, partial_nodes=True).fit()
    assert {6, 10, 14} <= set(partial.candidates_) and any("--partial-nodes" in n for n in partial.notes_)


def test_report_section_and_text_show_the_plan_beside_the_model(fitted):
    from extradeep.report.plan import plan_section, plan_text

    plan = fitted.propose(2)
    page = plan_section(plan)
    # the model beside the plan is the primary time model, the one every command answers with
    assert "What to profile next" in page and fitted.primary_.model.formula() in page
    for ranks in plan["ranks"]:
        assert f'<td class="num">{ranks}</td>' in page
    text = plan_text(plan, fitted.current_)
    assert "step time at 40 ranks" in text and "proposed runs" in text
    assert plan_section(None) == ""


def test_cheap_repetitions_below_the_threshold_give_way_to_a_new_configuration(experiment):
    """The old rule (min_shrink=0) follows the crossing to 16 with a 2-rank repetition of <1% shrink;
    the default asks for the untested 12 beyond the node boundary instead (docs/analysis.md)."""
    # half nodes allowed, so that 12 (one and a half 8-GPU nodes) is a candidate
    old = MeasurementAdvisor(40, 16, gpus_per_node=8, min_shrink=0, partial_nodes=True).fit(experiment).propose(2)
    new = MeasurementAdvisor(40, 16, gpus_per_node=8, partial_nodes=True).fit(experiment).propose(6)
    assert old["action"].iloc[1] == "repetition" and old["shrink_pct"].iloc[1] < 2
    assert new["ranks"].iloc[1] == 12 and new["action"].iloc[1] == "new configuration"
    assert "new configuration tests the model" in new["reason"].iloc[1] and "node boundary" in new["reason"].iloc[1]
    # a repetition of less than 2% only once every candidate is measured
    for i, row in enumerate(new.itertuples()):
        measured = {2, 4, 6, 8, 10} | set(new["ranks"][:i])  # the fixture's configurations, then the plan's
        if row.action == "repetition" and row.shrink_pct < 2:
            assert set(candidate_ranks(16, 8)) <= measured
