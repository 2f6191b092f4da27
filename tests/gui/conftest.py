"""GUI fixtures: sample_profiles/ (simulator output with truth.json) and its saved experiment, and a
window with throw-away settings."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

SAMPLE_PROFILES = Path(__file__).resolve().parents[2] / "sample_profiles"


@pytest.fixture(scope="session", autouse=True)
def gui_cache_home(tmp_path_factory):
    """The ingest cache of this session lives in a temporary folder, not in the user's home."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg_cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="session")
def sample_truth():
    if not any(SAMPLE_PROFILES.glob("*.sqlite")):
        pytest.skip("sample_profiles/ holds no exports")
    return json.loads((SAMPLE_PROFILES / "truth.json").read_text())


@pytest.fixture(scope="session")
def gui_experiment(sample_truth, tmp_path_factory):
    """sample_profiles/ read (into the session's cache, so the GUI reopens it fast) and saved as one
    experiment file with its dataset sizes."""
    from extradeep import load_experiment
    from extradeep.aggregate.experiment import Dataset

    exp = load_experiment([SAMPLE_PROFILES], dataset=Dataset(**sample_truth["dataset"]), progress=False)
    path = tmp_path_factory.mktemp("gui_exp") / "exp.sqlite"
    exp.save(path)
    return path


def wait_until(app, condition, timeout_s: float = 240) -> None:
    # generous: on a shared 2-core machine under load, reading and modeling the samples took over 60 s
    from extradeep.gui.app import process_events_until

    process_events_until(condition, timeout_s)


def open_and_wait(app, window, path, timeout_s: float = 240) -> None:
    """Open `path` and wait until reading and modeling are done (or an error shows)."""
    window.open_path(path)
    wait_until(app, lambda: window.runner.busy or bool(window.last_error), timeout_s)
    wait_until(app, lambda: not window.runner.busy, timeout_s)


def new_window(settings_path):
    from PySide6.QtCore import QSettings

    from extradeep.gui.main_window import MainWindow

    win = MainWindow(settings=QSettings(str(settings_path), QSettings.IniFormat))
    win.show()
    return win


def close_window(win) -> None:
    win.runner.cancel_all()
    win.runner.wait(10000)
    win.close()
    win.deleteLater()


@pytest.fixture
def window(qapp, tmp_path):
    """A fresh window for tests that change what is open."""
    win = new_window(tmp_path / "gui.ini")
    yield win
    close_window(win)


@pytest.fixture(scope="module")
def opened(qapp, gui_experiment, tmp_path_factory):
    """One window with the sample experiment open, shared by the tests of a module that only look,
    select, filter or export (each resets what it changes)."""
    win = new_window(tmp_path_factory.mktemp("gui_settings") / "gui.ini")
    open_and_wait(qapp, win, gui_experiment)
    yield win
    close_window(win)


@pytest.fixture
def open_wait(qapp):
    """open_wait(window, path): open and wait until reading and modeling are done."""
    return lambda window, path: open_and_wait(qapp, window, path)


@pytest.fixture
def settle(qapp):
    """settle(condition): process events until `condition()` holds (60 s at most)."""
    return lambda condition, timeout_s=60: wait_until(qapp, condition, timeout_s)


@pytest.fixture
def sample_profiles(sample_truth):
    return SAMPLE_PROFILES


@pytest.fixture(scope="session")
def bare_profiles(sample_truth, tmp_path_factory):
    """sample_profiles/'s exports without its extradeep.toml (links, so the read cache still applies)."""
    folder = tmp_path_factory.mktemp("bare_profiles")
    for export in SAMPLE_PROFILES.glob("*.sqlite"):
        (folder / export.name).symlink_to(export)
    return folder


def show_page(window, title):
    """Make the tab titled `title` the current one and return it."""
    page = next(p for p in window.tab_pages if p.title == title)
    window.tabs.setCurrentWidget(page)
    return page


@pytest.fixture
def show_tab():
    """show_tab(window, title): switch to that tab and return its page."""
    return show_page
