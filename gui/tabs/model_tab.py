"""Model tab: measured points with spread bars, model curve, 95% prediction band, shaded extrapolation
range and evaluation points, for one or several selected regions; a 2-D heatmap for two parameters.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import LogNorm
from PySide6.QtWidgets import QCheckBox

from extradeep.columns import REGION
from extradeep.gui.app_models import node_layout
from extradeep.gui.param_panel import View, model_grid
from extradeep.gui.plot_tab import PlotTab, one_axes
from extradeep.report.plots import extrapolation_marker, mark_node_boundaries, measured_points, model_curve

MAX_OVERLAY = 8
N_GRID = 160
LINES = "lines"  # the key of the line plot's kept axes
UNITS = {"time": "time per {per} [s]", "visits": "visits per {per}", "bytes": "bytes per {per}"}


def unit_label(view: View) -> str:
    return UNITS.get(view.metric, view.metric + " per {per}").format(per=view.ws.per)


def short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


class ModelTab(PlotTab):
    """Measured vs modeled values of the selected regions along the x parameter."""

    title = "Model"
    redraw_on = frozenset()  # the selected regions redraw when their own chunk arrives

    def __init__(self, parent=None):
        super().__init__(parent)
        self.heatmap = QCheckBox("2-D view (two parameters as a heatmap)")
        self.heatmap.setVisible(False)
        self.heatmap.toggled.connect(lambda *_: self.refresh(self.view) if self.view else None)
        self.controls_box.addWidget(self.heatmap)
        self.view: View | None = None
        self.ax = self.kept_axes(LINES, one_axes)[0]

    def refresh(self, view: View) -> None:
        self.view = view
        ws = view.ws
        if ws is None:
            return
        self.heatmap.setVisible(len(ws.params) > 1)
        rows = view.rows[:MAX_OVERLAY]
        if not rows:
            self.show_message("Select one or more regions in the tree (Ctrl-click to overlay several).")
            return
        rows = [r for r in rows if r in ws.points]
        if not rows:
            self.show_message("Modeling… (the selected regions are drawn as soon as theirs are done).")
            return
        if self.heatmap.isChecked() and len(ws.params) > 1:
            self.clear_figure()
            self._draw_heatmap(view, rows[0])
        else:
            self._draw_lines(view, rows)
        self.show_plot()

    def _draw_lines(self, view: View, rows: list[int]) -> None:
        ws = view.ws
        # Kept rather than re-created, only their artists replaced: a new Axes costs ~25 ms a redraw.
        ax = self.ax = self.kept_axes(LINES, one_axes)[0]
        lo_x, hi_x = view.x_range()
        extrapolation_marker(ax, view.modeled_x_max(), hi_x)
        mark_node_boundaries(ax, node_layout(view), lo_x, hi_x)
        x = np.linspace(lo_x, hi_x, N_GRID)
        grid = model_grid(view, x)
        rising = []
        for n, row in enumerate(rows):
            color = f"C{n % 10}"
            name = short(ws.regions.at[row, REGION])
            self._draw_points(ax, view, row, color, first=n == 0)
            model = ws.models.get(row)
            if model is None:
                continue
            X = grid[:, 0] if len(ws.params) == 1 else grid
            y = np.asarray(model.predict(X), float).reshape(-1)
            rising.append(y[-1] > y[0])
            lo, hi = model.interval(X, level=0.95)
            model_curve(
                ax,
                x,
                y,
                lo,
                hi,
                color,
                f"{name}: {short(model.formula(), 60)}",
                "95% prediction interval" if n == 0 else None,
            )
        ax.set_xlabel(view.x_param)
        ax.set_ylabel(unit_label(view))
        fixed = ", ".join(f"{k} = {v:g}" for k, v in view.fixed.items())
        title = short(ws.regions.at[rows[0], REGION], 70) if len(rows) == 1 else f"{len(rows)} regions"
        ax.set_title(title + (f"  ({fixed})" if fixed else ""), fontsize=10)
        ax.set_xlim(lo_x - 0.02 * (hi_x - lo_x), hi_x)
        # A fixed corner away from the curves: loc="best" costs tens of milliseconds per redraw.
        ax.legend(fontsize=8, loc="upper left" if rising and all(rising) else "upper right")
        self.apply_scales()

    def _draw_points(self, ax, view: View, row: int, color: str, first: bool) -> None:
        points = view.ws.points[row]
        on_slice = view.point_mask(points)
        used = view.modeling_mask(points)
        xi = view.x_index
        for mask, filled, label in (
            (on_slice & used, True, "measured (median, min-max of repetitions)"),
            (on_slice & ~used, False, "evaluation points (not modeled)"),
        ):
            if not mask.any():
                continue
            measured_points(
                ax,
                points.X[mask, xi],
                points.value[mask],
                points.lo[mask],
                points.hi[mask],
                color,
                label if first else None,
                "o" if filled else "D",
                hollow=not filled,
            )

    def _draw_heatmap(self, view: View, row: int) -> None:
        ws = view.ws
        ax = self.ax = self.figure.add_subplot()  # not kept: the colour bar takes part of the figure
        model = ws.models.get(row)
        y_param = view.y_param if view.y_param != view.x_param else next(p for p in ws.params if p != view.x_param)
        if model is None:
            ax.text(0.5, 0.5, "no model for this region", ha="center", transform=ax.transAxes)
            return
        values = ws.param_grid
        lo_x, hi_x = view.x_range()
        ys = values[y_param]
        x = np.linspace(lo_x, hi_x, 60)
        y = np.linspace(ys.min(), ys.max() * 2, 60)
        xx, yy = np.meshgrid(x, y)
        grid = model_grid(view, xx.ravel())
        grid[:, ws.params.index(y_param)] = yy.ravel()
        z = np.asarray(model.predict(grid), float).reshape(xx.shape)
        # Log colours only when values span more than two decades; otherwise a linear scale reads better.
        wide = np.isfinite(z).all() and (z > 0).all() and z.max() / z.min() > 100
        levels = np.geomspace(z.min(), z.max(), 21) if wide else 20
        mesh = ax.contourf(xx, yy, z, levels=levels, cmap="viridis", norm=LogNorm() if wide else None)
        bar = self.figure.colorbar(mesh, ax=ax, label=unit_label(view))
        if wide:  # a log colour bar spanning less than a few decades gets no labels by default
            ticks = np.geomspace(z.min(), z.max(), 6)
            bar.set_ticks(ticks, labels=[f"{t:.3g}" for t in ticks])
        pts = ws.points[row]
        ax.scatter(
            pts.X[:, view.x_index],
            pts.X[:, ws.params.index(y_param)],
            c="white",
            edgecolors="k",
            s=30,
            label="measured points",
            zorder=3,
        )
        ax.set_xlabel(view.x_param)
        ax.set_ylabel(y_param)
        ax.set_title(f"{short(ws.regions.at[row, REGION], 60)}: {short(model.formula(), 60)}", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
