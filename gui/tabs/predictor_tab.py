"""Predictor tab: placeholder until extradeep.predictor lands."""

from __future__ import annotations

from gui.plot_tab import PlotTab


class PredictorTab(PlotTab):
    title = "Predictor"

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window = window

    def refresh(self, view) -> None:
        self.show_message("The trace-based predictor is not available in this version of extradeep yet.")
