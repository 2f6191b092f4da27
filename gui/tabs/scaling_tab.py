"""Speedup and Efficiency tabs: values derived by evaluating the runtime models (extradeep.analysis.scaling)
for the application and the selected regions, against the smallest point as baseline, strong or weak.
"""

from __future__ import annotations

import pandas as pd
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel

from extradeep.columns import REGION
from extradeep.gui.app_models import candidates, frame_of, node_layout
from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import PlotTab, one_axes
from extradeep.gui.tabs.model_tab import MAX_OVERLAY, short

TITLES = {"speedup": "Speedup", "efficiency": "Efficiency"}


def ranks_param(params: list[str]) -> str:
    from extradeep.analysis.core import ranks_parameter

    return ranks_parameter(params)


def scaling_frame(view: View, mode: str) -> pd.DataFrame:
    """scaling_table over the x grid for the application step series and the selected regions."""
    from extradeep.analysis.core import samples_per_epoch_function
    from extradeep.analysis.scaling import scaling_table

    ws = view.ws
    rows = [r for r in view.rows[:MAX_OVERLAY] if ws.models.get(r) is not None]
    names, models = [], []
    quantity = view.app.time_quantity if view.app is not None else None
    if quantity is not None:
        names.append(f"application: {view.app.time_label}")
        models.append(view.app.model(quantity))
    for r in rows:
        names.append(short(ws.regions.at[r, REGION]))
        models.append(ws.models[r])
    table = pd.DataFrame({"series": names, "model": models})
    grid = frame_of(view, candidates(view))
    baseline = {p: float(ws.param_grid[p].min()) if p == view.x_param else view.fixed[p] for p in ws.params}
    samples = samples_per_epoch_function(ws.dataset, ws.per, mode, ws.fixed)
    return scaling_table(table, grid, ws.params, ["series"], baseline, mode, ranks_param(ws.params), samples=samples)


class ScalingTab(PlotTab):
    """Speedup or efficiency vs the x parameter, with the ideal line."""

    def __init__(self, quantity: str, parent=None):
        super().__init__(parent)
        self.quantity = quantity
        self.title = TITLES[quantity]
        self.mode = QComboBox()
        self.mode.addItems(["strong", "weak"])
        self.mode.setToolTip(
            "strong: fixed total work (S = T1/Tk, E = S*r1/rk); weak: work grows with ranks (E = T1/Tk)"
        )
        row = QHBoxLayout()
        row.addWidget(QLabel("Scaling"))
        row.addWidget(self.mode)
        row.addStretch(1)
        self.controls_box.addLayout(row)
        self.view: View | None = None
        self.mode.currentTextChanged.connect(lambda *_: self.refresh(self.view) if self.view else None)

    def refresh(self, view: View) -> None:
        self.view = view
        if view.ws is None:
            return
        if view.metric != "time":
            self.show_message(f"{self.title} compares runtimes: choose the time metric.")
            return
        table = scaling_frame(view, self.mode.currentText())
        if table.empty:
            self.show_message(
                f"No runtime models yet to derive {self.quantity} from "
                "(select regions with a model, or wait for modeling to finish)."
            )
            return
        self._draw(view, table)
        self.show_plot()

    def _draw(self, view: View, table: pd.DataFrame) -> None:
        from extradeep.report.plots import scaling_panels

        (ax,) = self.kept_axes("one", one_axes)
        axes = (ax, None) if self.quantity == "speedup" else (None, ax)
        application = table["series"].iloc[0] if view.app is not None and view.app.time_quantity else None
        scaling_panels(
            *axes,
            table,
            view.x_param,
            view.modeled_x_max(),
            by="series",
            highlight=application,
            ideal_speedup=view.x_param == ranks_param(view.ws.params),
            x_end=view.x_range()[1],
            layout=node_layout(view),
        )
        self.apply_scales()
