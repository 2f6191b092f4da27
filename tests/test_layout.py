"""The package's shape: the package order as data (allowed and forbidden imports between rooms, no cycle),
a core without the GUI, a namespaced GUI, an installed package list that matches the folders, and a root
API that resolves."""

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
ARCHITECTURE = REPO / "docs" / "architecture.md"

# The package order as data (docs/architecture.md, "Package order", shows the same tables; a test
# compares them). Every import counts, also those inside functions; the root-level gui/ folder is
# `extradeep.gui`. Rooms are matched by module prefix, the first match wins.
IO_BASE = (
    *("categories", "formats", "frames", "inspect", "naming", "placement", "replay", "settings", "sqlite"),
    *("step_conventions", "steps", "sums"),
)
ROOMS = [
    ("io-nsys", ("extradeep.io.nsys",)),
    ("io-kineto", ("extradeep.io.kineto",)),
    ("io-base", tuple(f"extradeep.io.{name}" for name in IO_BASE)),
    ("io-parallel", ("extradeep.io.parallel",)),
    ("io", ("extradeep.io",)),
    ("aggregate", ("extradeep.aggregate",)),
    ("modeling", ("extradeep.modeling",)),
    ("layouts", ("extradeep.layouts",)),
    ("analysis", ("extradeep.analysis",)),
    ("predictor", ("extradeep.predictor",)),
    ("report", ("extradeep.report",)),
    ("capture", ("extradeep.capture",)),
    ("simulate", ("extradeep.simulate",)),
    ("pipeline", ("extradeep.pipeline",)),
    ("layout-study", ("extradeep.layout_study", "extradeep.layout_profiles")),
    ("workflows", ("extradeep.workflows",)),
    ("system", ("extradeep.system",)),
    ("columns", ("extradeep.columns",)),
    ("errors", ("extradeep.errors",)),
    ("cli", ("extradeep.cli", "extradeep.__main__")),
    ("gui", ("extradeep.gui",)),
    ("root", ("extradeep",)),  # the package root: its version and the public names, imported on first use
]
LEAVES = {"errors", "columns", "root"}  # every room may import these
ALLOWED = {  # room -> the other rooms it may import (besides LEAVES); any other import fails the test
    "errors": set(),
    "columns": set(),
    "root": set(),
    "system": set(),
    "io-base": set(),
    "io-nsys": {"io-base"},
    "io-kineto": {"io-base"},
    "io": {"io-base", "io-nsys", "io-kineto"},
    "io-parallel": {"io", "io-base", "io-nsys", "io-kineto"},
    "modeling": {"system"},
    "layouts": {"system"},
    "aggregate": {"io", "io-base", "io-nsys"},
    "analysis": {"aggregate", "modeling", "io", "io-base", "system"},
    "predictor": {"aggregate", "modeling", "io", "io-base", "io-nsys", "system"},
    "report": {"analysis", "aggregate", "modeling", "layouts", "predictor", "io", "io-base", "system"},
    "capture": {"io-base"},
    "simulate": {
        "analysis",
        "aggregate",
        "modeling",
        "predictor",
        "pipeline",
        "io",
        "io-base",
        "io-parallel",
        "system",
    },
    "pipeline": {"aggregate", "io", "io-base", "predictor", "system"},
    "layout-study": {"layouts", "io", "io-parallel", "system"},
    "workflows": {
        *("pipeline", "layout-study", "aggregate", "modeling", "layouts", "analysis", "predictor", "report"),
        *("capture", "simulate", "io", "io-base", "io-nsys", "io-kineto", "io-parallel", "system"),
    },
    "gui": {
        "workflows",
        "pipeline",
        "layout-study",
        "aggregate",
        "modeling",
        "analysis",
        "predictor",
        "report",
        "capture",
        "io",
        "io-base",
        "system",
    },
    # a thin front end (issue 22 item 2): after parsing, a command makes one library call (workflows;
    # the GUI launcher for `gui`) and formats what comes back (report); tests/cli/test_cli_thin*.py count it
    "cli": {"workflows", "pipeline", "report", "gui"},
}
IO = {"io", "io-base", "io-nsys", "io-kineto", "io-parallel"}
CORE = set(ALLOWED) - {"cli", "gui"}
FORBIDDEN = [  # (from rooms, to rooms, why): issue 22's rules; ALLOWED must never permit one of these
    (IO, {"aggregate", "modeling", "layouts", "analysis", "predictor", "report", "simulate", "capture", "cli", "gui",
          "pipeline"}, "io imports nothing above it"),
    ({"io-nsys"}, {"io-kineto"}, "the nsys reader stands on the shared io base, not on the Kineto reader"),
    ({"io-kineto"}, {"io-nsys"}, "the Kineto reader stands on the shared io base, not on the nsys reader"),
    ({"io-base"}, {"io", "io-nsys", "io-kineto", "io-parallel"}, "the shared base knows no format and no batch"),
    ({"analysis"}, {"io-nsys", "io-kineto"}, "analysis works on the Experiment, not on a file format"),
    ({"modeling"}, {"analysis", "aggregate", "predictor", "report", "cli", "gui"}, "the modeler knows no epochs"),
    ({"layouts"}, {*IO, "aggregate", "analysis", "predictor", "report", "simulate", "pipeline"},
     "the layout model is a modeler: it takes tables, never profiles or answers"),
    ({"simulate"}, {"capture"}, "the simulator needs no capture side"),
    ({"gui"}, {"cli"}, "the GUI calls the library, not the CLI"),
    ({"cli"}, {*IO, "aggregate", "modeling", "layouts", "analysis", "predictor", "capture", "simulate", "layout-study",
               "system"}, "a command makes one library call (workflows) and formats what comes back"),
    (CORE, {"cli", "gui"}, "nothing outside cli and gui imports them"),
]  # fmt: skip


def room_of(module: str) -> str | None:
    for room, prefixes in ROOMS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return room
    return None


def _modules():
    """(path, module name) of every source file of the package and of the root-level gui/ folder."""
    for base, prefix in ((PACKAGE, "extradeep"), (REPO / "gui", "extradeep.gui")):
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            yield path, ".".join((prefix, *parts))


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in `path`, at any depth (inside functions too);
    `from package import name` counts as `package.name`, so a submodule imported by name is seen."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            source = ".".join(p for p in (base, node.module) if p)
            found += [(node.lineno, f"{source}.{alias.name}") for alias in node.names]
    return found


def room_edges() -> dict[tuple[str, str], list[str]]:
    """(from room, to room) -> where ("file:line imports module") for every import between rooms."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path, module in _modules():
        source = room_of(module)
        for line, name in _imports(path, module):
            target = room_of(name)
            if target is None and name.startswith("gui"):
                target = "gui"  # the folder imported under its bare name
            if target is not None and target != source:
                edges.setdefault((source, target), []).append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return edges


def cycles(edges) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_every_module_belongs_to_a_room():
    assert [m for _, m in _modules() if room_of(m) is None] == []
    assert {room for room, _ in ROOMS} == set(ALLOWED)


def test_the_allowed_imports_break_no_rule_and_form_no_cycle():
    allowed = {(a, b) for a, targets in ALLOWED.items() for b in targets | (LEAVES - {a})}
    broken = [(a, b, why) for a, b in sorted(allowed) for frm, to, why in FORBIDDEN if a in frm and b in to]
    assert broken == []
    assert cycles({(a, b) for a, b in allowed if not (a in LEAVES or b == "root")}) == []


def test_imports_follow_the_package_order():
    edges = room_edges()
    assert edges, "the walk found no imports at all"
    unexpected = [f"{a} -> {b}: {where[0]}" for (a, b), where in sorted(edges.items()) if b not in ALLOWED[a] | LEAVES]
    assert unexpected == []
    broken = [
        f"{a} -> {b} ({why}): {where[0]}"
        for (a, b), where in sorted(edges.items())
        for frm, to, why in FORBIDDEN
        if a in frm and b in to
    ]
    assert broken == []
    assert cycles(edges) == []


def test_the_rules_find_what_they_forbid(tmp_path):
    """The walk sees imports inside functions and relative ones, and the rules catch them."""
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from ..nsys import events\n    import extradeep.cli\n", encoding="utf-8")
    found = [name for _, name in _imports(path, "extradeep.io.kineto.probe")]
    assert found == ["extradeep.io.nsys.events", "extradeep.cli"]
    rooms = {room_of(name) for name in found}
    assert rooms == {"io-nsys", "cli"}
    assert [why for frm, to, why in FORBIDDEN if "io-kineto" in frm and "io-nsys" in to]
    assert cycles({("a", "b"), ("b", "c"), ("c", "a")}) == [["a", "b", "c", "a"]]
    assert cycles({("a", "b")}) == []


def _doc_table(marker: str) -> list[list[str]]:
    """The rows of the table after `<!-- marker -->` in docs/architecture.md, cells without backticks."""
    lines = ARCHITECTURE.read_text(encoding="utf-8").split(f"<!-- {marker} -->", 1)[1].strip().splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]
        if not set("".join(cells)) <= set("-: "):
            rows.append(cells)
    return rows[1:]  # without the header


def _names(cell: str) -> set[str]:
    return {n.strip() for n in cell.split(",") if n.strip() and n.strip() != "-"}


def test_the_architecture_page_states_the_same_rules():
    allowed = {row[0]: _names(row[2]) for row in _doc_table("package-order")}
    assert allowed == ALLOWED
    never = [(_names(row[0]), _names(row[1]), row[2]) for row in _doc_table("package-rules")]
    assert never == [(set(frm), set(to), why) for frm, to, why in FORBIDDEN]


def test_no_core_module_imports_the_gui_toolkit():
    toolkit = [
        f"{path.relative_to(REPO)} imports {name}"
        for path, module in _modules()
        if room_of(module) not in ("cli", "gui")
        for _, name in _imports(path, module)
        if name.startswith("PySide6")
    ]
    assert toolkit == []


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
