"""Starting the desktop GUI (needs the `gui` extra, PySide6): the checks that Qt can run here (PySide6,
a display) before Qt is imported, then the window. `extradeep gui` and `python -m extradeep.gui` both
start it through `launch`; nothing here imports PySide6 at import time, nor the CLI.
"""

from __future__ import annotations

import re
import sys

from extradeep.errors import InputError

HELP = "open the desktop GUI on profiles, a saved experiment or an Extra-P text file"
DESCRIPTION = """Open the desktop GUI: region models, speedup, efficiency, cost, budgets and the predictor.

PATH may be a folder of Nsight Systems exports, an experiment saved with `extradeep model --save`,
or an Extra-P text file. Without PATH, use File > Open. Needs PySide6: pip install 'extradeep[gui]'."""


def add_arguments(parser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        metavar="PROFILES|exp.sqlite|extrap.txt",
        help="what to open: a profiles folder, a saved experiment or an Extra-P text file",
    )


def pyside_problem(pyside_version: str, python: tuple[int, int]) -> str | None:
    """Why this PySide6 cannot run the GUI, or None. PySide6 6.12.0 drops a reference to True on every
    Python Signal.emit; before Python 3.12 (no immortal objects) that crashes the app within minutes."""
    if pyside_version.startswith("6.12.0") and tuple(python) < (3, 12):
        return (
            f"PySide6 {pyside_version} crashes under Python {python[0]}.{python[1]} (a reference-counting "
            "bug in Signal.emit); install another version: pip install 'PySide6>=6.6,!=6.12.0'"
        )
    return None


# Qt platforms that draw without a window system (screenshots, tests, kiosks)
HEADLESS_PLATFORMS = ("offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb")


def display_problem(environ, platform: str) -> str | None:
    """Why Qt would abort for lack of a display (it kills the process with SIGABRT), or None."""
    if not platform.startswith("linux"):
        return None
    chosen = environ.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if chosen in HEADLESS_PLATFORMS or environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        return None
    return (
        "no display: neither DISPLAY nor WAYLAND_DISPLAY is set (log in with `ssh -X`, or use "
        "QT_QPA_PLATFORM=offscreen for screenshots and tests)"
    )


def display_unreachable(environ) -> str | None:
    """Why Qt cannot open the display it was given, or None: DISPLAY may name an X server that is not
    running (a stale `ssh -X` session). Qt would abort the process (SIGABRT), so a child process tries
    first and only its exit status is read."""
    import subprocess

    chosen = environ.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if chosen in HEADLESS_PLATFORMS or not environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        return None
    probe = "from PySide6.QtGui import QGuiApplication; QGuiApplication([])"
    try:
        done = subprocess.run([sys.executable, "-c", probe], env=dict(environ), capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None  # cannot tell: let Qt try
    if done.returncode == 0:
        return None
    return display_failure(environ["DISPLAY"], done.stderr.decode("utf-8", "replace"))


# The X11 libraries Qt's xcb plugin loads beside libxcb (Qt 6.5+ needs xcb-cursor), by distribution
XCB_PACKAGES = (
    "Debian/Ubuntu: sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 "
    "libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0 libegl1; Fedora: sudo dnf install "
    "xcb-util-cursor xcb-util-wm xcb-util-keysyms xcb-util-image xcb-util-renderutil libxkbcommon-x11"
)


def display_failure(display: str, qt_output: str) -> str:
    """One line from what Qt said when it could not start: its own reason, and what to do about it."""
    said = [
        re.sub(r"^qt\.qpa\.\w+:\s*", "", line.strip()).rstrip(". ")
        for line in qt_output.splitlines()
        if line.strip().startswith("qt.qpa") or "connect to display" in line or "cannot open display" in line
    ]
    reason = "; ".join(dict.fromkeys(said))[:300] or "no reason given"
    if "needed" in reason or "Could not load the Qt platform plugin" in reason:
        return (
            f"Qt cannot load its X11 (xcb) platform plugin for DISPLAY={display}: {reason}; install the "
            f"libraries it needs ({XCB_PACKAGES}), or use QT_QPA_PLATFORM=offscreen for screenshots and tests"
        )
    return (
        f"cannot open the display DISPLAY={display} (Qt: {reason}; is the X server running? log in with "
        "`ssh -X`, or use QT_QPA_PLATFORM=offscreen for screenshots and tests)"
    )


def launch(path=None) -> int:
    """Open the GUI on `path` (a profiles folder, a saved experiment, an Extra-P text file, or None);
    a reason it cannot start is one line on stderr and exit status 2, a missing path an InputError."""
    import os

    problem = display_problem(os.environ, sys.platform)
    if problem:
        print(f"extradeep gui: {problem}", file=sys.stderr)
        return 2
    try:
        import PySide6
    except ImportError:
        print("extradeep gui needs PySide6: pip install 'extradeep[gui]'", file=sys.stderr)
        return 2
    problem = pyside_problem(PySide6.__version__, sys.version_info[:2])
    if problem is None and sys.platform.startswith("linux"):
        problem = display_unreachable(os.environ)
    if problem:
        print(f"extradeep gui: {problem}", file=sys.stderr)
        return 2
    from pathlib import Path

    if path is not None and not Path(path).exists():
        raise InputError(path, "no such file or folder")
    from extradeep.gui.app import main

    return main(path=path)


def main(argv: list[str] | None = None) -> int:
    """`python -m extradeep.gui [PATH]`: the same start as `extradeep gui`, errors as one line."""
    import argparse

    from extradeep.processes import one_blas_thread

    one_blas_thread()  # before anything imports NumPy

    parser = argparse.ArgumentParser(
        prog="python -m extradeep.gui", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return launch(args.path)
    except InputError as exc:
        print(f"extradeep: error: {exc}", file=sys.stderr)
        return 2
