"""Start the GUI: the QApplication, an exception hook that keeps the window alive, and the main window."""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from extradeep.gui.main_window import MainWindow
from extradeep.gui.workers import describe_error
from extradeep.processes import start_helpers, stop_all


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
        try:
            window.show_error(describe_error(exc))
        except RuntimeError:  # the window is already gone (the app is closing)
            pass

    sys.excepthook = hook


def quit_on_signals(app: QApplication, received: list[int]) -> QTimer:
    """SIGTERM, SIGINT and SIGHUP close the windows and end the event loop, as closing the window
    does; the signal is appended to `received`. Python runs signal handlers only between bytecodes,
    never inside Qt's loop: the returned timer (keep it) wakes the interpreter every 200 ms."""
    import signal

    def close(signum, frame):
        received.append(signum)
        stop_all()  # first: a task waiting on a worker process returns at once, so the window closes fast
        app.closeAllWindows()
        QTimer.singleShot(0, app.quit)  # also when the loop has not started yet (quit() would be lost)

    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), close)
    timer = QTimer()
    timer.timeout.connect(lambda: None)
    timer.start(200)
    return timer


def main(path: str | Path | None = None) -> int:
    """Open the window (and `path` if given) and run the event loop; returns the exit status.
    Start it with `extradeep gui` (or `python -m gui`), which checks the PySide6 install first."""
    app = QApplication.instance() or QApplication(["extradeep"])
    app.setApplicationName("extradeep")
    app.setOrganizationName("extradeep")
    received: list[int] = []
    waker = quit_on_signals(app, received)
    start_helpers()  # from the main thread, so that worker processes ignore the terminal's Ctrl-C
    window = MainWindow()
    install_excepthook(window)
    window.show()
    if path is not None:
        window.open_path(path)
    try:
        status = app.exec()
    finally:
        waker.stop()
        stop_all()  # no worker process outlives the window
    return 128 + received[0] if received else status  # as a shell reports a command a signal ended
