"""Cost tab: the time-cost trade-off of the paper's Fig. 4b.

Time and cost per epoch (or step) along the x parameter, from `extradeep.analysis.budget.budget_search`
on the application time model. The deadline and budget sliders shade the configurations that meet
each limit (hatched), the ones that meet both (green) and name the best one by efficiency.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QGridLayout, QLabel, QSlider

from extradeep.columns import COST
from extradeep.gui.app_models import candidates, frame_of, node_layout
from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import PlotTab
from extradeep.gui.tabs.scaling_tab import ranks_param

SLIDER_STEPS = 1000


def slider_value(slider: QSlider, lo: float, hi: float) -> float:
    """Map a slider position to a limit between lo and hi on a log scale."""
    t = slider.value() / SLIDER_STEPS
    return float(np.exp(np.log(lo) + t * (np.log(hi) - np.log(lo))))


class CostTab(PlotTab):
    """Deadline and budget sliders over the time and cost curves; the valid set and the best pick."""

    title = "Cost"

    def __init__(self, parent=None):
        super().__init__(parent)
        self.deadline_slider = QSlider(Qt.Horizontal, minimum=0, maximum=SLIDER_STEPS, value=700)
        self.budget_slider = QSlider(Qt.Horizontal, minimum=0, maximum=SLIDER_STEPS, value=500)
        self.deadline_label, self.budget_label = QLabel(), QLabel()
        self.cores = QDoubleSpinBox(minimum=1, maximum=4096, value=1, decimals=0)
        self.cores.setToolTip("CPU cores billed per rank (paper Eq. 14: cost = T x ranks x cores per rank)")
        self.mode = QComboBox()
        self.mode.addItems(["strong", "weak"])
        self.answer = QLabel(wordWrap=True)
        self.answer.setTextInteractionFlags(Qt.TextSelectableByMouse)
        grid = QGridLayout()
        grid.addWidget(QLabel("Deadline"), 0, 0)
        grid.addWidget(self.deadline_slider, 0, 1)
        grid.addWidget(self.deadline_label, 0, 2)
        grid.addWidget(QLabel("Budget"), 1, 0)
        grid.addWidget(self.budget_slider, 1, 1)
        grid.addWidget(self.budget_label, 1, 2)
        grid.addWidget(QLabel("Cores per rank"), 0, 3)
        grid.addWidget(self.cores, 0, 4)
        grid.addWidget(QLabel("Scaling"), 1, 3)
        grid.addWidget(self.mode, 1, 4)
        grid.setColumnStretch(1, 1)
        self.controls_box.addLayout(grid)
        self.controls_box.addWidget(self.answer)
        self.view: View | None = None
        self.result = None
        self._ranges = (1.0, 1.0, 1.0, 1.0)
        self._ranges_for = None  # what the slider ranges were computed for
        for slider in (self.deadline_slider, self.budget_slider):
            slider.valueChanged.connect(self._redraw)
        self.cores.valueChanged.connect(self._redraw)
        self.mode.currentTextChanged.connect(self._redraw)

    def _redraw(self, *_):
        if self.view is not None:
            self.refresh(self.view)

    def limits(self) -> tuple[float, float]:
        t_lo, t_hi, c_lo, c_hi = self._ranges
        return slider_value(self.deadline_slider, t_lo, t_hi), slider_value(self.budget_slider, c_lo, c_hi)

    def valid_points(self) -> list[float]:
        """x values of the configurations that meet both limits."""
        if self.result is None:
            return []
        table = self.result.table
        return table.loc[table["valid"], self.view.x_param].tolist()

    def refresh(self, view: View) -> None:
        self.view = view
        if view.ws is None:
            return
        app = view.app
        quantity = app.time_quantity if app is not None else None
        if quantity is None:
            self.result = None
            self.show_message(
                "The cost view needs a model of the application's time per epoch or step. "
                "Open profiles or a saved experiment (Extra-P text has none), and wait for "
                "modeling to finish."
            )
            return
        self._search(view, app.model(quantity))
        self._draw(view, app.time_label, app.per)
        self.show_plot()

    def _search(self, view: View, model) -> None:
        from extradeep.analysis.budget import BudgetLimits, budget_search
        from extradeep.analysis.cost import CostSettings

        ws = view.ws
        grid = frame_of(view, candidates(view))
        cost = CostSettings(cores_per_rank=self.cores.value(), ranks_param=ranks_param(ws.params))
        baseline = {p: float(grid[p].min()) if p == view.x_param else view.fixed[p] for p in ws.params}
        key = (id(model), tuple(grid[view.x_param]), tuple(sorted(view.fixed.items())), cost.cores_per_rank)
        if key != self._ranges_for:  # a slider move keeps them: one budget search per redraw, not two
            self._update_ranges(model, grid, cost, baseline)
            self._ranges_for = key
        deadline, budget = self.limits()
        self.result = budget_search(
            model,
            grid,
            ws.params,
            BudgetLimits(max_time=deadline, max_cost=budget),
            cost,
            baseline,
            scaling=self.mode.currentText(),
        )

    def _update_ranges(self, model, grid, cost, baseline) -> None:
        """Slider ranges span the predicted time and cost over the grid (positive values only)."""
        from extradeep.analysis.budget import BudgetLimits, budget_search

        table = budget_search(model, grid, self.view.ws.params, BudgetLimits(max_time=1e300), cost, baseline).table
        T = table.loc[table["T"] > 0, "T"].to_numpy()
        C = table.loc[table["T"] > 0, COST].to_numpy()
        if len(T) == 0:
            self._ranges = (1.0, 2.0, 1.0, 2.0)
            return
        self._ranges = (T.min() * 0.8, T.max() * 1.25, C.min() * 0.8, C.max() * 1.25)

    def _draw(self, view: View, quantity: str, per: str) -> None:
        from extradeep.report.plots import tradeoff_panels
        from extradeep.report.text import format_value

        res = self.result
        deadline, budget = self.limits()
        self.deadline_label.setText(f"{format_value(deadline)} per {per}")
        self.budget_label.setText(f"{budget:.4g} {res.cost_unit} per {per}")
        ax_t, ax_c = self.kept_axes("pair", lambda fig: fig.subplots(1, 2, sharex=True))
        best = self._best(per)
        tradeoff_panels(
            ax_t,
            ax_c,
            res.table,
            view.x_param,
            deadline,
            budget,
            res.cost_unit,
            per=per,
            best=best,
            layout=node_layout(view),
        )
        ax_t.legend(fontsize=8, loc="upper right")
        ax_c.legend(fontsize=8, loc="upper left")
        ax_t.set_title(f"Training time ({quantity})", fontsize=10)
        ax_c.set_title("Training cost", fontsize=10)
        self.apply_scales()

    def _best(self, per: str):
        """The best configuration by efficiency (its row), said in the answer line; None if none is valid."""
        from extradeep.analysis.points import format_point
        from extradeep.report.text import format_value

        res, view = self.result, self.view
        best = res.best[res.best["criterion"] == "efficiency"]
        if best.empty:
            # The library counts limits for a number of epochs; with per-step values, one is one step.
            failure = res.failure if per == "epoch" else res.failure.replace("for 1 epoch", "per step")
            self.answer.setText(f"<b>No configuration meets both limits.</b> {failure}")
            return None
        row = best.iloc[0]
        spans = "; ".join(
            f"{view.x_param} {r['from']:g}" + (f"–{r['to']:g}" if r["to"] != r["from"] else "")
            for _, r in res.intervals.iterrows()
        )
        self.answer.setText(
            f"<b>Best by efficiency: {format_point(row, view.ws.params)}</b> — "
            f"{format_value(row['T'])} and {row['total_cost']:.4g} {res.cost_unit} per "
            f"{view.app.per}, efficiency {row['efficiency']:.2f}. Valid: {spans}."
            + (f" <i>{'; '.join(res.notes)}</i>" if res.notes else "")
        )
        return row
