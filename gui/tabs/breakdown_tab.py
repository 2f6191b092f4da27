"""Breakdown tab: computation, communication, memory and idle per epoch (or step) stacked along the x
parameter, from the application models (paper Eq. 6-10), with the modeled and measured epoch time.

The categories are GPU activity summed over streams, so work that runs at the same time on several
streams counts once per stream and the stack can exceed the epoch time. That difference is the point
of the plot: it is hatched as overlap, so the stack minus the overlap is the modeled epoch time. Where
the parts fall short of the epoch time instead, the gap is drawn as time no category explains.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.gui.app_models import BREAKDOWN, EPOCH_TIME, candidates, frame_of
from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import MARGINS, PlotTab

COLORS = {"computation": "#4c72b0", "communication": "#dd8452", "memory": "#55a868", "idle": "#c7c7c7"}
OVERLAP = "overlap"  # summed GPU activity above the epoch time: concurrent streams counted once each
UNEXPLAINED = "unexplained"  # epoch time above the summed parts


class BreakdownTab(PlotTab):
    """Stacked category models with the epoch-time model on top."""

    title = "Breakdown"
    margins = {**MARGINS, "right": 0.7, "top": 0.9}  # the legend sits right of the plot, never on the areas

    def __init__(self, parent=None):
        super().__init__(parent)
        self.parts = pd.DataFrame()  # x, the stacked parts, overlap, unexplained and the epoch time drawn

    def refresh(self, view: View) -> None:
        from extradeep.analysis.scaling import predict_table

        app = view.app
        if view.ws is None:
            return
        if app is None or not any(app.model(q) is not None for q in BREAKDOWN):
            self.show_message("The breakdown needs the category models of an experiment (profiles or a saved "
                              "experiment; Extra-P text has none). Wait for modeling to finish.")
            return
        grid = frame_of(view, candidates(view))
        names = [q for q in (*BREAKDOWN, EPOCH_TIME) if app.model(q) is not None]
        models = pd.DataFrame({"quantity": names, "model": [app.model(q) for q in names]})
        table = predict_table(models, grid, view.ws.params, ["quantity"])
        self._draw(view, table, grid[view.x_param].to_numpy(float))
        self.show_plot()

    def _draw(self, view: View, table: pd.DataFrame, x: np.ndarray) -> None:
        app = view.app
        self.clear_figure()
        ax = self.figure.add_subplot()
        parts = [q for q in BREAKDOWN if (table["quantity"] == q).any()]
        stack = [table.loc[table["quantity"] == q, "T"].to_numpy(float).clip(min=0) for q in parts]
        ax.stackplot(x, *stack, labels=[f"{q} (model)" for q in parts], colors=[COLORS[q] for q in parts],
                     alpha=0.85)
        self.parts = pd.DataFrame({view.x_param: x, **dict(zip(parts, stack))})
        epoch = table[table["quantity"] == EPOCH_TIME]
        if not epoch.empty:
            total, whole = np.sum(stack, axis=0), epoch["T"].to_numpy(float)
            self._draw_difference(ax, x, total, whole)
            ax.plot(x, whole, color="k", lw=1.6, label=f"{EPOCH_TIME} (model)")
            pts = app.points.get(EPOCH_TIME)
            mask = view.point_mask(pts)
            ax.plot(pts.X[mask, view.x_index], pts.value[mask], "ko", ms=5, label=f"{EPOCH_TIME} (measured)")
        x_model = view.modeled_x_max()
        if x[-1] > x_model:
            ax.axvline(x_model, color="0.4", ls=":", lw=1)
            ax.text(x_model, ax.get_ylim()[1] * 0.98, " extrapolation →", va="top", fontsize=8, color="0.3")
        ax.set_xlabel(view.x_param)
        ax.set_ylabel(f"seconds per {app.per}")
        ax.set_title(f"Where the time per {app.per} goes. GPU work is summed over streams, so work on concurrent\n"
                     f"streams counts more than once: stack minus hatched overlap = {EPOCH_TIME}",
                     fontsize=9)
        ax.set_xlim(x[0], x[-1])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)

    def _draw_difference(self, ax, x: np.ndarray, total: np.ndarray, whole: np.ndarray) -> None:
        """Hatch the stack above the epoch time (overlap) and mark epoch time above the stack."""
        overlap, unexplained = (total - whole).clip(min=0), (whole - total).clip(min=0)
        self.parts[OVERLAP], self.parts[UNEXPLAINED], self.parts[EPOCH_TIME] = overlap, unexplained, whole
        if (overlap > 0).any():
            ax.fill_between(x, whole, total, where=overlap > 0, facecolor="none", hatch="///", edgecolor="0.15",
                            lw=0, label="overlap (concurrent streams)")
        if (unexplained > 0).any():
            ax.fill_between(x, total, whole, where=unexplained > 0, facecolor="white", hatch="..",
                            edgecolor="0.5", lw=0, label="not in any category")
