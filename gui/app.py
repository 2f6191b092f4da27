"""Start the GUI: the QApplication, an exception hook that keeps the window alive, and the main window."""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

from PySide6.QtWidgets import QApplication

from extradeep.gui.main_window import MainWindow
from extradeep.gui.workers import describe_error


def process_events_until(condition, timeout_s: float = 60.0, pause_s: float = 0.002) -> None:
    """Run Qt's event loop until `condition()` holds (for scripts, tests and benchmarks driving the
    window); raises TimeoutError after `timeout_s`."""
    app = QApplication.instance()
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("the window did not get there in time")
        app.processEvents()
        time.sleep(pause_s)


def install_excepthook(window: MainWindow) -> None:
    """Report uncaught exceptions from Qt callbacks in the window instead of ending the app."""
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, KeyboardInterrupt):
            previous(exc_type, exc, tb)
            return
        traceback.print_exception(exc_type, exc, tb)
        window.show_error(describe_error(exc))

    sys.excepthook = hook


def main(path: str | Path | None = None) -> int:
    """Open the window (and `path` if given) and run the event loop; returns the exit status.
    Start it with `extradeep gui` (or `python -m gui`), which checks the PySide6 install first."""
    app = QApplication.instance() or QApplication(["extradeep"])
    app.setApplicationName("extradeep")
    app.setOrganizationName("extradeep")
    window = MainWindow()
    install_excepthook(window)
    window.show()
    if path is not None:
        window.open_path(path)
    return app.exec()
