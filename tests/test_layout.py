"""The package's shape: one-way edges between its rooms, a core without the GUI, a namespaced GUI,
an installed package list that matches the folders, and a root API that resolves."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import extradeep

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "extradeep"
PRESENTATION = {"cli", "gui", "__main__", "__init__"}  # may import anything; nothing in the core imports them


def _imports(path: Path) -> list[str]:
    """Absolute names of the extradeep modules that `path` imports (function-level imports too)."""
    module = "extradeep." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            names.append(".".join(p for p in (base, node.module) if p))
    return names


def _room(path: Path) -> str:
    first = path.relative_to(PACKAGE).parts[0]
    return first.removesuffix(".py")


def unit_graph() -> tuple[dict[str, set[str]], list[str]]:
    """room -> rooms it imports, and the core modules that import the GUI or PySide6."""
    edges: dict[str, set[str]] = {}
    gui_imports = []
    for path in PACKAGE.rglob("*.py"):
        room = _room(path)
        for name in _imports(path):
            if (name.startswith(("extradeep.gui", "PySide6", "gui.")) or name == "gui") and room not in PRESENTATION:
                gui_imports.append(f"{path.relative_to(REPO)} imports {name}")
            if name.startswith("extradeep.") and room not in ("__init__", "__main__"):
                target = name.split(".")[1]
                if target != room:
                    edges.setdefault(room, set()).add(target)
    return edges, gui_imports


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_no_import_cycle_between_packages_and_no_gui_in_the_core():
    edges, gui_imports = unit_graph()
    assert edges, "the walk found no imports at all"
    assert cycles(edges) == []
    assert gui_imports == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_gui_folder_is_imported_as_extradeep_gui_only():
    for path in list((REPO / "gui").rglob("*.py")) + list(PACKAGE.rglob("*.py")) + list((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            assert not [n for n in names if n == "gui" or n.startswith("gui.")], path


def test_installed_packages_match_the_folders():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {
        "extradeep." + ".".join(p.parent.relative_to(PACKAGE).parts) if p.parent != PACKAGE else "extradeep"
        for p in PACKAGE.rglob("__init__.py")
    }
    folders |= {
        "extradeep.gui" + "".join("." + part for part in p.parent.relative_to(REPO / "gui").parts)
        for p in (REPO / "gui").rglob("__init__.py")
    }
    assert listed == folders
    assert config["package-dir"] == {"extradeep.gui": "gui"}
    assert not any(name == "gui" or name.startswith("gui.") for name in listed)


def test_the_installed_distribution_has_no_top_level_gui():
    try:
        dist = importlib.metadata.distribution("extradeep")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("extradeep is not installed (run the tests after `pip install .`)")
    if Path(str(dist.locate_file(""))).resolve() == REPO:
        pytest.skip("found the build's egg-info in the source tree, not an installed distribution")
    files = dist.files or []
    assert not [f for f in files if f.parts and f.parts[0] == "gui"]
    top = dist.read_text("top_level.txt")
    if top is not None:  # editable installs have none
        assert top.split() == ["extradeep"]


def test_the_root_exports_the_pipeline():
    assert {
        "load_experiment",
        "Experiment",
        "Dataset",
        "fit_models",
        "analyse",
        "Analysis",
        "predict",
        "build_report",
        "evaluate",
        "plan_budget",
    } <= set(extradeep.__all__)
    importlib.import_module("extradeep.simulate")  # a subpackage import sets an attribute of the root

    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert not subpackages & set(extradeep.__all__)
    for name in extradeep.__all__:
        value = getattr(extradeep, name)
        assert not isinstance(value, type(sys)), f"extradeep.{name} is a module, not the function or class"
    from extradeep.analysis import analyse

    assert callable(analyse) and analyse is extradeep.analyse
    with pytest.raises(AttributeError):
        extradeep.no_such_name  # noqa: B018


def test_importing_the_core_needs_no_pyside6():
    import subprocess

    code = (
        "import sys; sys.modules['PySide6'] = None; import extradeep as xd; "
        "[getattr(xd, n) for n in xd.__all__]; import extradeep.cli; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_every_model_kind_satisfies_the_model_protocol():
    from extradeep.analysis.communication import CommunicationSum
    from extradeep.analysis.epoch import EpochModel
    from extradeep.analysis.overlap import StepComposition
    from extradeep.modeling import Model, PMNFModeler
    from extradeep.modeling.protocol import PerformanceModel

    x = [2.0, 4, 8, 16, 32]
    model = PMNFModeler().fit(x, [1.0 + 0.5 * v for v in x]).model_
    assert isinstance(model, PerformanceModel)
    for kind in (Model, CommunicationSum, StepComposition, EpochModel):
        missing = [
            m
            for m in ("predict", "interval", "formula", "growth", "growth_key", "to_dict")
            if not callable(getattr(kind, m, None))
        ]
        assert missing == [], kind
