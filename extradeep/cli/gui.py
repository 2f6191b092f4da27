"""`extradeep gui`: the desktop GUI (needs the `gui` extra, PySide6); the checks and the start live
in the GUI's own package (`extradeep.gui.launch`), which `python -m extradeep.gui` uses too."""

from __future__ import annotations

from extradeep.gui.launch import DESCRIPTION, HELP, add_arguments  # noqa: F401 (the subcommand's interface)


def run(args) -> int:
    from extradeep.gui.launch import launch

    return launch(args.path)
