"""`extradeep gui`: the desktop GUI (needs the `gui` extra, PySide6)."""

from __future__ import annotations

import sys

from extradeep.errors import InputError

HELP = "open the desktop GUI on profiles, a saved experiment or an Extra-P text file"
DESCRIPTION = """Open the desktop GUI: region models, speedup, efficiency, cost, budgets and the predictor.

PATH may be a folder of Nsight Systems exports, an experiment saved with `extradeep model --save`,
or an Extra-P text file. Without PATH, use File > Open. Needs PySide6: pip install 'extradeep[gui]'."""


def add_arguments(parser) -> None:
    parser.add_argument("path", nargs="?", metavar="PROFILES|exp.sqlite|extrap.txt",
                        help="what to open: a profiles folder, a saved experiment or an Extra-P text file")


def run(args) -> int:
    try:
        import PySide6  # noqa: F401  (only to check that the extra is installed)
    except ImportError:
        print("extradeep gui needs PySide6: pip install 'extradeep[gui]'", file=sys.stderr)
        return 2
    from pathlib import Path

    if args.path is not None and not Path(args.path).exists():
        raise InputError(args.path, "no such file or folder")
    from gui.app import main

    return main(path=args.path)
