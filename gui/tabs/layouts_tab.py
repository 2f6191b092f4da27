"""Layouts tab: which tensor/pipeline/data-parallel layout is fastest or cheapest, and does it fit.

The tab fills one :class:`extradeep.layout_study.LayoutStudy` (profiles or tables that calibrate,
the model to search, its hardware, GPU counts, global batch, limits) and calls
:func:`extradeep.layout_study.run_layout_study` off the UI thread, as `extradeep layouts` does; it
shows the search table (sortable; the reason beside every layout that does not fit), the Pareto plot
of time against cost or the heat map of layouts against GPU counts, and the recommended layout.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
)

from extradeep.gui.plot_tab import PlotTab

VIEWS = ("Pareto plot", "heat map")
# (search table column, header); numbers sort as numbers
COLUMNS = [
    ("rank", "rank"),
    ("gpus", "GPUs"),
    ("tp", "t"),
    ("pp", "p"),
    ("dp", "d"),
    ("micro_batch", "micro-batch"),
    ("micro_batches", "count"),
    ("zero", "ZeRO"),
    ("recompute", "recompute"),
    ("schedule", "schedule"),
    ("hardware", "hardware"),
    ("time", "time"),
    ("time_low", "low"),
    ("time_high", "high"),
    ("cost", "cost"),
    ("energy_kwh", "kWh"),
    ("peak_memory", "memory GiB"),
    ("pareto", "Pareto"),
    ("reason", "does not fit because"),
]
MAX_ROWS = 5000  # rows shown in the table; the saved report and CSV have them all


def _path_row(box, label: str, placeholder: str, browse) -> QLineEdit:
    edit = QLineEdit(placeholderText=placeholder)
    button = QPushButton("…")
    button.setMaximumWidth(30)
    button.clicked.connect(browse)
    box.addWidget(QLabel(label))
    box.addWidget(edit, 1)
    box.addWidget(button)
    return edit


def _limit_box(suffix: str) -> QDoubleSpinBox:
    box = QDoubleSpinBox(decimals=4)
    box.setRange(0.0, 1e12)
    box.setSpecialValueText("no limit")
    box.setSuffix(suffix)
    return box


class LayoutsTab(PlotTab):
    """Search the parallel layouts of a model, calibrated on profiles or tables."""

    title = "Layouts"
    redraw_on = frozenset()  # searched on request only
    log_scales = False

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window = window
        self.result = None
        # three short rows, not one long one: the controls set the tab's (and the window's) minimum width
        paths, more, search = QHBoxLayout(), QHBoxLayout(), QHBoxLayout()
        self.inputs = _path_row(paths, "profiles / tables", "folders or CSV tables; ';' between", self._browse_inputs)
        self.model = _path_row(paths, "model", "model description (TOML)", lambda: self._browse(self.model, "TOML"))
        self.hardware = _path_row(more, "hardware", "TOML or a GPU preset", lambda: self._browse(self.hardware, "TOML"))
        self.gpus = QLineEdit("64,128,256,512")
        self.gpus.setMinimumWidth(110)
        self.global_batch = QSpinBox()
        self.global_batch.setRange(1, 10_000_000)
        self.global_batch.setValue(512)
        self.max_time, self.max_cost = _limit_box(" s"), _limit_box("")
        self.objective = QComboBox()
        self.objective.addItems(["time", "cost", "energy"])
        self.view = QComboBox()
        self.view.addItems(VIEWS)
        self.view.currentIndexChanged.connect(lambda *_: self._draw())
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.search)
        self.report_button = QPushButton("Save report…", enabled=False)
        self.report_button.clicked.connect(self.ask_report)
        for row, label, widget in (
            (more, "GPUs", self.gpus),
            (more, "global batch", self.global_batch),
            (search, "max time", self.max_time),
            (search, "max cost", self.max_cost),
            (search, "rank by", self.objective),
            (search, "show", self.view),
        ):
            row.addWidget(QLabel(label))
            row.addWidget(widget)
        search.addStretch(1)
        search.addWidget(self.search_button)
        search.addWidget(self.report_button)
        for row in (paths, more, search):
            self.controls_box.addLayout(row)
        self.best = QLabel(wordWrap=True, textInteractionFlags=Qt.TextSelectableByMouse)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([h for _, h in COLUMNS])
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSortingEnabled(True)
        self.table.setMaximumHeight(220)
        self.layout().addWidget(self.best)
        self.layout().addWidget(self.table)
        self.show_message(
            "Choose profiles of runs in several layouts (or a CSV table of measured layouts) and the model to "
            "search, then press Search. Without profiles or tables the model runs on physics alone."
        )

    # --- inputs
    def _browse_inputs(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Profiles of runs in several layouts")
        if path:
            self.inputs.setText(path)

    def _browse(self, edit: QLineEdit, kind: str) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open", "", f"{kind} (*.toml)")
        if path:
            edit.setText(path)

    def study(self):
        """The LayoutStudy the controls ask for (InputError naming the field when one is wrong)."""
        from extradeep.analysis.points import parse_values
        from extradeep.errors import InputError
        from extradeep.layout_study import LayoutStudy, check_study

        paths = [p.strip() for p in self.inputs.text().split(";") if p.strip()]
        tables = [p for p in paths if Path(p).suffix.lower() in (".csv", ".txt")]
        model = self.model.text().strip() or None
        if model is None:
            raise InputError("model", "choose the model description (TOML) to search")
        gpus = parse_values(self.gpus.text(), "GPUs")
        if any(g != int(g) or g < 1 for g in gpus):
            raise InputError("GPUs", f"{self.gpus.text()!r}: whole numbers >= 1")
        study = LayoutStudy(
            profiles=[p for p in paths if p not in tables],
            tables=tables,
            hardware=self.hardware.text().strip() or None,
            model=model,
            gpus=[int(g) for g in gpus],
            global_batch=self.global_batch.value(),
            objective=self.objective.currentText(),
            max_time=self.max_time.value() or None,
            max_cost=self.max_cost.value() or None,
        )
        check_study(study)
        return study

    def search(self) -> None:
        from extradeep.errors import InputError

        try:
            study = self.study()
        except InputError as exc:
            self.window.show_error(str(exc))
            return
        self.show_message("Searching the layouts…")
        self.window.runner.start("layouts", _run, study, on_done=self.show_result)

    # --- results
    def show_result(self, result) -> None:
        from extradeep.report.layout_html import best_text, calibration_text

        self.result = result
        self.report_button.setEnabled(True)
        table = result.table
        self.best.setText(f"{best_text(table)}\nThe model is {calibration_text(result)}.")
        self._fill_table(table)
        self._draw()

    def _fill_table(self, table) -> None:
        shown = table.head(MAX_ROWS)
        self.table.setSortingEnabled(False)  # filling a sorted table moves rows under the loop
        self.table.clearContents()
        self.table.setRowCount(len(shown))
        for i, row in enumerate(shown[[c for c, _ in COLUMNS]].itertuples(index=False)):
            for j, value in enumerate(row):
                self.table.setItem(i, j, _item(COLUMNS[j][0], value))
        self.table.setSortingEnabled(True)
        self.table.sortItems(0, Qt.AscendingOrder)  # by rank: the recommended layout first
        self.table.resizeColumnsToContents()

    def _draw(self) -> None:
        from extradeep.report.layout_figures import heatmap_figure, pareto_figure

        if self.result is None or self.result.table is None:
            return
        self.clear_figure()
        if self.view.currentText() == "heat map":
            heatmap_figure(self.result.table, figure=self.figure)
        else:
            pareto_figure(self.result.table, figure=self.figure)
        self.show_plot()

    def ask_report(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save layout report", "layouts.html", "HTML (*.html)")
        if path:
            self.save_report(path)

    def save_report(self, path) -> None:
        """Write the layout report of the last search in the background (as `layouts --report`)."""
        from extradeep.errors import InputError

        if self.result is None:
            return
        try:
            target = Path(path).resolve()
            if not target.parent.is_dir():
                raise InputError(target, "its folder does not exist")
            _not_an_input(target, self.result.study)  # an unwritable folder fails in the worker, in one line
        except InputError as exc:  # an unwritable path is a message, not a dead window
            self.window.show_error(str(exc))
            return
        self.window.runner.start("layouts-report", _report, self.result, target)


def _not_an_input(target: Path, study) -> None:
    """Refuse a report path that is one of the study's inputs or an existing file in an input folder."""
    from extradeep.errors import InputError

    given = [*study.profiles, *study.tables, study.model, study.hardware]
    inputs = [Path(p).resolve() for p in given if isinstance(p, (str, Path))]
    if target in inputs or (target.exists() and any(p.is_dir() and p in target.parents for p in inputs)):
        raise InputError(target, "is one of the inputs of the search; refusing to overwrite it")


class _Item(QTableWidgetItem):
    """A cell that sorts by its key (numbers as numbers; layouts without a rank last)."""

    def __init__(self, text: str, key):
        super().__init__(text)
        self.key = key

    def __lt__(self, other) -> bool:
        mine, theirs = self.key, getattr(other, "key", None)
        if isinstance(mine, str) != isinstance(theirs, str):
            return isinstance(theirs, str)  # numbers before words
        return mine < theirs


def _item(column: str, value) -> QTableWidgetItem:
    value = value.item() if hasattr(value, "item") else value
    if column == "peak_memory":
        value = float(value) / 2**30
    if column == "rank":
        return _Item(str(value) if value else "-", value or float("inf"))  # 0: outside the limits or unfit
    if column == "pareto":
        return _Item("yes" if value else "", 0 if value else 1)
    if isinstance(value, bool):
        return _Item("yes" if value else "no", int(value))
    if isinstance(value, float):
        return _Item(f"{value:.4g}", value)
    if isinstance(value, int):
        return _Item(str(value), value)
    return _Item(str(value), str(value))


def _run(report, study):
    from extradeep.layout_study import run_layout_study

    return run_layout_study(study, progress=report)


def _report(report, result, path):
    from extradeep.report.layout_html import build_layout_report

    report(0, 1, f"writing {path}")
    return build_layout_report(result, path)
