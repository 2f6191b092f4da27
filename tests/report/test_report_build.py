"""build_report, the library's report workflow: it agrees with the budget search and predicts only
within the allocation the user allows."""

import pytest

from extradeep import BudgetLimits, CostSettings, build_report, plan_budget
from extradeep.errors import InputError
from extradeep.report import plots

LIMITS = BudgetLimits(max_time=2 * 3600, max_cost=40, epochs=90)
COST = CostSettings(price_per_gpu_hour=2.5, currency="EUR")


def test_the_report_picks_what_the_budget_picks(small_analysis, tmp_path):
    for max_ranks in (None, 32.0):
        budget = plan_budget(small_analysis, LIMITS, cost=COST, max_ranks=max_ranks)
        report = build_report(small_analysis, tmp_path / "r.html", cost=COST, limits=LIMITS, max_ranks=max_ranks)
        assert report["budget"].best.to_dict("records") == budget.best.to_dict("records")
        assert report["path"].read_text(encoding="utf-8") == report["html"]


def test_predictions_stay_within_the_allowed_allocation(small_analysis, tmp_path):
    report = build_report(small_analysis, None, cost=COST, limits=LIMITS, max_ranks=32)
    ranks = sorted(set(report["predictions"]["ranks"]))
    assert max(ranks) == 32 and min(ranks) > small_analysis.points["ranks"].max()
    unlimited = build_report(small_analysis, None, cost=COST)
    largest = small_analysis.points["ranks"].max()
    assert sorted(set(unlimited["predictions"]["ranks"])) == [2 * largest, 4 * largest, 8 * largest]


def test_the_cost_unit_is_what_the_user_gave(small_analysis):
    text = build_report(small_analysis, None, cost=COST, limits=LIMITS)["html"]
    assert "(EUR)" in text and "(money)" not in text
    assert "Time and cost per epoch: budgeting report" in text


def test_an_unwritable_output_is_one_line(small_analysis, tmp_path):
    with pytest.raises(InputError, match="cannot write the report"):
        build_report(small_analysis, tmp_path / "missing" / "r.html", cost=COST)
    assert list(tmp_path.iterdir()) == []


def test_every_figure_of_the_report_has_readable_tick_labels(small_analysis, monkeypatch, overlapping_tick_labels):
    """Every figure the report embeds, drawn: no two tick labels of an axis run into each other."""
    drawn = []
    embed = plots.figure_bytes

    def recording(fig, *args, **kwargs):
        drawn.append(fig)
        return embed(fig, *args, **kwargs)

    monkeypatch.setattr(plots, "figure_bytes", recording)
    build_report(small_analysis, None, cost=COST, limits=LIMITS, max_ranks=64)
    assert len(drawn) >= 4  # time and cost, speedup and efficiency, trade-off, breakdown, bottlenecks
    for fig in drawn:
        assert overlapping_tick_labels(fig) is None, [ax.get_title() for ax in fig.axes]
