"""Copy a Python project with every user-defined function and method wrapped in an NVTX range.

Step (1) of the paper's process: the ranges name the code the developer wrote
(`module.Class.function`), so its time shows up next to kernels and CUDA calls. The rewrite uses
libcst, which keeps the formatting and comments; the only changes are one
`import extradeep.capture.marks as _extradeep_marks` per module (a private name, so `import *`, `dir()` and
`__all__` checks see no new public name) and one decorator per function, placed innermost so
`staticmethod`, `property` and the like still see a plain function:

    @staticmethod
    @_extradeep_marks.range("shapes.geometry.Circle.from_diameter")
    def from_diameter(d): ...

From SRC (a script, a package directory or a plain directory) the instrumenter follows local
imports (absolute and relative, also inside functions) to modules that live under the import
root, and writes the copies to OUT at the same relative paths, with the non-Python files of the
packages reached (package data); sources are never written. Left alone: third-party code
(site-packages, virtual environments, build directories), generated files (a "generated" or
"DO NOT EDIT" header; copied unchanged), `extradeep.capture.marks` itself, functions nested in functions, generators
and coroutines, dunder methods other than `__init__` and `__call__`, and functions under decorators
that compile or stub them (`jit`, `script`, `compile`, `tf.function`, `overload`...). Functions
already decorated are counted, not decorated again, so a second pass changes nothing.

libcst is an optional dependency (`pip install 'extradeep[instrument]'`); the CLI says so in one
line when it is missing.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.helpers import get_full_name_for_node

from extradeep.errors import InputError

MARKS_MODULE = "extradeep.capture.marks"
MARKS_ALIAS = "_extradeep_marks"
IMPORT_LINE = f"import {MARKS_MODULE} as {MARKS_ALIAS}\n"
MARK_DECORATORS = (f"{MARKS_ALIAS}.range", f"{MARKS_MODULE}.range", "marks.range")
KEPT_DUNDERS = ("__init__", "__call__")
SKIP_DIRS = {
    "site-packages",
    "dist-packages",
    "build",
    "dist",
    "__pycache__",
    ".git",
    ".hg",
    ".tox",
    ".nox",
    ".eggs",
    "node_modules",
    ".mypy_cache",
    ".pytest_cache",
    "venv",
    ".venv",
}
# Decorators whose function must stay plain Python source (JIT/graph compilers, typing stubs).
COMPILING = re.compile(r"(^|\.)(jit|njit|script|compile|function|vectorize|guvectorize|overload|cfunc)$")
# A generated-file header: a comment saying "generated", or such words anywhere in the first lines.
GENERATED_COMMENT = re.compile(r"^\s*#.*generated", re.IGNORECASE)
GENERATED_ANYWHERE = re.compile(r"do not edit|@generated|auto-?generated|automatically generated", re.IGNORECASE)
HEADER_LINES = 10


@dataclass
class ModuleReport:
    """What happened to one module: its functions, instrumented, already marked, or left out."""

    module: str
    source: Path
    target: Path
    status: str = "instrumented"  # instrumented | unchanged | generated | syntax error
    instrumented: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why)


@dataclass
class InstrumentReport:
    """The modules written to `out`, in the order they were reached."""

    root: Path
    out: Path
    modules: list[ModuleReport]
    data_files: list[Path] = field(default_factory=list)  # package data copied alongside

    @property
    def n_instrumented(self) -> int:
        return sum(len(m.instrumented) for m in self.modules)

    def lines(self, verbose: bool = False) -> list[str]:
        """Per-module counts (and with `verbose` every function) for the CLI."""
        lines = []
        for m in self.modules:
            extra = f", {len(m.already)} already" if m.already else ""
            extra += f", {len(m.skipped)} left out" if m.skipped else ""
            lines.append(f"{m.module:<40} {len(m.instrumented):>4} instrumented{extra}  [{m.status}]")
            if verbose:
                lines += [f"    + {name}" for name in m.instrumented]
                lines += [f"    = {name} (already instrumented)" for name in m.already]
                lines += [f"    - {name} ({why})" for name, why in m.skipped]
        already = sum(len(m.already) for m in self.modules)
        lines.append(
            f"instrumented {self.n_instrumented} functions in {len(self.modules)} modules"
            + (f" ({already} already instrumented)" if already else "")
            + (f", {len(self.data_files)} package data files copied" if self.data_files else "")
            + f" -> {self.out}"
        )
        return lines


def instrument(src, out, progress=None) -> InstrumentReport:
    """Write instrumented copies of SRC and the local modules it imports to `out`."""
    src, out = Path(src).resolve(), Path(out).resolve()
    if not src.exists():
        raise InputError(src, "no such file or directory")
    root, queue = _entry_modules(src, out)
    reports, seen = [], set()
    while queue:
        name, path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        if progress:
            progress(name)
        report, code, imported = _rewrite(path, name, root, out)
        reports.append((report, code))
        queue += [m for m in _local_modules(imported, root) if m[1] not in seen]
    data = _package_data([r for r, _ in reports], root, out)
    _check_no_overwrite([(r.source, r.target) for r, _ in reports] + data)
    for report, code in reports:
        report.target.parent.mkdir(parents=True, exist_ok=True)
        report.target.write_bytes(code)
    for source, target in data:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return InstrumentReport(root, out, [r for r, _ in reports], [target for _, target in data])


def _entry_modules(src: Path, out: Path) -> tuple[Path, list[tuple[str, Path]]]:
    """The import root and the (module, path) pairs to start from."""
    if src.is_file():
        if src.suffix != ".py":
            raise InputError(src, "not a Python file (.py)")
        root = _import_root(src.parent)
        return root, [(_module_name(src, root), src)]
    root = _import_root(src) if (src / "__init__.py").exists() else src
    files = sorted(p for p in _walk(src, out) if p.suffix == ".py")
    if not files:
        raise InputError(src, "no Python files found")
    return root, [(_module_name(p, root), p) for p in files]


def _import_root(directory: Path) -> Path:
    while (directory / "__init__.py").exists() and directory.parent != directory:
        directory = directory.parent
    return directory


def _walk(top: Path, out: Path, stop=lambda directory: False):
    """Files under `top`, skipping third-party and build folders, `out`, and folders `stop` names."""
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if not _third_party_dir(here / d) and (here / d) != out and not stop(here / d)
        )
        yield from (here / f for f in sorted(filenames))


def _third_party_dir(path: Path) -> bool:
    return path.name in SKIP_DIRS or path.name.endswith(".egg-info") or (path / "pyvenv.cfg").exists()


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _is_generated(source: bytes) -> bool:
    head = source.decode("utf-8", "replace").splitlines()[:HEADER_LINES]
    return any(GENERATED_COMMENT.search(line) or GENERATED_ANYWHERE.search(line) for line in head)


def _rewrite(path: Path, name: str, root: Path, out: Path):
    """-> (report, bytes to write, imported module names)."""
    source = path.read_bytes()
    report = ModuleReport(name, path, out / path.relative_to(root))
    try:
        # The fast stdlib parser answers the questions (imports, generators); libcst only rewrites.
        tree = ast.parse(source, filename=str(path))
        module = cst.parse_module(source)
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        line = getattr(exc, "lineno", None) or getattr(exc, "raw_line", "?")
        report.status = f"syntax error line {line}: copied unchanged"
        return report, source, []
    imported = _imports(tree, name, path.name == "__init__.py")
    if _is_generated(source):
        report.status = "generated: copied unchanged"
        return report, source, imported
    if name == MARKS_MODULE:  # its own decorator cannot wrap it
        report.status = "extradeep's marks: copied unchanged"
        return report, source, imported
    module = module.visit(_Instrumenter(name, report, _generators(tree, name)))
    if not report.instrumented:
        report.status = "unchanged"
        return report, source, imported
    return report, _with_import(module).bytes, imported


def _package_data(reports: list[ModuleReport], root: Path, out: Path) -> list[tuple[Path, Path]]:
    """(source, target) of the non-Python files in the packages reached (schemas, templates...),
    not descending into sub-packages, which bring their own when they are reached."""
    pairs = []
    for package in sorted({r.source.parent for r in reports if r.source.name == "__init__.py"}):
        for path in _walk(package, out, stop=lambda d: (d / "__init__.py").exists()):
            if path.suffix not in (".py", ".pyc", ".pyo"):
                pairs.append((path, out / path.relative_to(root)))
    return pairs


def _check_no_overwrite(pairs) -> None:
    sources = {source for source, _ in pairs}
    clash = next((target for _, target in pairs if target in sources), None)
    if clash is not None:
        raise InputError(clash, "--out would overwrite the sources; choose another directory")


def _local_modules(imported: list[str], root: Path):
    """Imported names that are files under `root`, with the packages that contain them."""
    found = []
    for dotted in imported:
        parts = dotted.split(".")
        for depth in range(1, len(parts) + 1):
            path = _module_file(root, parts[:depth])
            if path is None:
                break
            found.append((".".join(parts[:depth]), path))
    return found


def _module_file(root: Path, parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file() and not any(_third_party_dir(p) for p in candidate.parents if root in p.parents):
            return candidate.resolve()
    return None


def _with_import(module):
    """Add `import extradeep.capture.marks as _extradeep_marks` after the docstring and `from __future__` imports."""
    body = list(module.body)
    if any(_is_marks_import(statement) for statement in body):
        return module
    at = 0
    while at < len(body) and (_is_docstring(body[at], at) or _is_future_import(body[at])):
        at += 1
    statement = cst.parse_statement(IMPORT_LINE)
    if at < len(body) and _is_import(body[at]):  # join the imports, under their blank lines and comments
        statement = statement.with_changes(leading_lines=body[at].leading_lines)
        body[at] = body[at].with_changes(leading_lines=[])
    elif at:
        statement = statement.with_changes(leading_lines=[cst.EmptyLine()])
    body.insert(at, statement)
    return module.with_changes(body=body)


def _is_import(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(
        statement.body[0], (cst.Import, cst.ImportFrom)
    )


def _is_marks_import(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Import)
        and any(_dotted(a.name) == MARKS_MODULE and a.asname and _dotted(a.asname.name) == MARKS_ALIAS for a in s.names)
        for s in statement.body
    )


def _is_docstring(statement, index: int) -> bool:
    return (
        index == 0
        and isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future_import(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(s, cst.ImportFrom) and s.module is not None and _dotted(s.module) == "__future__"
        for s in statement.body
    )


def _dotted(node) -> str:
    return get_full_name_for_node(node) or ""


def _imports(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    """Absolute names of every module an import statement (anywhere in the module) may load."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level - 1 <= len(package):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if target:
                names.append(target)
                names += [f"{target}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def _generators(tree: ast.Module, module: str) -> set[str]:
    """Qualified names of module-level and class-level functions that yield."""
    found, todo = set(), [(module, node) for node in tree.body]
    while todo:
        prefix, node = todo.pop()
        if isinstance(node, ast.ClassDef):
            todo += [(f"{prefix}.{node.name}", child) for child in node.body]
        elif isinstance(node, ast.FunctionDef) and _yields(node):
            found.add(f"{prefix}.{node.name}")
    return found


def _yields(function: ast.FunctionDef) -> bool:
    todo = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo += ast.iter_child_nodes(node)
    return False


class _Instrumenter(cst.CSTTransformer):
    """Adds the range decorator to module-level functions and methods (nested classes included)."""

    def __init__(self, module: str, report: ModuleReport, generators: set[str]):
        super().__init__()
        self.module, self.report, self.generators = module, report, generators
        self.scope: list[tuple[str, str]] = []  # ("class" | "def", name)

    def visit_SimpleStatementLine(self, node) -> bool:
        return False  # no definitions inside; skipping expressions keeps the pass fast

    def visit_ClassDef(self, node) -> None:
        self.scope.append(("class", node.name.value))

    def leave_ClassDef(self, original_node, updated_node):
        self.scope.pop()
        return updated_node

    def visit_FunctionDef(self, node) -> bool:
        self.scope.append(("def", node.name.value))
        return False  # functions nested in functions keep no range

    def leave_FunctionDef(self, original_node, updated_node):
        self.scope.pop()
        if any(kind == "def" for kind, _ in self.scope):
            return updated_node
        name = ".".join([self.module, *(n for _, n in self.scope), updated_node.name.value])
        why = "generator" if name in self.generators else _leave_out(updated_node)
        if why == "already":
            self.report.already.append(name)
        elif why:
            self.report.skipped.append((name, why))
        else:
            self.report.instrumented.append(name)
            decorator = cst.Decorator(cst.parse_expression(f'{MARKS_ALIAS}.range("{name}")'))
            return updated_node.with_changes(decorators=[*updated_node.decorators, decorator])
        return updated_node


def _leave_out(node) -> str | None:
    """Why a function keeps no range ("already" when it has one), or None."""
    names = [_dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) for d in node.decorators]
    if any(n in MARK_DECORATORS for n in names):
        return "already"
    if node.asynchronous is not None:
        return "coroutine"
    function = node.name.value
    if function.startswith("__") and function.endswith("__") and function not in KEPT_DUNDERS:
        return "dunder method"
    compiled = next((n for n in names if COMPILING.search(n)), None)
    return f"decorated with {compiled}" if compiled else None
