"""Bottlenecks tab: regions ranked by growth class, then by predicted share at the target point
(`extradeep.analysis.bottlenecks.bottleneck_table`), as a table and a bar chart of the top ones.
"""

from __future__ import annotations

import pandas as pd
from PySide6.QtWidgets import QTableWidget, QTableWidgetItem

from extradeep.columns import CATEGORY, PREDICTED, RANK, REGION
from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import MARGINS, PlotTab, one_axes

TOP_BARS = 15
LABEL_ROOM_IN = 1.3  # title, x label and ticks below the bars, in inches
MAX_LEFT = 0.6  # labels never take more than this share of the width
TABLE_ROWS = 200
COLUMNS = [
    RANK,
    REGION,
    CATEGORY,
    "growth",
    "formula",
    PREDICTED,
    "share_of_category",
    "share_of_total",
    "smape",
]


def target_point(view: View) -> dict:
    """The point the ranking is for: the end of the x range, other parameters at their fixed values."""
    return {p: (view.x_range()[1] if p == view.x_param else view.fixed[p]) for p in view.ws.params}


class BottleneckTab(PlotTab):
    """Ranked table plus bars of each top region's predicted share of all GPU work at the target."""

    title = "Bottlenecks"
    margins = {**MARGINS, "bottom": 0.14}
    log_scales = False

    def __init__(self, parent=None):
        super().__init__(parent)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.layout().addWidget(self.table, 1)
        self.ranking = pd.DataFrame(columns=COLUMNS)
        self._bars = 0
        self.canvas.mpl_connect("resize_event", lambda event: self._fit_to_labels() if self.axes else None)

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
            model=[ws.models[r] for r in rows]
        )
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
        from extradeep.report.plots import BAR_INCHES, bottleneck_panel

        (ax,) = self.kept_axes("one", one_axes)
        where = ", ".join(f"{k} = {v:g}" for k, v in target.items())
        self._bars = bottleneck_panel(ax, self.ranking, view.ws.per, TOP_BARS, value="share_of_total", where=where)
        self.canvas.setMinimumHeight(
            int((BAR_INCHES * self._bars + LABEL_ROOM_IN) * self.figure.dpi / self.canvas.device_pixel_ratio)
        )
        self._fit_to_labels()

    def _fit_to_labels(self) -> None:
        """Room for every bar and its whole label: the canvas is at least as tall as the bars need,
        and the left margin as wide as the longest label (measured, not guessed)."""
        ax = self.axes[0]
        renderer = self.canvas.get_renderer()
        widest = max((t.get_window_extent(renderer).width for t in ax.get_yticklabels()), default=0.0)
        width = self.figure.bbox.width
        left = min(MAX_LEFT, (widest + 12) / width) if width > 0 else MARGINS["left"]
        self.figure.subplots_adjust(left=max(left, MARGINS["left"]))
