"""Model tab: measured points with spread bars, model curve, 95% prediction band, shaded extrapolation
range and evaluation points, for one or several selected regions; a 2-D heatmap for two parameters.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import LogNorm
from PySide6.QtWidgets import QCheckBox

from extradeep.gui.param_panel import View, model_grid
from extradeep.gui.plot_tab import PlotTab

MAX_OVERLAY = 8
N_GRID = 160
TICKS_AHEAD = 16  # more than the auto locator puts on either axis of this figure
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
        self._new_line_axes()

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
            self._line_axes = False
            self._draw_heatmap(view, rows[0])
        else:
            self._draw_lines(view, rows)
        self.show_plot()

    def _new_line_axes(self) -> None:
        self.ax = self.figure.add_subplot()
        self.ax.grid(alpha=0.3)
        # Ticks are made on an axis' first draw (about 1 ms each): made here, the first plot of an
        # input does not pay for them in the UI pass that draws it.
        for axis in (self.ax.xaxis, self.ax.yaxis):
            axis.get_major_ticks(TICKS_AHEAD)
        self._line_axes = True  # self.ax holds the line plot (not the heatmap and its colour bar)

    def _empty_line_axes(self):
        """The line plot's axes without the last selection's artists. Kept rather than re-created:
        a new Axes and its ticks cost about 25 ms of a redraw."""
        if not self._line_axes:
            self.clear_figure()
            self._new_line_axes()
        ax = self.ax
        for artist in [*ax.lines, *ax.collections, *ax.patches]:
            artist.remove()
        ax.containers.clear()
        ax.relim()  # no artists left: empty data limits, as on a new Axes
        return ax

    def _draw_lines(self, view: View, rows: list[int]) -> None:
        ws = view.ws
        ax = self._empty_line_axes()
        lo_x, hi_x = view.x_range()
        x_model = view.modeled_x_max()
        if hi_x > x_model:
            ax.axvspan(x_model, hi_x, color="0.5", alpha=0.10, lw=0, label="extrapolation")
        x = np.linspace(lo_x, hi_x, N_GRID)
        grid = model_grid(view, x)
        rising = []
        for n, row in enumerate(rows):
            color = f"C{n % 10}"
            name = short(ws.regions.at[row, "region"])
            self._draw_points(ax, view, row, color, first=n == 0)
            model = ws.models.get(row)
            if model is None:
                continue
            X = grid[:, 0] if len(ws.params) == 1 else grid
            y = np.asarray(model.predict(X), float).reshape(-1)
            rising.append(y[-1] > y[0])
            ax.plot(x, y, color=color, lw=1.8, label=f"{name}: {short(model.formula(), 60)}")
            lo, hi = model.interval(X, level=0.95)
            ax.fill_between(x, np.maximum(np.asarray(lo, float).reshape(-1), 0.0),
                            np.maximum(np.asarray(hi, float).reshape(-1), 0.0),
                            color=color, alpha=0.15, lw=0, label="95% prediction interval" if n == 0 else None)
        ax.set_xlabel(view.x_param)
        ax.set_ylabel(unit_label(view))
        fixed = ", ".join(f"{k} = {v:g}" for k, v in view.fixed.items())
        title = short(ws.regions.at[rows[0], "region"], 70) if len(rows) == 1 else f"{len(rows)} regions"
        ax.set_title(title + (f"  ({fixed})" if fixed else ""), fontsize=10)
        ax.set_xlim(lo_x - 0.02 * (hi_x - lo_x), hi_x)
        # A fixed corner away from the curves: loc="best" costs tens of milliseconds per redraw.
        ax.legend(fontsize=8, loc="upper left" if rising and all(rising) else "upper right")

    def _draw_points(self, ax, view: View, row: int, color: str, first: bool) -> None:
        points = view.ws.points[row]
        on_slice = view.point_mask(points)
        used = view.modeling_mask(points)
        xi = view.x_index
        for mask, filled, label in ((on_slice & used, True, "measured (median, min-max of repetitions)"),
                                    (on_slice & ~used, False, "evaluation points (not modeled)")):
            if not mask.any():
                continue
            x, v = points.X[mask, xi], points.value[mask]
            err = np.vstack([v - points.lo[mask], points.hi[mask] - v]).clip(min=0)
            ax.errorbar(x, v, yerr=err, fmt="o" if filled else "D", color=color, ms=5, capsize=3,
                        mfc=color if filled else "white", label=label if first else None, zorder=3)

    def _draw_heatmap(self, view: View, row: int) -> None:
        ws = view.ws
        ax = self.ax = self.figure.add_subplot()
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
        ax.scatter(pts.X[:, view.x_index], pts.X[:, ws.params.index(y_param)], c="white", edgecolors="k",
                   s=30, label="measured points", zorder=3)
        ax.set_xlabel(view.x_param)
        ax.set_ylabel(y_param)
        ax.set_title(f"{short(ws.regions.at[row, 'region'], 60)}: {short(model.formula(), 60)}", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
