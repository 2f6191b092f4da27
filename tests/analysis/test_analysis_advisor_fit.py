"""The advisor's settings and what `fit` reads (`analysis.advisor_fit`): the candidate rank counts
within and beyond a node, and a bad setting is one line naming its option."""

from __future__ import annotations

import pytest

from extradeep.analysis.advisor import MeasurementAdvisor
from extradeep.analysis.advisor_fit import candidate_ranks
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
