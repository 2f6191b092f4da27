"""`extradeep gui` where Qt cannot open a display: no display at all, a display nobody serves, and a
desktop without the X11 libraries Qt's xcb plugin needs. Each is one line (exit 2) instead of Qt's
abort (SIGABRT), with what to do about it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def gui(drop: tuple[str, ...], cwd, **env) -> subprocess.CompletedProcess:
    """`extradeep gui` in a fresh process, without the variables `drop`, with `env` set."""
    environ = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [sys.executable, "-m", "extradeep", "gui"],
        env={**environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_gui_without_a_display_says_so_instead_of_aborting(tmp_path):
    proc = gui(("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"), REPO)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)  # not -6 (SIGABRT)
    assert "QT_QPA_PLATFORM=offscreen" in proc.stderr and "Traceback" not in proc.stderr


def test_gui_with_a_display_nobody_serves_says_so_instead_of_aborting(tmp_path):
    pytest.importorskip("PySide6")
    if Path("/tmp/.X11-unix/X97").exists():
        pytest.skip("an X server answers on :97 here")
    # a stale `ssh -X` session: DISPLAY set, but no X server behind it
    proc = gui(("WAYLAND_DISPLAY", "QT_QPA_PLATFORM"), REPO, DISPLAY=":97")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)  # not -6 (SIGABRT)
    assert "DISPLAY=:97" in proc.stderr and "QT_QPA_PLATFORM=offscreen" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_gui_without_the_xcb_libraries_relays_qt_and_names_the_packages(tmp_path):
    """A desktop without libxcb-cursor0 (Qt 6.5+ needs it for X11): the X server runs, so the line must
    relay Qt's own reason and name the packages, not ask whether the X server runs. The library is
    hidden by a file of its name, that is no library, first on the loader's path."""
    pytest.importorskip("PySide6")
    (tmp_path / "libxcb-cursor.so.0").write_text("not a library\n")
    proc = gui(("WAYLAND_DISPLAY", "QT_QPA_PLATFORM"), tmp_path, DISPLAY=":97", LD_LIBRARY_PATH=str(tmp_path))
    if "xcb-cursor0" not in proc.stderr:
        pytest.skip(f"this PySide6's xcb plugin does not need libxcb-cursor: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    line = proc.stderr.strip()
    assert "Qt cannot load its X11 (xcb) platform plugin" in line and "is the X server running" not in line
    assert "apt-get install libxcb-cursor0" in line and "dnf install xcb-util-cursor" in line
