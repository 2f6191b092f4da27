"""The main window: menus, the region tree and controls on the left, the analysis tabs on the right,
and a status bar with progress and Cancel for background work.

Everything slow (reading, modeling, prediction) runs through `TaskRunner`; the UI thread only draws.
Errors from workers or bad files end up in `last_error`, the status bar and a non-blocking dialog.
"""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from extradeep.columns import KIND, METRIC
from extradeep.errors import InputError
from extradeep.gui.app_models import AppModels, fit_application_models
from extradeep.gui.modeling_process import warm_imports
from extradeep.gui.options_panel import OptionsPanel
from extradeep.gui.param_panel import ParamPanel, View
from extradeep.gui.problems_panel import ProblemsDock
from extradeep.gui.region_tree import RegionPanel
from extradeep.gui.tabs import make_tabs
from extradeep.gui.workers import TaskRunner, describe_error
from extradeep.gui.workspace import (
    Workspace,
    apply_models,
    apply_primary,
    fit_region_models,
    open_source,
    primary_rows,
    rank_growth,
)

MAX_RECENT = 8
OPEN_FILTERS = {
    "experiment": "Saved experiments (*.sqlite *.db);;All files (*)",
    "extrap": "Extra-P text files (*.txt);;All files (*)",
}
# The selected region is modeled this long after the tree changed, when Qt has laid it out and
# painted it (with 0 ms, both wanted the GIL at once: 30 ms more stall, measured).
UI_SETTLE_MS = 100


# CSV columns of the model table: (workspace column, header); units in the headers
CSV_COLUMNS = (
    ("region", "region"),
    ("kind", "kind"),
    ("category", "category"),
    ("metric", "metric"),
    ("formula", "formula"),
    ("growth", "growth"),
    ("smape", "smape_percent"),
    ("share", "share_of_group_fraction"),
    ("n_points", "n_points"),
    ("reason", "reason"),
)


def model_table(ws: Workspace):
    """The region models as a table for export: SMAPE in percent, the share as a fraction (0-1) of its
    group at the largest measured point, and the unit of the formula's values."""
    table = ws.regions[[c for c, _ in CSV_COLUMNS]].rename(columns=dict(CSV_COLUMNS))
    units = {"time": "s", "visits": "count", "bytes": "bytes"}
    table.insert(5, "unit", [f"{units.get(m, m)} per {ws.per}" for m in table[METRIC]])
    return table


def checked_output(path: str | Path) -> Path:
    """`path` when a file can be written there, else InputError: checked before any long work."""
    path = Path(path).resolve()
    if not path.parent.is_dir():
        raise InputError(path, "its folder does not exist")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(path, "cannot write here (permission denied)")
    return path


class MainWindow(QMainWindow):
    """The extradeep desktop window."""

    def __init__(self, settings: QSettings | None = None):
        super().__init__()
        self.setWindowTitle("extradeep")
        self.resize(1400, 860)
        self.settings = settings or QSettings("extradeep", "extradeep-gui")
        self.runner = TaskRunner(self)
        self.ws: Workspace | None = None
        self.app_models: AppModels | None = None
        self._app_started = False
        self._options: tuple[dict, int] = ({}, 0)
        self.last_error = ""
        self._progress_message = ""
        self._error_box: QMessageBox | None = None
        self.regions = RegionPanel()
        self.params = ParamPanel()
        self.options = OptionsPanel()
        self.problems = ProblemsDock(self)
        self.addDockWidget(Qt.BottomDockWidgetArea, self.problems)
        self.problems.hide()
        self.tabs = QTabWidget()
        # The layout (GPUs per node, nodes per configuration) and warnings about the application models
        # (one node only, poor fits), under the plots where the answers are read.
        self.app_notes = QLabel(wordWrap=True, visible=False)
        self.app_notes.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.app_notes.setMargin(4)
        self.tab_pages = make_tabs(self)
        for page in self.tab_pages:
            self.tabs.addTab(page, page.title)
        self._build_layout()
        self._build_status_bar()
        self._build_menus()
        self.regions.selection_changed.connect(lambda *_: self.refresh_current())
        self.regions.metric_changed.connect(lambda *_: self.refresh_current())
        self.params.changed.connect(self.refresh_current)
        self.options.changed.connect(self.remodel)
        self.tabs.currentChanged.connect(lambda *_: self.refresh_current())
        self.runner.busy_changed.connect(self._busy)
        self.runner.progress.connect(self._progress)
        self.runner.failed.connect(lambda slot, msg: self.show_error(msg))
        self.runner.cancelled.connect(lambda slot: self.statusBar().showMessage(f"{slot}: cancelled", 5000))
        self.runner.start("warm-up", warm_imports)

    # --- layout
    def _build_layout(self) -> None:
        left = QWidget()
        box = QVBoxLayout(left)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.regions, 1)
        for title, panel in (("Parameters", self.params), ("Modeler options", self.options)):
            group = QGroupBox(title)
            QVBoxLayout(group).addWidget(panel)
            box.addWidget(group)
        right = QWidget()
        right_box = QVBoxLayout(right)
        right_box.setContentsMargins(0, 0, 0, 0)
        right_box.addWidget(self.tabs, 1)
        right_box.addWidget(self.app_notes)
        split = QSplitter(Qt.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([620, 880])
        self.setCentralWidget(split)

    def _build_status_bar(self) -> None:
        self.progress = QProgressBar(maximumWidth=220, visible=False)
        self.cancel_button = QPushButton("Cancel", visible=False)
        self.cancel_button.clicked.connect(self.runner.cancel_all)
        self.source_label = QLabel()
        bar = self.statusBar()
        bar.addPermanentWidget(self.problems.button)
        bar.addPermanentWidget(self.source_label)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)

    def _build_menus(self) -> None:
        menu = self.menuBar().addMenu("&File")
        self._action(menu, "Open &profiles folder…", self.ask_open_profiles, QKeySequence.Open)
        self._action(menu, "Open saved &experiment…", lambda: self._ask_open_file("experiment"))
        self._action(menu, "Open Extra-P &text…", lambda: self._ask_open_file("extrap"))
        self.recent_menu = menu.addMenu("Open &recent")
        self._fill_recent_menu()
        # Actions on the open input: disabled while nothing is open (see _loaded).
        self.input_actions = [self._action(menu, "&Dataset sizes (values per epoch)…", self.ask_dataset)]
        menu.addSeparator()
        self.input_actions += [
            self._action(menu, "Export &plot (PNG, SVG, PDF)…", self.ask_export_plot),
            self._action(menu, "Export model &table (CSV)…", self.ask_export_csv),
            self._action(menu, "Export &HTML report…", self.ask_export_report),
        ]
        for action in self.input_actions:
            action.setEnabled(False)
        menu.addSeparator()
        self._action(menu, "&Quit", self.close, QKeySequence.Quit)
        view = self.menuBar().addMenu("&View")
        # Window-wide, so they work wherever the focus is (QTabWidget's own only work inside it).
        self._action(view, "&Next tab", lambda: self._step_tab(1), QKeySequence("Ctrl+Tab"))
        self._action(view, "&Previous tab", lambda: self._step_tab(-1), QKeySequence("Ctrl+Shift+Tab"))
        view.addAction(self.problems.toggleViewAction())

    def _step_tab(self, step: int) -> None:
        self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % self.tabs.count())

    def _action(self, menu, text, slot, shortcut=None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(lambda *_: slot())
        menu.addAction(action)
        return action

    # --- opening
    def ask_open_profiles(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a folder of Nsight Systems exports")
        if path:
            self.open_path(path)

    def _ask_open_file(self, kind: str) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open", "", OPEN_FILTERS[kind])
        if path:
            self.open_path(path)

    def open_path(self, path: str | Path, dataset=None) -> None:
        """Read an input in the background, as `extradeep model PATH` reads it (a folder with the
        settings of its extradeep.toml); `dataset` (an extradeep.Dataset) replaces its dataset sizes.
        The window switches to it once it is read."""
        path = Path(path).resolve()
        self.statusBar().showMessage(f"Opening {path}…")
        self.runner.start("load", open_source, path, dataset, on_done=self._loaded)

    def ask_dataset(self) -> None:
        from extradeep.gui.dataset_dialog import DatasetDialog

        if self.ws is None or self.ws.source_kind == "extrap":
            self.show_error("Dataset sizes apply to profiles and saved experiments: open one first.")
            return
        dialog = DatasetDialog(self.ws.dataset, self)
        if dialog.exec():
            self.set_dataset(dialog.dataset())

    def set_dataset(self, dataset) -> None:
        """Reopen the open input with these dataset sizes (an extradeep.Dataset), so values are per epoch."""
        if self.ws is not None and self.ws.source_kind != "extrap":
            self.open_path(self.ws.source, dataset)

    def _loaded(self, ws: Workspace) -> None:
        gc.unfreeze()  # what belonged to the input open before may now be collected
        self.ws = ws
        self.app_models = None
        self.show_app_notes([])
        self.remember_recent(ws.source)
        self.source_label.setText(
            f"{ws.source.name}: {len(ws.regions)} region models per {ws.per}, params {', '.join(ws.params)}"
        )
        self.setWindowTitle(f"extradeep: {ws.source.name}")
        self.params.set_workspace(ws)
        self.regions.show_workspace(ws)
        if ws.options:  # the input's own options, as `extradeep model` uses them
            self.options.set_options(ws.options)
        first = self._default_rows(ws)
        self.regions.select_rows(first)
        self.source_label.setToolTip("\n".join(ws.notes))
        self.problems.set_problems(ws.problems)
        for action in self.input_actions:
            action.setEnabled(True)
        note = f" ({ws.notes[0]}{'; more in the tooltip here' if len(ws.notes) > 1 else ''})" if ws.notes else ""
        self.statusBar().showMessage(f"Opened {ws.source}{note}", 10000)
        self.remodel(first_rows=first)

    def _default_rows(self, ws: Workspace) -> list[int]:
        rows = ws.rows_for_metric(self.regions.metric or "time")
        steps = rows.index[rows[KIND].to_numpy() == "step"]
        if len(steps):
            return [int(steps[0])]
        return [int(rows["share"].fillna(-1).idxmax())] if len(rows) else []

    # --- modeling
    def remodel(self, first_rows: list[int] | None = None) -> None:
        if self.ws is None:
            return
        options = self.modeler_options()
        if options is None:
            return
        first = first_rows if first_rows is not None else self.regions.selected_rows()
        self._options = (options, self.options.n_eval.value())
        self.runner.cancel("application")  # its models would belong to the old input or options
        self.app_models = None
        self._app_started = False
        ui_settled = threading.Event()
        QTimer.singleShot(UI_SETTLE_MS, ui_settled.set)  # once the UI has laid out and painted the new tree
        self.runner.start(
            "model",
            fit_region_models,
            self.ws,
            options,
            self._options[1],
            self.regions.metric or "time",
            first,
            ui_settled,
            on_partial=self._models_arrived,
            on_done=self._models_done,
        )

    def modeler_options(self) -> dict | None:
        """The modeler part of the options panel's AnalysisOptions; None, with the problem shown at
        its widget and in a dialog, when the library refuses a value."""
        try:
            return self.options.options().modeler
        except InputError as exc:
            self.options.show_problem(exc)
            self.show_error(self.options.problem_text(exc))
            return None

    def _start_application(self) -> None:
        # Started after the first chunk, so the first plot does not wait for it.
        self._app_started = True
        self.runner.start(
            "application", fit_application_models, self.ws, *self._options, on_done=self._application_done
        )

    def _application_done(self, app: AppModels | None) -> None:
        self.app_models = app
        self.show_app_notes(app.notes if app is not None else [])
        # the measured step time's row shows the primary time model: one answer in every view
        changed = apply_primary(self.ws, app.primary.model if app is not None and app.primary else None)
        if changed:
            rank_growth(self.ws)
            self.regions.model.models_changed()
            if set(changed) & set(self.regions.selected_rows()) and self.tabs.currentWidget() is self.tab_pages[0]:
                self.refresh_current()
        self.refresh_current(because="app")

    def show_app_notes(self, notes: list[str]) -> None:
        """The application models' notes under the tabs, warnings first and in bold."""
        import html

        warnings = [n for n in notes if n.startswith("WARNING")]
        lines = [f"<b style='color:#a00'>{html.escape(n)}</b>" for n in warnings]
        lines += [html.escape(n) for n in notes if n not in warnings]
        self.app_notes.setText("<br>".join(lines))
        self.app_notes.setVisible(bool(lines))

    def _models_arrived(self, part: dict) -> None:
        if self.ws is None:
            return
        changed = apply_models(self.ws, part)
        if self.app_models is not None and self.app_models.primary is not None:  # arrived first: it stays
            changed += apply_primary(self.ws, self.app_models.primary.model)
        # Thousands of models live as long as the input is open: without this, Python's full
        # collections scan them all again and again, 100-170 ms on the UI thread each (profiled).
        gc.freeze()
        self.regions.model.models_changed()
        if set(changed) & set(self.regions.selected_rows()):
            self.refresh_current()
        if not self._app_started:
            self._start_application()

    def _models_done(self, count: int) -> None:
        pending = set(primary_rows(self.ws)) if self.app_models is None else set()  # the primary model comes later
        failed = sum(1 for r, m in self.ws.models.items() if m is None and r not in pending)
        self.statusBar().showMessage(
            f"Modeled {count - failed} of {count} regions"
            + (f"; {failed} without a model (see the tooltips)" if failed else ""),
            8000,
        )
        rank_growth(self.ws)
        self.regions.model.models_changed()
        self.regions.apply_sort(self.regions.sort_combo.currentText())
        for page in self.tab_pages:
            page.models_changed()
        self.refresh_current(because="models")

    # --- drawing
    def current_view(self) -> View:
        view = View(
            ws=self.ws,
            metric=self.regions.metric or "time",
            rows=self.regions.selected_rows(),
            n_eval=self.options.n_eval.value(),
            app=self.app_models,
        )
        if self.ws is not None:
            self.params.fill(view)
        return view

    def refresh_current(self, because: str | None = None) -> None:
        """Redraw the shown tab (only if it depends on `because`, when given)."""
        page = self.tabs.currentWidget()
        if self.ws is None or page is None or (because is not None and because not in page.redraw_on):
            return
        try:
            page.refresh(self.current_view())
        except Exception as exc:  # a failed plot is a message, not a dead window
            page.show_message(f"Cannot draw this view: {describe_error(exc)}")
            self.show_error(describe_error(exc), dialog=False)

    # --- status and errors
    def _busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        if not busy and self.statusBar().currentMessage() == self._progress_message:
            self.statusBar().clearMessage()  # the work it described is done

    def _progress(self, done: int, total: int, message: str) -> None:
        self.progress.setMaximum(max(total, 0))
        self.progress.setValue(min(done, total) if total else 0)
        if message:
            self._progress_message = message
            self.statusBar().showMessage(message)

    def show_error(self, message: str, dialog: bool = True) -> None:
        """Show a problem without blocking: status bar, plus a non-modal dialog."""
        self.last_error = message
        self.statusBar().showMessage(message, 15000)
        if not dialog:
            return
        if self._error_box is None:
            self._error_box = QMessageBox(QMessageBox.Warning, "extradeep", "", QMessageBox.Ok, self)
            self._error_box.setModal(False)
        self._error_box.setText(message)
        self._error_box.show()

    # --- recent files
    def recent_paths(self) -> list[str]:
        value = self.settings.value("recent", [])
        return [value] if isinstance(value, str) else list(value or [])

    def remember_recent(self, path: Path) -> None:
        paths = [str(path)] + [p for p in self.recent_paths() if p != str(path)]
        self.settings.setValue("recent", paths[:MAX_RECENT])
        self._fill_recent_menu()

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        for path in self.recent_paths():
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda *_, p=path: self.open_path(p))
        self.recent_menu.setEnabled(bool(self.recent_paths()))

    # --- export
    def ask_export_plot(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export plot", "plot.png", "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)")
        if path:
            self.export_plot(path)

    def export_plot(self, path: str | Path) -> Path | None:
        page = self.tabs.currentWidget()
        try:
            out = page.export(path)
        except (InputError, OSError, ValueError) as exc:
            self.show_error(describe_error(exc))
            return None
        self.statusBar().showMessage(f"Saved {out}", 5000)
        return out

    def ask_export_csv(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export model table", "models.csv", "CSV (*.csv)")
        if path:
            self.export_csv(path)

    def export_csv(self, path: str | Path) -> Path | None:
        if self.ws is None:
            self.show_error("Nothing is open to export.")
            return None
        try:
            model_table(self.ws).to_csv(path, index=False)
        except OSError as exc:
            self.show_error(describe_error(exc))
            return None
        self.statusBar().showMessage(f"Saved {path}", 5000)
        return Path(path)

    def ask_export_report(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export HTML report", "report.html", "HTML (*.html)")
        if path:
            self.export_report(path)

    def export_report(self, path: str | Path) -> None:
        """Write the budgeting report in the background, with the modeler options and the Cost tab's
        cores per rank, deadline and budget."""
        from extradeep.gui.report_export import ReportRequest, write_report

        if self.ws is None:
            self.show_error("Nothing is open to export.")
            return
        cost = next(p for p in self.tab_pages if p.title == "Cost")
        limits = cost.limits() if cost.result is not None else (None, None)
        modeler = self.modeler_options()  # the options the open models were made with
        if modeler is None:
            return
        try:
            request = ReportRequest(checked_output(path), modeler, cost.cores.value(), *limits)
        except InputError as exc:
            self.show_error(str(exc))
            return
        self.runner.start(
            "report",
            write_report,
            self.ws,
            request,
            on_done=lambda out: self.statusBar().showMessage(f"Saved {out}", 5000),
        )

    def closeEvent(self, event) -> None:
        self.runner.cancel_all()
        self.runner.wait(5000)
        super().closeEvent(event)
