"""The Plan tab: the advisor's next runs for the opened experiment, beside the model they improve."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def test_plan_tab_proposes_runs_within_the_allocation_and_saves_a_plan_file(opened, settle, tmp_path):
    from extradeep.capture.plan_file import read_plan

    tab = next(p for p in opened.tab_pages if p.title == "Plan")
    opened.tabs.setCurrentWidget(tab)
    tab.target.setValue(64)
    tab.max_ranks.setValue(16)
    tab.per_node.setValue(4)
    tab.k.setValue(2)
    tab.propose()
    settle(lambda: not opened.runner.busy and tab.plan is not None)
    assert opened.last_error == ""
    plan = tab.plan
    assert len(plan) == 2 and (plan["ranks"] <= 16).all() and tab.table.rowCount() == 2
    assert tab.has_plot and tab.figure.axes  # the model, its band and the proposed runs
    measured = set(zip(tab.advisor.measurements_["ranks"], tab.advisor.measurements_["rep"]))
    from extradeep.capture.plan_file import write_plan

    planned = read_plan(write_plan(tmp_path / "plan.csv", plan)).runs
    assert not {(r.ranks, r.rep) for r in planned} & measured


def test_plan_tab_takes_the_node_size_from_the_layout_and_whole_nodes_by_default(opened, settle):
    from extradeep.io.placement import resolve_layout

    tab = next(p for p in opened.tab_pages if p.title == "Plan")
    opened.tabs.setCurrentWidget(tab)
    settings = opened.ws.experiment.settings
    layout = resolve_layout(settings.get("layout"), settings.get("system"))
    tab._layout_of = None  # as when this experiment was opened (another test may have set GPUs/node)
    tab._node_size_from(opened.ws.experiment)
    assert tab.per_node.value() == layout["gpus_per_node"] and "from the" in tab.per_node.toolTip()
    tab.target.setValue(64)
    tab.max_ranks.setValue(16)
    tab.per_node.setValue(4)
    for partial in (False, True):
        tab.partial_nodes.setChecked(partial)
        tab.plan = None
        tab.propose()
        settle(lambda: not opened.runner.busy and tab.plan is not None)
        assert tab.advisor.partial_nodes is partial
        assert ({6, 10, 14} <= set(tab.advisor.candidates_)) is partial
