"""Column names come from extradeep.columns everywhere (issue 22 item 4).

The walk reads every module of the package (extradeep/ and gui/) and fails on a subscript whose key is
a string literal, or a list of them, equal to a name that extradeep.columns defines: `frame["region"]`
must be `frame[REGION]`. A key of a file format (a Kineto JSON key, the package's own saved JSON) that
happens to equal a column name is listed in FORMAT_FIELDS with the reason, and each entry must still be
needed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import extradeep.columns as columns

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("extradeep", "gui")
# (module, literal): why the literal there is not a column of a table the package builds
FORMAT_FIELDS: dict[tuple[str, str], str] = {
    ("extradeep/analysis/communication.py", "wait"): "key of a saved communication model (JSON) and of its fit choices",
    ("extradeep/analysis/epoch.py", "train"): "key of a saved epoch model (JSON)",
    ("extradeep/analysis/epoch.py", "val"): "key of a saved epoch model (JSON)",
    ("extradeep/analysis/overlap.py", "k"): "key of a saved exposure curve (JSON)",
    ("extradeep/analysis/overlap.py", "hidden"): "key of a saved exposure curve (JSON)",
    ("extradeep/analysis/overlap.py", "idle"): "key of a saved overlap model (JSON)",
    ("extradeep/analysis/overlap.py", "replayed"): "name of a candidate overlap form (a dict of fits), not a column",
    ("extradeep/analysis/parts.py", "name"): "key of a saved part model (JSON)",
    ("extradeep/capture/plan_file.py", "ranks"): "key of a measurement plan file",
    ("extradeep/layout_profiles.py", "layers"): "key of a simulated study's truth.json",
    ("extradeep/layout_profiles.py", "hidden"): "key of a simulated study's truth.json",
    ("extradeep/layout_profiles.py", "heads"): "key of a simulated study's truth.json",
    ("extradeep/layout_profiles.py", "vocab"): "key of a simulated study's truth.json",
    ("extradeep/layout_profiles.py", "step_time"): "key of a simulated study's truth.json",
    ("extradeep/layout_profiles.py", "peak_memory"): "key of a simulated study's truth.json",
    ("extradeep/layouts/explain.py", "memory"): "a coefficient of the layout model (per byte moved), not a part",
    ("extradeep/layouts/explain.py", "optimizer"): "a coefficient of the layout model (per Adam byte), not a part",
    ("extradeep/layouts/parts.py", "memory"): "a coefficient and a feature of the layout model, not a part",
    ("extradeep/layouts/parts.py", "optimizer"): "a coefficient and a feature of the layout model, not a part",
    ("extradeep/modeling/modeler.py", "count"): "the lack-of-fit test's own frame (repetitions per point)",
    ("extradeep/modeling/modeler.py", "pure"): "the lack-of-fit test's pure-error sum of squares",
    ("extradeep/simulate/gpt/groups.py", "ranks"): "a process group's config as Kineto's distributedInfo writes it",
    ("extradeep/simulate/gpt/kineto_writer.py", "bytes"): "a Kineto event's args key",
    (
        "extradeep/simulate/gpt/kineto_writer.py",
        "group",
    ): "a simulated communicator's ranks (a list), not a matched group",
    ("extradeep/simulate/gpt/kineto_writer.py", "role"): "a simulated communicator's parallel role (tp, pp, dp)",
    ("extradeep/simulate/gpt/kineto_writer.py", "type"): "a simulated synchronisation's nsys sync type",
    ("extradeep/simulate/gpt/kineto_writer.py", "time"): "the time of a simulated memory sample",
    (
        "extradeep/simulate/gpt/nsys_writer.py",
        "group",
    ): "a simulated communicator's ranks (a list), not a matched group",
    ("extradeep/simulate/gpt/nsys_writer.py", "role"): "a simulated communicator's parallel role (tp, pp, dp)",
    ("extradeep/simulate/gpt/nsys_writer.py", "type"): "a simulated synchronisation's nsys sync type",
    ("extradeep/simulate/gpt/nsys_writer.py", "time"): "the time of a simulated memory sample",
    (
        "extradeep/simulate/gpt/nsys_writer.py",
        "ranks",
    ): "a process group's config as Kineto's distributedInfo writes it",
    (
        "extradeep/simulate/gpt/program.py",
        "forward",
    ): "a pass of the simulated program (DeepSpeed's range names by pass)",
    (
        "extradeep/simulate/gpt/program.py",
        "backward",
    ): "a pass of the simulated program (DeepSpeed's range names by pass)",
    (
        "extradeep/simulate/gpt/program.py",
        "optimizer",
    ): "a pass of the simulated program (DeepSpeed's range names by pass)",
    ("extradeep/simulate/gpt/truth.py", "role"): "a simulated communicator's parallel role (tp, pp, dp)",
    ("extradeep/simulate/kineto_writer.py", "bytes"): "a Kineto event's args key",
    ("extradeep/simulate/program.py", "forward"): "a pass of the simulated program (its op order by pass)",
    ("extradeep/simulate/program.py", "backward"): "a pass of the simulated program (its op order by pass)",
    ("extradeep/simulate/program.py", "optimizer"): "a pass of the simulated program (its op order by pass)",
    ("extradeep/simulate/program.py", "warmup"): "the simulated program's cuDNN autotuning ops, not warm-up steps",
    (
        "extradeep/report/inspect_text.py",
        "gpus",
    ): "key of a profile's inspection summary (inspect_trace / inspect_export dict)",
    ("extradeep/report/inspect_text.py", "name"): "a GPU's name in a profile's inspection summary",
    ("extradeep/report/inspect_text.py", "path"): "key of inspect_export's and inspect_trace's summary dicts",
    ("extradeep/report/inspect_text.py", "rank"): "key of inspect_trace's summary dict (the rank Kineto recorded)",
    ("extradeep/report/inspect_text.py", "value"): "key of a profile's layout JSON (io.parallel.layout.layout_json)",
    ("extradeep/io/naming.py", "name"): "a named group of the file-name token pattern (a regex match)",
    ("extradeep/io/naming.py", "value"): "a named group of the file-name token pattern (a regex match)",
    ("extradeep/analysis/layout_text.py", "ranks"): "key of a point of the run layout summary (cluster_layout's dict)",
    ("extradeep/io/kineto/load.py", "bytes"): "a field of a parsed Kineto event row (load's field list)",
    ("extradeep/io/kineto/load.py", "kind"): "a field of a parsed Kineto event row (load's field list)",
    ("extradeep/io/kineto/load.py", "stream"): "a field of a parsed Kineto event row (load's field list)",
    ("extradeep/io/kineto/load.py", "corr"): "a field of a parsed Kineto event row (load's field list)",
    ("extradeep/io/kineto/load.py", "name"): "a field of a parsed Kineto event row (load's field list)",
    ("extradeep/io/nsys/batched.py", "library"): "key of the export's event tables by kind, not the category",
    ("extradeep/io/nsys/replay.py", "nvtx"): "key of the export's event tables by kind, not the category",
    ("extradeep/io/sums.py", "library"): "key of the event tables by kind, and the library tables' library column",
    ("extradeep/system.py", "name"): "a field of the system description read from its TOML file",
}


def column_names() -> set[str]:
    """Every string that extradeep.columns defines as a name, alone or in a list or tuple of names."""
    names = set()
    for attribute, value in vars(columns).items():
        if not attribute.isupper():
            continue
        if isinstance(value, str):
            names.add(value)
        elif isinstance(value, (list, tuple)):
            names.update(v for v in value if isinstance(v, str))
    return names


def _string_keys(key: ast.expr) -> list[str]:
    """The literal strings of a subscript key: one string, or a list of strings only."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return [key.value]
    if isinstance(key, ast.List) and key.elts:
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in key.elts):
            return [e.value for e in key.elts]
    return []


def literal_columns(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of each subscript key in `path` that spells a column name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            found += [(node.lineno, s) for s in _string_keys(node.slice) if s in names]
    return sorted(found)


def _modules() -> list[Path]:
    paths = [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))]
    return paths


def findings() -> list[tuple[str, int, str]]:
    """(module, line, literal) of every literal column subscript outside FORMAT_FIELDS."""
    names = column_names()
    out = []
    for path in _modules():
        module = path.relative_to(REPO).as_posix()
        out += [(module, line, s) for line, s in literal_columns(path, names) if (module, s) not in FORMAT_FIELDS]
    return out


def test_column_subscripts_use_the_names_from_columns():
    found = [f"{module}:{line}: {literal!r}" for module, line, literal in findings()]
    assert not found, "use the constants of extradeep.columns:\n" + "\n".join(found)


def test_every_format_field_exemption_is_still_needed():
    names = column_names()
    stale = []
    for module, literal in FORMAT_FIELDS:
        path = REPO / module
        if not path.exists() or literal not in {s for _, s in literal_columns(path, names)}:
            stale.append((module, literal))
    assert not stale, f"drop these from FORMAT_FIELDS, they no longer occur: {stale}"


def test_the_check_finds_literal_columns(tmp_path):
    """A literal key, a list of them and a `.loc` column are found; a name, a non-column and a tuple key are not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "frame['region']\nframe[['tp', 'pp']]\nframe[REGION]\nsettings['no such column']\nframe[('rank', 1)]\n",
        encoding="utf-8",
    )
    names = column_names()
    assert {"region", "tp", "pp", "rank"} <= names
    assert literal_columns(probe, names) == [(1, "region"), (2, "pp"), (2, "tp")]
