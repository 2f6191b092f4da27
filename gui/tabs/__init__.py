"""The right-hand tabs; `make_tabs` builds them in display order."""

from __future__ import annotations


def make_tabs(window) -> list:
    from gui.tabs.bottleneck_tab import BottleneckTab
    from gui.tabs.breakdown_tab import BreakdownTab
    from gui.tabs.cost_tab import CostTab
    from gui.tabs.model_tab import ModelTab
    from gui.tabs.predictor_tab import PredictorTab
    from gui.tabs.scaling_tab import ScalingTab

    return [ModelTab(), ScalingTab("speedup"), ScalingTab("efficiency"), CostTab(), BreakdownTab(),
            BottleneckTab(), PredictorTab(window)]
