"""extradeep instrument on the sample project in tests/data/instrument_project."""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("libcst")

from extradeep.capture.instrument import instrument  # noqa: E402
from extradeep.cli import main  # noqa: E402
from extradeep.errors import InputError  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
PROJECT = DATA / "instrument_project"
FAKE_NVTX = DATA / "fake_nvtx"
REPO = Path(__file__).resolve().parents[2]


def tree_digest(root: Path) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def run_main(directory: Path, tmp_path: Path, fake_nvtx: bool):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRADEEP_", "NVTX_INJECTION"))}
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    log = tmp_path / f"nvtx-{directory.name}-{fake_nvtx}.jsonl"
    if fake_nvtx:
        env["PYTHONPATH"] = os.pathsep.join([str(FAKE_NVTX), str(REPO)])
        env.update(EXTRADEEP_NVTX="1", EXTRADEEP_FAKE_NVTX_LOG=str(log))
    done = subprocess.run(
        [sys.executable, "main.py", "1", "2.5", "4"], cwd=directory, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    calls = [tuple(json.loads(line)) for line in log.read_text().splitlines()] if log.exists() else []
    return done.stdout, calls


@pytest.fixture(scope="module")
def instrumented(tmp_path_factory):
    before = tree_digest(PROJECT)
    out = tmp_path_factory.mktemp("instrumented")
    report = instrument(PROJECT / "main.py", out)
    assert tree_digest(PROJECT) == before, "the sources changed"
    return out, report


def test_the_instrumented_copy_prints_the_same_results(instrumented, tmp_path):
    out, _ = instrumented
    expected, _ = run_main(PROJECT, tmp_path, fake_nvtx=False)
    assert "total_area: 96.2920" in expected
    plain, calls = run_main(out, tmp_path, fake_nvtx=False)
    assert plain == expected and calls == []
    marked, calls = run_main(out, tmp_path, fake_nvtx=True)
    assert marked == expected

    spec = importlib.util.spec_from_file_location("fake_nvtx_for_checks", FAKE_NVTX / "nvtx.py")
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    names = fake.nested_names(calls)  # balanced push/pop per thread
    assert names[:3] == ["main.main", "main.main/main.build", "main.main/main.build/shapes.geometry.Circle.__init__"]
    assert "main.main/shapes.stats.summarize/shapes.geometry.Circle.area" in names
    assert "main.main/shapes.geometry.Shape.describe/shapes.geometry.Circle.area" in names
    assert names.count("main.main/main.build/shapes.geometry.Square.from_side/shapes.geometry.Square.__init__") == 3
    assert {c[2] for c in calls} == {"extradeep"}


def test_report_lists_what_was_instrumented_and_left_out(instrumented):
    out, report = instrumented
    by_module = {m.module: m for m in report.modules}
    assert set(by_module) == {"main", "helpers", "shapes", "shapes.geometry", "shapes.stats", "shapes._table"}
    assert "unused" not in by_module and not (out / "unused.py").exists()  # never imported from main.py
    assert by_module["shapes.geometry"].instrumented == [
        "shapes.geometry.Shape.area",
        "shapes.geometry.Shape.describe",
        "shapes.geometry.Circle.__init__",
        "shapes.geometry.Circle.area",
        "shapes.geometry.Circle.diameter",
        "shapes.geometry.Square.__init__",
        "shapes.geometry.Square.area",
        "shapes.geometry.Square.from_side",
        "shapes.geometry.Square.Corner.count",
    ]
    assert dict(by_module["helpers"].skipped) == {
        "helpers.running_total": "generator",
        "helpers.Registry.__len__": "dunder method",
    }
    assert dict(by_module["shapes.stats"].skipped) == {"shapes.stats.not_instrumented": "coroutine"}
    assert by_module["shapes._table"].status.startswith("generated")
    assert (out / "shapes" / "_table.py").read_bytes() == (PROJECT / "shapes" / "_table.py").read_bytes()
    assert (out / "shapes" / "__init__.py").read_bytes() == (PROJECT / "shapes" / "__init__.py").read_bytes()
    assert report.n_instrumented == 14
    assert report.data_files == [out / "shapes" / "units.json"]  # package data the copy needs to run


def test_formatting_is_kept_apart_from_the_added_lines(instrumented):
    out, _ = instrumented
    source = (PROJECT / "shapes" / "geometry.py").read_text().splitlines()
    copy = (out / "shapes" / "geometry.py").read_text().splitlines()
    added = [line for line in copy if "extradeep_marks" in line]
    assert [line for line in copy if "extradeep_marks" not in line] == source
    assert added[0] == "import extradeep.capture.marks as _extradeep_marks"
    assert '    @_extradeep_marks.range("shapes.geometry.Square.from_side")' in added


def test_a_second_pass_changes_nothing(instrumented, tmp_path):
    out, _ = instrumented
    again = instrument(out / "main.py", tmp_path / "again")
    assert tree_digest(tmp_path / "again") == tree_digest(out)
    assert again.n_instrumented == 0 and sum(len(m.already) for m in again.modules) == 14
    instrument(PROJECT / "main.py", out)  # into the same folder again
    assert tree_digest(tmp_path / "again") == tree_digest(out)


def test_third_party_build_and_venv_folders_are_not_instrumented(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    for folder, name in (
        ("build/lib", "stale.py"),
        (".venv/lib/python3/site-packages", "thirdparty.py"),
        ("env311", "tool.py"),
    ):
        (project / folder).mkdir(parents=True)
        (project / folder / name).write_text("def f():\n    return 1\n")
    (project / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    report = instrument(project, tmp_path / "out")
    modules = {m.module for m in report.modules}
    assert modules == {"main", "helpers", "unused", "shapes", "shapes.geometry", "shapes.stats", "shapes._table"}
    assert not any((tmp_path / "out" / d).exists() for d in ("build", ".venv", "env311"))


def test_a_package_directory_is_instrumented_under_its_package_name(tmp_path):
    report = instrument(PROJECT / "shapes", tmp_path / "out")
    assert (tmp_path / "out" / "shapes" / "geometry.py").exists()
    assert "shapes.geometry.Circle.area" in {n for m in report.modules for n in m.instrumented}
    # shapes.stats imports nothing outside the package except the standard library
    assert {m.module for m in report.modules} == {"shapes", "shapes.geometry", "shapes.stats", "shapes._table"}


def test_sources_are_never_overwritten(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    before = tree_digest(project)
    with pytest.raises(InputError, match="would overwrite the sources"):
        instrument(project / "main.py", project)
    assert tree_digest(project) == before


def test_cli_prints_counts_and_the_verbose_list(tmp_path, capsys):
    assert main(["instrument", str(PROJECT / "main.py"), "--out", str(tmp_path / "out"), "--verbose"]) == 0
    text = capsys.readouterr().out
    assert "    + shapes.geometry.Circle.area" in text
    assert "    - helpers.running_total (generator)" in text
    assert text.splitlines()[-1].startswith("instrumented 14 functions in 6 modules")


def test_cli_without_libcst_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "libcst", None)
    monkeypatch.delitem(sys.modules, "extradeep.capture.instrument")
    assert main(["instrument", str(PROJECT / "main.py"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "extradeep: error: extradeep instrument needs libcst: pip install 'extradeep[instrument]'"
    assert not (tmp_path / "out").exists()


def test_bad_sources_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not python\n")
    (tmp_path / "empty").mkdir()
    for src, problem in (
        (tmp_path / "missing.py", "no such file or directory"),
        (tmp_path / "notes.txt", "not a Python file (.py)"),
        (tmp_path / "empty", "no Python files found"),
    ):
        assert main(["instrument", str(src), "--out", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err == f"extradeep: error: {src.resolve()}: {problem}\n"


def test_a_file_that_does_not_parse_is_copied_unchanged(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    report = instrument(tmp_path / "broken.py", tmp_path / "out")
    assert report.modules[0].status.startswith("syntax error line 1")
    assert (tmp_path / "out" / "broken.py").read_text() == "def f(:\n    pass\n"
