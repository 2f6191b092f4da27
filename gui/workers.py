"""Background work for the GUI: run a function off the UI thread with progress, Cancel and clear errors.

The function gets a `report(done, total, message)` callback as its first argument. Calling it sends
progress to the UI and raises `Cancelled` once the user pressed Cancel, so long loops stop at the
next report. Results and errors come back to the UI thread through queued Qt signals; a worker never
touches widgets.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from extradeep.errors import InputError
from extradeep.processes import stopping

UI_WAIT_S = 2.0  # longest pause of a worker for the UI to handle a partial result
RETIRE_S = 1.0  # finished tasks are dropped this long after their run() returned


class Cancelled(Exception):
    """Raised inside a worker by `report` after the user pressed Cancel."""


def describe_error(exc: BaseException) -> str:
    """One line for the user: InputError text as is, anything else with its type name."""
    if isinstance(exc, InputError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class _TaskSignals(QObject):
    progress = Signal(int, int, str)
    partial = Signal(object)
    done = Signal(object)
    failed = Signal(str)
    cancelled = Signal()


class Task(QRunnable):
    """One call of `fn(report, *args)` on a pool thread, reporting through Qt signals."""

    def __init__(self, fn: Callable, *args):
        super().__init__()
        self.setAutoDelete(False)
        self.fn = fn
        self.args = args
        self.signals = _TaskSignals()
        self._cancel = threading.Event()
        self.handled = threading.Event()  # set by the UI thread after it handled a partial result
        self.finished_at: float | None = None  # when run() returned (the pool thread is done with it)

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def is_cancelled(self) -> bool:
        return self._cancel.is_set()

    def report(
        self, done: int = 0, total: int = 0, message: str = "", partial: object = None, wait_for_ui: bool = False
    ) -> None:
        """Progress, and optionally a partial result for the UI to show early; with `wait_for_ui`,
        pause until the UI has handled it (so its first plot does not compete for the GIL).
        Raises Cancelled once the user pressed Cancel."""
        if self._cancel.is_set():
            raise Cancelled()
        self.signals.progress.emit(int(done), int(total), str(message))
        if partial is not None:
            self.handled.clear()
            self.signals.partial.emit(partial)
            if wait_for_ui:
                self.handled.wait(UI_WAIT_S)

    def run(self) -> None:
        try:
            self._run()
        except RuntimeError:  # "Signal source has been deleted": the window is gone, no one to tell
            pass
        finally:
            self.finished_at = time.monotonic()

    def _run(self) -> None:
        try:
            result = self.fn(self.report, *self.args)
        except Cancelled:
            self.signals.cancelled.emit()
        except Exception as exc:  # a worker must never take the window down
            if self._cancel.is_set() or stopping():  # the app is closing: its worker processes were ended
                self.signals.cancelled.emit()
                return
            if not isinstance(exc, InputError):
                traceback.print_exc()
            self.signals.failed.emit(describe_error(exc))
        else:
            if self._cancel.is_set():
                self.signals.cancelled.emit()
            else:
                self.signals.done.emit(result)


class TaskRunner(QObject):
    """Starts tasks in named slots; a new task in a slot cancels the old one, whose result is dropped.

    `busy_changed(bool)` and `progress(done, total, message)` drive the status bar; `failed(slot,
    message)` reports errors. Only the newest task of a slot calls its `on_done`.
    """

    busy_changed = Signal(bool)
    progress = Signal(int, int, str)
    failed = Signal(str, str)
    cancelled = Signal(str)

    def __init__(self, parent: QObject | None = None, max_threads: int = 2):
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        self._current: dict[str, Task] = {}
        self._running: set[Task] = set()
        # Finished tasks are kept a little longer: their QRunnable and signals must outlive the pool
        # thread's return from run(), which comes after the last signal the UI handled.
        self._retired: list[Task] = []

    @property
    def busy(self) -> bool:
        return bool(self._running)

    def start(
        self, slot: str, fn: Callable, *args, on_done: Callable | None = None, on_partial: Callable | None = None
    ) -> Task:
        old = self._current.get(slot)
        if old is not None:
            old.cancel()
        now = time.monotonic()
        self._retired = [t for t in self._retired if t.finished_at is None or now - t.finished_at < RETIRE_S]
        task = Task(fn, *args)
        self._current[slot] = task
        was_busy = self.busy
        self._running.add(task)
        sig = task.signals
        sig.progress.connect(lambda d, t, m, task=task: self._on_progress(slot, task, d, t, m))
        sig.done.connect(lambda result, task=task: self._finish(slot, task, on_done, result))
        sig.partial.connect(lambda part, task=task: self._guarded(slot, task, on_partial, part))
        sig.failed.connect(lambda msg, task=task: self._finish(slot, task, None, None, msg))
        sig.cancelled.connect(lambda task=task: self._finish(slot, task, None, None, cancelled=True))
        self.pool.start(task)
        if not was_busy:
            self.busy_changed.emit(True)
        return task

    def cancel(self, slot: str) -> None:
        """Cancel the slot's task; its result, if it still comes, is dropped."""
        task = self._current.pop(slot, None)
        if task is not None:
            task.cancel()

    def cancel_all(self) -> None:
        for task in list(self._running):
            task.cancel()

    def wait(self, msecs: int = 30000) -> bool:
        return self.pool.waitForDone(msecs)

    def _on_progress(self, slot: str, task: Task, done: int, total: int, message: str) -> None:
        if self._current.get(slot) is task:
            self.progress.emit(done, total, message)

    def _guarded(self, slot: str, task: Task, fn: Callable | None, value: object) -> None:
        try:
            if fn is not None and self._current.get(slot) is task:
                fn(value)
        except Exception as exc:
            traceback.print_exc()
            self.failed.emit(slot, describe_error(exc))
        finally:
            task.handled.set()

    def _finish(self, slot, task, on_done, result, error: str | None = None, cancelled: bool = False):
        self._running.discard(task)
        cancelled = cancelled or (task.is_cancelled and error is None)  # Cancel wins over a late result
        task.fn, task.args = None, ()  # let go of workspaces early; the shell stays retired a while
        self._retired.append(task)
        is_current = self._current.get(slot) is task
        if is_current:
            del self._current[slot]
        try:
            if is_current and error is not None:
                self.failed.emit(slot, error)
            elif is_current and cancelled:
                self.cancelled.emit(slot)
            elif is_current and on_done is not None:
                on_done(result)
        except Exception as exc:  # a bad result must show as an error, not end the app
            traceback.print_exc()
            self.failed.emit(slot, describe_error(exc))
        finally:
            if not self.busy:
                self.busy_changed.emit(False)
