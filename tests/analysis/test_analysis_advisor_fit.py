"""The advisor's settings and what `fit` reads (`analysis.advisor_fit`): the candidate rank counts
within and beyond a node, a bad setting is one line naming its option, and the advisor's settings
and fitted attributes are those of the data it keeps (`AdvisorSettings`, `AdvisorFit`)."""

from __future__ import annotations

import inspect

import pytest

from extradeep.analysis.advisor import MeasurementAdvisor
from extradeep.analysis.advisor_fit import AdvisorFit, AdvisorSettings, candidate_ranks, fit_advisor
from extradeep.errors import InputError


def test_candidates_use_whole_half_nodes_beyond_one_node():
    assert candidate_ranks(32, 8) == [2, 4, 6, 8, 12, 16, 20, 24, 28, 32]
    assert candidate_ranks(10) == [2, 4, 6, 8, 10]


@pytest.mark.parametrize(
    "kwargs, option",
    [
        ({"target": 1.5}, "--target"),
        ({"max_ranks": 0}, "--max-ranks"),
        ({"budget_gpu_hours": -1}, "--budget"),
        ({"level": 2}, "--level"),
    ],
)
def test_bad_settings_are_one_line_errors(kwargs, option):
    settings = {"target": 64, "max_ranks": 16, "gpus_per_node": 4, **kwargs}
    with pytest.raises(InputError) as err:
        MeasurementAdvisor(**settings).fit()
    assert option in str(err.value)


def test_the_advisor_takes_the_settings_names_order_and_defaults():
    """MeasurementAdvisor's constructor is AdvisorSettings' (callers pass either the same way)."""

    def described(obj):
        return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]

    assert described(MeasurementAdvisor) == described(AdvisorSettings)
    advisor = MeasurementAdvisor([128, 64], 16, 4, 12, reps=3, partial_nodes=True)
    assert advisor.reps == 3 and advisor.partial_nodes is True  # kept as attributes, sklearn style
    assert advisor.settings() == AdvisorSettings([128, 64], 16, 4, 12, reps=3, partial_nodes=True)


def test_the_fitted_attributes_are_the_fit_data():
    """fit keeps fit_advisor's AdvisorFit as `fitted_`; `candidates_` etc. read (and write) its fields."""
    settings = AdvisorSettings([128, 64], 16, gpus_per_node=4)
    fit = fit_advisor(settings)
    advisor = MeasurementAdvisor([128, 64], 16, gpus_per_node=4).fit()
    assert isinstance(advisor.fitted_, AdvisorFit) and advisor.fitted_.settings == settings
    # whole 4-GPU nodes beyond one node, the targets sorted, nothing measured yet
    assert fit.candidates == advisor.candidates_ == [2, 4, 8, 12, 16]
    assert fit.targets.tolist() == advisor.targets_.tolist() == [64.0, 128.0]
    assert fit.notes == advisor.notes_ and "whole nodes (4 ranks each)" in fit.notes[0]
    assert fit.measurements is advisor.measurements_ is None and advisor.model_ is None
    assert fit.crosses_boundary() and fit.ranks_per_node == advisor.ranks_per_node_ == 4
    advisor.fixed_ = {"b": 64.0}
    assert advisor.fitted_.fixed == {"b": 64.0}
