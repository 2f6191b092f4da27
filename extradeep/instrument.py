"""Copy a Python project with every user-defined function and method wrapped in an NVTX range.

Step (1) of the paper's process: the ranges name the code the developer wrote
(`module.Class.function`), so its time shows up next to kernels and CUDA calls. The rewrite uses
libcst, which keeps the formatting and comments; the only changes are one `import extradeep.marks`
per module and one decorator per function, placed innermost so `staticmethod`, `property` and the
like still see a plain function:

    @staticmethod
    @extradeep.marks.range("shapes.geometry.Circle.from_diameter")
    def from_diameter(d): ...

From SRC (a script, a package directory or a plain directory) the instrumenter follows local
imports (absolute and relative, also inside functions) to modules that live under the import
root, and writes the copies to OUT at the same relative paths; sources are never written. Left
alone: third-party code (site-packages, virtual environments, build directories), generated files
(a "generated" or "DO NOT EDIT" header; copied unchanged), functions nested in functions, generators
and coroutines, dunder methods other than `__init__` and `__call__`, and functions under decorators
that compile or stub them (`jit`, `script`, `compile`, `tf.function`, `overload`...). Functions
already decorated are counted, not decorated again, so a second pass changes nothing.

libcst is an optional dependency (`pip install 'extradeep[instrument]'`); the CLI says so in one
line when it is missing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.helpers import get_full_name_for_node

from extradeep.errors import InputError

IMPORT_LINE = "import extradeep.marks\n"
MARK_DECORATORS = ("extradeep.marks.range", "marks.range")
KEPT_DUNDERS = ("__init__", "__call__")
SKIP_DIRS = {"site-packages", "dist-packages", "build", "dist", "__pycache__", ".git", ".hg", ".tox",
             ".nox", ".eggs", "node_modules", ".mypy_cache", ".pytest_cache", "venv", ".venv"}
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
    _check_no_overwrite(reports)
    for report, code in reports:
        report.target.parent.mkdir(parents=True, exist_ok=True)
        report.target.write_bytes(code)
    return InstrumentReport(root, out, [r for r, _ in reports])


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


def _walk(top: Path, out: Path):
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _third_party_dir(here / d) and (here / d) != out)
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
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        report.status = f"syntax error line {exc.raw_line}: copied unchanged"
        return report, source, []
    imports = _ImportCollector(name, path.name == "__init__.py")
    module.visit(imports)
    if _is_generated(source):
        report.status = "generated: copied unchanged"
        return report, source, imports.modules
    module = module.visit(_Instrumenter(name, report))
    if not report.instrumented:
        report.status = "unchanged"
        return report, source, imports.modules
    return report, _with_import(module).bytes, imports.modules


def _check_no_overwrite(reports) -> None:
    sources = {r.source for r, _ in reports}
    clash = next((r.target for r, _ in reports if r.target in sources), None)
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
    """Add `import extradeep.marks` after the docstring and `from __future__` imports."""
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
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))


def _is_marks_import(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Import) and any(a.asname is None and _dotted(a.name) == "extradeep.marks" for a in s.names)
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


class _ImportCollector(cst.CSTVisitor):
    """Absolute names of every module an import statement (anywhere in the module) may load."""

    def __init__(self, module: str, is_package: bool):
        super().__init__()
        self.package = module.split(".") if is_package else module.split(".")[:-1]
        self.modules: list[str] = []

    def visit_Import(self, node) -> None:
        self.modules += [_dotted(alias.name) for alias in node.names]

    def visit_ImportFrom(self, node) -> None:
        level = len(node.relative)
        if level - 1 > len(self.package):
            return  # beyond the top package: fails at run time anyway
        base = self.package[: len(self.package) - level + 1] if level else []
        module = ".".join([*base, *(_dotted(node.module).split(".") if node.module else [])])
        if not module:
            return
        self.modules.append(module)
        if isinstance(node.names, cst.ImportStar):
            return
        self.modules += [f"{module}.{_dotted(alias.name)}" for alias in node.names]


class _Instrumenter(cst.CSTTransformer):
    """Adds the range decorator to module-level functions and methods (nested classes included)."""

    def __init__(self, module: str, report: ModuleReport):
        super().__init__()
        self.module, self.report = module, report
        self.scope: list[tuple[str, str]] = []  # ("class" | "def", name)

    def visit_ClassDef(self, node) -> None:
        self.scope.append(("class", node.name.value))

    def leave_ClassDef(self, original_node, updated_node):
        self.scope.pop()
        return updated_node

    def visit_FunctionDef(self, node) -> None:
        self.scope.append(("def", node.name.value))

    def leave_FunctionDef(self, original_node, updated_node):
        self.scope.pop()
        if any(kind == "def" for kind, _ in self.scope):
            return updated_node
        name = ".".join([self.module, *(n for _, n in self.scope), updated_node.name.value])
        why = _leave_out(updated_node)
        if why == "already":
            self.report.already.append(name)
        elif why:
            self.report.skipped.append((name, why))
        else:
            self.report.instrumented.append(name)
            decorator = cst.Decorator(cst.parse_expression(f'extradeep.marks.range("{name}")'))
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
    if compiled:
        return f"decorated with {compiled}"
    finder = _YieldFinder()
    node.body.visit(finder)
    return "generator" if finder.found else None


class _YieldFinder(cst.CSTVisitor):
    """Finds `yield` in a function body, not descending into nested functions, lambdas or classes."""

    def __init__(self):
        super().__init__()
        self.found = False

    def visit_Yield(self, node) -> None:
        self.found = True

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False
