"""Background tasks: results, errors and Cancel reach the UI thread through signals."""

import threading

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from extradeep.errors import InputError  # noqa: E402
from extradeep.gui.workers import TaskRunner  # noqa: E402


def _wait(qtbot, runner):
    qtbot.waitUntil(lambda: not runner.busy, timeout=10000)


def test_result_and_progress_arrive_on_the_ui_thread(qtbot):
    runner = TaskRunner()
    seen, progress = [], []
    ui_thread = threading.get_ident()
    runner.progress.connect(lambda d, t, m: progress.append((d, t, threading.get_ident())))

    def work(report, n):
        for i in range(n):
            report(i + 1, n, "step")
        return threading.get_ident()

    runner.start("job", work, 3, on_done=seen.append)
    _wait(qtbot, runner)
    assert len(seen) == 1 and seen[0] != ui_thread  # it ran elsewhere
    assert [p[:2] for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert all(p[2] == ui_thread for p in progress)


def test_input_error_becomes_one_line_and_other_errors_name_their_type(qtbot):
    runner = TaskRunner()
    errors = []
    runner.failed.connect(lambda slot, msg: errors.append((slot, msg)))

    def bad_input(report):
        raise InputError("x.sqlite", "not an SQLite file")

    def bug(report):
        raise ZeroDivisionError("division by zero")

    runner.start("a", bad_input)
    runner.start("b", bug)
    _wait(qtbot, runner)
    assert ("a", "x.sqlite: not an SQLite file") in errors
    assert ("b", "ZeroDivisionError: division by zero") in errors


def test_cancel_stops_at_the_next_report_and_drops_the_result(qtbot):
    runner = TaskRunner()
    started, results, cancelled = threading.Event(), [], []
    runner.cancelled.connect(cancelled.append)

    def slow(report):
        started.set()
        for i in range(10_000):
            report(i, 10_000)
            threading.Event().wait(0.001)
        return "finished"

    runner.start("slow", slow, on_done=results.append)
    started.wait(5)
    runner.cancel_all()
    _wait(qtbot, runner)
    assert results == [] and cancelled == ["slow"]


def test_a_newer_task_in_the_same_slot_replaces_the_older_one(qtbot):
    runner = TaskRunner()
    results = []
    gate = threading.Event()

    def first(report):
        gate.wait(5)
        return "old"

    runner.start("slot", first, on_done=results.append)
    runner.start("slot", lambda report: "new", on_done=results.append)
    gate.set()
    _wait(qtbot, runner)
    assert results == ["new"]


def test_an_error_in_the_result_handler_is_reported_not_raised(qtbot):
    runner = TaskRunner()
    errors = []
    runner.failed.connect(lambda slot, msg: errors.append(msg))

    def handler(result):
        raise KeyError("missing")

    runner.start("job", lambda report: 1, on_done=handler)
    _wait(qtbot, runner)
    assert errors == ["KeyError: 'missing'"]


def test_cancelling_a_slot_drops_its_result(qtbot):
    runner = TaskRunner()
    gate, results = threading.Event(), []
    runner.start("slot", lambda report: gate.wait(5) and "late", on_done=results.append)
    runner.cancel("slot")
    gate.set()
    _wait(qtbot, runner)
    assert results == []
