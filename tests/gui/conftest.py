"""GUI fixtures: a small simulator run (and its saved experiment), a window with throw-away settings."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from pathlib import Path  # noqa: E402

SAMPLE_PROFILES = Path(__file__).resolve().parents[2] / "sample_profiles"


@pytest.fixture(scope="session")
def gui_profiles(tmp_path_factory):
    """40 exports: strong scaling over ranks 2..6, 2 repetitions, DDP-like so it also replays."""
    from extradeep.simulate import simulate

    out = tmp_path_factory.mktemp("gui_profiles")
    sim = simulate(out, params={"ranks": [2, 3, 4, 5, 6]}, repetitions=2, train_steps=3, val_steps=1, seed=3)
    return out, sim


@pytest.fixture(scope="session")
def gui_experiment(gui_profiles, tmp_path_factory):
    """The simulator run read and saved as one experiment file, with its dataset sizes."""
    from extradeep.experiment import Dataset
    from extradeep.ingest import load_experiment

    profiles, sim = gui_profiles
    data = sim.truth["dataset"]
    dataset = Dataset(**data)
    exp = load_experiment([profiles], dataset=dataset, progress=False, use_cache=False, jobs=1)
    path = tmp_path_factory.mktemp("gui_exp") / "exp.sqlite"
    exp.save(path)
    return path


@pytest.fixture
def window(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow

    settings = QSettings(str(tmp_path / "gui.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.runner.cancel_all()
    win.runner.wait(10000)


@pytest.fixture
def open_wait(qtbot):
    """open_wait(window, path): open and wait until reading and modeling are done (or an error shows)."""

    def run(window, path, timeout=30000):
        window.open_path(path)
        qtbot.waitUntil(lambda: window.runner.busy or bool(window.last_error), timeout=timeout)
        qtbot.waitUntil(lambda: not window.runner.busy, timeout=timeout)

    return run


@pytest.fixture
def sample_profiles():
    if not any(SAMPLE_PROFILES.glob("*.sqlite")):
        pytest.skip("sample_profiles/ holds no exports yet")
    return SAMPLE_PROFILES
