"""Plan tab: what to profile next (`extradeep.MeasurementAdvisor`), next to the primary time model it
would improve (the one every view answers with): the model with its 95% band up to the target, the measured points, the proposed
runs as markers, and the plan as a table that can be saved for `extradeep profile-cmd --plan`.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
)

from extradeep.columns import GPU_HOURS, RANKS, VALUE
from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import PlotTab

COLUMNS = [RANKS, "reps", "first_rep", "nodes", "action", GPU_HOURS, "interval_after_pct", "shrink_pct"]


def _spin(low, high, value, step=1, double=False):
    box = QDoubleSpinBox() if double else QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    box.setSingleStep(step)
    return box


class PlanPanel(PlotTab):
    """Proposes the next profiling runs for the open experiment and shows them beside its model."""

    title = "Plan"
    redraw_on = frozenset()  # computed on request only: the advisor fits its per-step model

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window = window
        self.plan = None
        self.advisor = None
        row = QHBoxLayout()
        self.target = _spin(2, 1_000_000, 128)
        self.max_ranks = _spin(2, 1_000_000, 32)
        self.per_node = _spin(1, 1024, 8)
        self.budget = _spin(0.0, 1e9, 0.0, 1.0, double=True)
        self.budget.setSpecialValueText("no limit")
        self.k = _spin(1, 20, 3)
        for label, box in (
            ("target ranks", self.target),
            ("max ranks", self.max_ranks),
            ("GPUs/node", self.per_node),
            ("budget GPU-h", self.budget),
            ("runs", self.k),
        ):
            row.addWidget(QLabel(label))
            row.addWidget(box)
        # beyond one node the plan proposes whole nodes, as clusters allocate them, unless this is ticked
        # (its own row: the controls row sets the tab's minimum width)
        self.partial_nodes = QCheckBox("partial nodes (also half nodes beyond one node)")
        self._layout_of = None  # the experiment whose layout set GPUs/node
        self.propose_button = QPushButton("Propose")
        self.propose_button.clicked.connect(self.propose)
        self.save_button = QPushButton("Save plan...", enabled=False)
        self.save_button.clicked.connect(self.ask_save)
        row.addWidget(self.propose_button)
        row.addWidget(self.save_button)
        self.controls_box.addLayout(row)
        options = QHBoxLayout()
        options.addWidget(self.partial_nodes)
        options.addStretch(1)
        self.controls_box.addLayout(options)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setMaximumHeight(180)
        self.layout().addWidget(self.table)
        self.show_message("Open profiles or a saved experiment, then press Propose.")

    def models_changed(self) -> None:
        pass

    def refresh(self, view: View) -> None:
        if view.ws is None or view.ws.experiment is None:
            self.show_message("The plan needs profiles or a saved experiment (not an Extra-P text file).")
            return
        self._node_size_from(view.ws.experiment)
        if self.plan is None:
            self.show_message(
                "Press Propose: the next runs that shrink the 95% interval at the target the most per GPU-hour."
            )

    def propose(self) -> None:
        from extradeep.analysis.advisor import MeasurementAdvisor

        ws = self.window.ws
        if ws is None or ws.experiment is None:
            self.show_message("The plan needs profiles or a saved experiment (not an Extra-P text file).")
            return
        advisor = MeasurementAdvisor(
            self.target.value(),
            self.max_ranks.value(),
            self.per_node.value(),
            self.budget.value() or None,
            partial_nodes=self.partial_nodes.isChecked(),
        )
        app = self.window.app_models  # the plan improves the primary time model the other tabs show
        primary = app.primary if app is not None else None
        self.window.runner.start("plan", _propose, advisor, ws.experiment, self.k.value(), primary, on_done=self._show)

    def _show(self, result) -> None:
        self.advisor, self.plan = result
        self.save_button.setEnabled(True)
        self.table.setRowCount(len(self.plan))
        for i, row in enumerate(self.plan[COLUMNS].itertuples(index=False)):
            for j, value in enumerate(row):
                text = f"{value:.3g}" if isinstance(value, float) else str(value)
                self.table.setItem(i, j, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self._draw()

    def _draw(self) -> None:
        advisor, plan = self.advisor, self.plan
        self.clear_figure()
        ax = self.figure.add_subplot(111)
        # the primary time model (the one every view answers with), else the advisor's own per-step fit
        primary = advisor.primary_
        m = advisor.measurements_ if primary is None else advisor.primary_measured_
        model = advisor.model_ if primary is None else primary.model
        ax.plot(m[RANKS], m[VALUE], "o", color="0.3", label="measured")
        if model is not None:
            x = np.linspace(max(2.0, m[RANKS].min()), advisor.targets_.max(), 200)
            lo, hi = model.interval(x, level=advisor.level)
            ax.fill_between(x, np.maximum(lo, 0.0), hi, alpha=0.2, label="95% interval now")
            ax.plot(x, model.predict(x), label=_short(model.formula()))
        for r in plan.itertuples():
            ax.axvline(r.ranks, color="tab:red", linestyle="--", linewidth=1)
        ax.axvline(advisor.targets_.max(), color="k", linewidth=1, label="target")
        ax.set_xlabel("ranks")
        ax.set_ylabel(f"{advisor.quantity_} [s]")
        ax.set_title("proposed runs (red) and the model they would improve", fontsize=9)
        ax.legend(fontsize=8)
        self.show_plot()

    def _node_size_from(self, experiment) -> None:
        """GPUs/node starts at the experiment's layout (its profiles' node signals, else its system
        file), once per experiment; the user may change it."""
        from extradeep.io.placement import resolve_layout, source_name

        if self._layout_of is experiment:
            return
        self._layout_of = experiment
        layout = resolve_layout(experiment.settings.layout, experiment.settings.system)
        if layout["gpus_per_node"]:
            self.per_node.setValue(int(layout["gpus_per_node"]))
            where = (
                "the system file" if layout["source"] == "system" else f"the profiles' {source_name(layout['source'])}"
            )
            self.per_node.setToolTip(f"from {where}")

    def ask_save(self) -> None:
        from extradeep.capture.plan_file import write_plan
        from extradeep.errors import InputError

        path, _ = QFileDialog.getSaveFileName(self, "Save plan", "plan.csv", "Plan files (*.csv)")
        if path and self.plan is not None:
            try:
                write_plan(path, self.plan)
            except InputError as exc:  # an unwritable path is a message, not a dead window
                self.window.show_error(str(exc))


def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _propose(report, advisor, experiment, k, primary=None):
    return advisor, advisor.fit(experiment, primary).propose(k)
