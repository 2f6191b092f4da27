"""Bottlenecks tab: regions ranked by growth class, then by predicted share at the target point
(`extradeep.analysis.bottlenecks.bottleneck_table`), as a table and a bar chart of the top ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch
from PySide6.QtWidgets import QTableWidget, QTableWidgetItem

from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import MARGINS, PlotTab
from extradeep.gui.tabs.model_tab import short

TOP_BARS = 15
TABLE_ROWS = 200
COLUMNS = ["rank", "region", "category", "growth", "formula", "predicted", "share_of_category",
           "share_of_total", "smape"]


def target_point(view: View) -> dict:
    """The point the ranking is for: the end of the x range, other parameters at their fixed values."""
    return {p: (view.x_range()[1] if p == view.x_param else view.fixed[p]) for p in view.ws.params}


class BottleneckTab(PlotTab):
    """Ranked table plus bars of each top region's predicted share of all GPU work at the target."""

    title = "Bottlenecks"
    margins = {**MARGINS, "left": 0.42, "bottom": 0.14}

    def __init__(self, parent=None):
        super().__init__(parent)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.layout().addWidget(self.table, 1)
        self.ranking = pd.DataFrame(columns=COLUMNS)

    def refresh(self, view: View) -> None:
        from extradeep.analysis.bottlenecks import bottleneck_table

        ws = view.ws
        if ws is None:
            return
        rows = [r for r, m in ws.models.items() if m is not None]
        if not rows:
            self.show_message("No region models yet: wait for modeling to finish.")
            return
        region_models = ws.regions.loc[rows, ["region", "kind", "category", "metric"]].assign(
            model=[ws.models[r] for r in rows])
        target = target_point(view)
        self.ranking = bottleneck_table(region_models, target, ws.params, metric="time")
        if self.ranking.empty:
            self.show_message("No computation, communication or memory regions have a time model.")
            return
        self._fill_table()
        self._draw(view, target)
        self.show_plot()

    def _fill_table(self) -> None:
        shown = self.ranking.head(TABLE_ROWS)
        self.table.setRowCount(len(shown))
        for i, row in enumerate(shown.itertuples(index=False)):
            for j, col in enumerate(COLUMNS):
                value = getattr(row, col)
                if col.startswith("share"):
                    text = f"{100 * value:.1f}%"
                elif isinstance(value, float):
                    text = f"{value:.4g}"
                else:
                    text = str(value)
                self.table.setItem(i, j, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        for col in (1, 4):  # long kernel names and formulas: the tooltip-free cell shows the start
            self.table.setColumnWidth(col, min(self.table.columnWidth(col), 320))

    def _draw(self, view: View, target: dict) -> None:
        top = self.ranking.head(TOP_BARS).iloc[::-1]
        self.clear_figure()
        ax = self.figure.add_subplot()
        colors = {c: f"C{i}" for i, c in enumerate(["computation", "communication", "memory"])}
        y = np.arange(len(top))
        ax.barh(y, 100 * top["share_of_total"], color=[colors.get(c, "C7") for c in top["category"]])
        ax.set_yticks(y, [f"{short(r, 32)}  [{g}]" for r, g in zip(top["region"], top["growth"])], fontsize=7)
        ax.set_xlabel("predicted share of GPU time at the target [%]")
        where = ", ".join(f"{k} = {v:g}" for k, v in target.items())
        ax.set_title(f"Top regions by growth, then share at {where}", fontsize=10)
        ax.legend(handles=[Patch(color=c, label=k) for k, c in colors.items()], fontsize=8, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
