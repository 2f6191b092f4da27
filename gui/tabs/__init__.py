"""The right-hand tabs; `make_tabs` builds them in display order."""

from __future__ import annotations


def make_tabs(window) -> list:
    from extradeep.gui.tabs.bottleneck_tab import BottleneckTab
    from extradeep.gui.tabs.breakdown_tab import BreakdownTab
    from extradeep.gui.tabs.cost_tab import CostTab
    from extradeep.gui.tabs.model_tab import ModelTab
    from extradeep.gui.tabs.predictor_tab import PredictorTab
    from extradeep.gui.tabs.scaling_tab import ScalingTab

    return [
        ModelTab(),
        ScalingTab("speedup"),
        ScalingTab("efficiency"),
        CostTab(),
        BreakdownTab(),
        BottleneckTab(),
        PredictorTab(window),
        _plan_panel(window),
        _layouts_tab(window),
    ]


def _plan_panel(window):
    from extradeep.gui.plan_panel import PlanPanel

    return PlanPanel(window)


def _layouts_tab(window):
    from extradeep.gui.tabs.layouts_tab import LayoutsTab

    return LayoutsTab(window)
