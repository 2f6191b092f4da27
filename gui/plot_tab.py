"""Shared frame of the right-hand tabs: a matplotlib canvas, or a message while the tab cannot show anything.

A tab shows a message instead of a plot when the part of extradeep it needs is not available or the
open input lacks what it needs; it never invents data. `export` saves the current figure as PNG, SVG or
PDF by file suffix.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg, NavigationToolbar2QT
from matplotlib.figure import Figure
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QStackedWidget, QVBoxLayout, QWidget

from extradeep.errors import InputError

EXPORT_SUFFIXES = (".png", ".svg", ".pdf")
# A figure is drawn on a timer this long after the pass that changed it, not in that pass: the work
# before (building the artists, the region tree, a selection) and the draw then block the UI one
# after the other instead of together. A posted event (0 ms, or matplotlib's draw_idle alone) ran in
# the same pass of Qt's event loop and the first plot of an input blocked it for 130-250 ms.
DRAW_DELAY_MS = 1
MARGINS = {"left": 0.1, "right": 0.97, "bottom": 0.1, "top": 0.94, "wspace": 0.4, "hspace": 0.45}
TICKS_AHEAD = 16  # more than the auto locator puts on either axis of these figures


def one_axes(figure) -> list:
    """A figure's single plot with a grid (what most tabs keep)."""
    ax = figure.add_subplot()
    ax.grid(alpha=0.3)
    return [ax]


def empty_axes(ax) -> None:
    """Remove what the last redraw put on `ax` (artists, legend), keeping the axes, their ticks and
    scales: a new Axes and its ticks cost about 25 ms of a redraw."""
    for artist in [*ax.lines, *ax.collections, *ax.patches, *ax.texts, *ax.images]:
        artist.remove()
    ax.containers.clear()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    ax.relim()  # no artists left: empty data limits, as on a new Axes
    ax.set_autoscale_on(True)  # a set_ylim(bottom=0) of the last redraw must not pin this one


class PlotTab(QWidget):
    """A tab with controls (optional), a figure, and a message page for when there is nothing to show."""

    title = "Plot"
    margins = MARGINS
    # What makes the tab redraw when it is shown: "models" (all region models done), "app" (the
    # application models arrived). Redraws while modeling runs compete with it for the GIL.
    redraw_on = frozenset({"models", "app"})
    log_scales = True  # the plot offers log x and log y (the tab's kept axes)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._plot_wanted = False
        # Fixed margins: a constrained layout costs ~50 ms per redraw, half a selection change's budget.
        self.figure = Figure(figsize=(7, 5))
        self.figure.subplots_adjust(**self.margins)
        self.canvas = FigureCanvasQTAgg(self.figure)
        self.toolbar = NavigationToolbar2QT(self.canvas, self)
        self.message = QLabel(wordWrap=True, alignment=Qt.AlignCenter)
        self.log_x, self.log_y = QCheckBox("log x"), QCheckBox("log y")
        self.message.setMargin(24)
        plot_page = QWidget()
        plot_box = QVBoxLayout(plot_page)
        plot_box.setContentsMargins(0, 0, 0, 0)
        tools = QHBoxLayout()  # the log-axis boxes sit beside the toolbar, not on a row of their own
        tools.addWidget(self.toolbar, 1)
        for box in (self.log_x, self.log_y):
            box.setToolTip("logarithmic axis")
            box.toggled.connect(self._rescaled)
            box.setVisible(self.log_scales)
            tools.addWidget(box)
        plot_box.addLayout(tools)
        plot_box.addWidget(self.canvas, 1)
        self.stack = QStackedWidget()
        self.stack.addWidget(plot_page)
        self.stack.addWidget(self.message)
        self.controls = QWidget()
        self.controls_box = QVBoxLayout(self.controls)
        self.controls_box.setContentsMargins(0, 0, 0, 0)
        self.axes: list = []  # the plot's axes, kept between redraws (see kept_axes)
        self._axes_key = None
        box = QVBoxLayout(self)
        box.addWidget(self.controls)
        box.addWidget(self.stack, 1)
        self.show_message("Open profiles, a saved experiment or an Extra-P text file (File > Open).")

    @property
    def has_plot(self) -> bool:
        """The tab shows a plot (or will, once its deferred draw runs)."""
        return self._plot_wanted

    def clear_figure(self) -> None:
        """An empty figure with this tab's margins (Figure.clear resets them)."""
        self.figure.clear()
        self.figure.subplots_adjust(**self.margins)
        self.axes, self._axes_key = [], None

    def kept_axes(self, key, make) -> list:
        """The plot's axes: made by `make(figure)` when `key` (their layout) changes, else the same
        axes emptied of the last redraw's artists."""
        if key != self._axes_key:
            self.clear_figure()
            self.axes, self._axes_key = list(make(self.figure)), key
            # Ticks are made on an axis' first draw (about 1 ms each): made here, not in the UI pass
            # that draws the first plot.
            for ax in self.axes:
                for axis in (ax.xaxis, ax.yaxis):
                    axis.get_major_ticks(TICKS_AHEAD)
        else:
            for ax in self.axes:
                empty_axes(ax)
        return self.axes

    def apply_scales(self) -> None:
        """Log or linear x and y on the kept axes, as the check boxes say (set only when it changes:
        a new scale resets the axis' locators)."""
        for ax in self.axes:
            for box, get, set_, axis in (
                (self.log_x, ax.get_xscale, ax.set_xscale, "x"),
                (self.log_y, ax.get_yscale, ax.set_yscale, "y"),
            ):
                scale = "log" if box.isChecked() else "linear"
                if get() != scale:
                    set_(scale)
                if scale == "log":  # a bottom of 0 has no place on a log axis: fit the data instead
                    ax.autoscale(axis=axis)

    def _rescaled(self, *_) -> None:
        self.apply_scales()
        if self.has_plot:
            self.canvas.draw_idle()

    def show_message(self, text: str) -> None:
        self._plot_wanted = False
        self.message.setText(text)
        self.stack.setCurrentIndex(1)

    def show_plot(self) -> None:
        """Show the figure, drawn once in a pass of the event loop of its own (see `DRAW_DELAY_MS`)."""
        self._plot_wanted = True
        QTimer.singleShot(DRAW_DELAY_MS, self, self._show_drawn)  # skipped if the tab is gone

    def _show_drawn(self) -> None:
        if not self._plot_wanted:  # a message replaced the plot meanwhile
            return
        # Showing the page resizes the canvas, which asks for a draw itself: draw_idle makes it one.
        self.stack.setCurrentIndex(0)
        self.canvas.draw_idle()

    def export(self, path: str | Path) -> Path:
        path = Path(path)
        if path.suffix.lower() not in EXPORT_SUFFIXES:
            raise InputError(path, f"plots export as {', '.join(EXPORT_SUFFIXES)}")
        if not self.has_plot:
            raise InputError(path, f"the {self.title} tab has no plot to export")
        self.figure.savefig(path, dpi=150)
        return path

    def refresh(self, view) -> None:
        """Redraw from `view` (a gui.param_panel.View); subclasses override."""

    def models_changed(self) -> None:
        """The region models were refitted; subclasses drop what they cached."""
