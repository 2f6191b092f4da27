"""Breakdown tab: computation, communication, memory and idle per epoch (or step) stacked along the x
parameter, from the application models (paper Eq. 6-10), with the modeled and measured epoch time.

Drawn by the report's `breakdown_panel` as continuous areas along the models: the categories are GPU
activity summed over streams, so work that runs at the same time on several streams counts once per
stream and the stack can exceed the epoch time. That difference is the point of the plot: it is
hatched as overlap, so the stack minus the overlap is the modeled epoch time. Where the parts fall
short of the epoch time instead, the gap is drawn as time no category explains.
"""

from __future__ import annotations

import pandas as pd

from extradeep.columns import VALUE
from extradeep.gui.app_models import BREAKDOWN, EPOCH_TIME, candidates, frame_of
from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import MARGINS, PlotTab, one_axes


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
            self.show_message(
                "The breakdown needs the category models of an experiment (profiles or a saved "
                "experiment; Extra-P text has none). Wait for modeling to finish."
            )
            return
        grid = frame_of(view, candidates(view))
        names = [q for q in (*BREAKDOWN, EPOCH_TIME) if app.model(q) is not None]
        models = pd.DataFrame({"quantity": names, "model": [app.model(q) for q in names]})
        self._draw(view, predict_table(models, grid, view.ws.params, ["quantity"]))
        self.show_plot()

    def _draw(self, view: View, table: pd.DataFrame) -> None:
        from extradeep.report.breakdown_plot import breakdown_panel

        (ax,) = self.kept_axes("one", one_axes)
        measured = None
        points = view.app.points.get(EPOCH_TIME)
        if points is not None:
            mask = view.point_mask(points)
            measured = pd.DataFrame({view.x_param: points.X[mask, view.x_index], VALUE: points.value[mask]})
        self.parts = breakdown_panel(
            ax, table, view.x_param, view.app.per, view.modeled_x_max(), areas=True, measured=measured
        )
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        self.apply_scales()
