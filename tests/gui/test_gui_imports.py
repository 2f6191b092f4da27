"""The GUI is a client of the library (issue 16): it imports extradeep's root API and documented
submodules, never the CLI, and its modules form no import circle."""

from __future__ import annotations

import ast
from pathlib import Path

GUI = Path(__file__).resolve().parents[2] / "gui"
# `python -m extradeep.gui` is `extradeep gui`: the launcher runs the CLI command on purpose.
LAUNCHER = "__main__.py"


def imports_of(path: Path) -> set[str]:
    """Every module a file imports (at the top or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def gui_modules() -> dict[str, set[str]]:
    modules = {}
    for path in sorted(GUI.rglob("*.py")):
        if path.name == LAUNCHER:
            continue
        name = ".".join(("extradeep.gui", *path.relative_to(GUI).with_suffix("").parts)).removesuffix(".__init__")
        modules[name] = imports_of(path)
    return modules


def test_the_gui_never_imports_the_cli():
    offenders = {m: sorted(i for i in imps if i.startswith("extradeep.cli")) for m, imps in gui_modules().items()}
    assert {m: i for m, i in offenders.items() if i} == {}


def test_gui_modules_form_no_import_circle():
    modules = gui_modules()
    edges = {m: {i for i in imps if i in modules and i != m} for m, imps in modules.items()}

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, (*seen, n))) for n in edges[start])

    circles = sorted(m for m in modules if reaches(m, m))
    assert circles == []
