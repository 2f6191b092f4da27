"""docs/notebook.ipynb runs the whole pipeline through the package root, cell by cell."""

import ast
import json
import os
from pathlib import Path

import pytest

import extradeep

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_notebook_runs_through_the_root_api(monkeypatch, tmp_path):
    notebook = json.loads((REPO / "docs" / "notebook.ipynb").read_text())
    code = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert any("import extradeep as xd" in c for c in code)
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME", str(tmp_path / "cache")))
    namespace: dict = {}
    for cell in code:  # our own documentation's code, run as a reader would run it
        exec(compile(cell, "docs/notebook.ipynb", "exec"), namespace)  # noqa: S102
    used = {
        node.attr
        for cell in code
        for node in ast.walk(ast.parse(cell))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "xd"
    }
    imports = {
        alias.name
        for cell in code
        for node in ast.walk(ast.parse(cell))
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("extradeep")
    }
    assert imports == {"extradeep"} and used <= set(extradeep.__all__)  # the root API and nothing else
    assert {
        "load_experiment",
        "analyse",
        "prediction_table",
        "plan_budget",
        "evaluate",
        "build_report",
        "predict",
    } <= used
    epoch = namespace["epoch"]
    assert (epoch["T_lo"] <= epoch["T"]).all() and (epoch["T"] <= epoch["T_hi"]).all() and (epoch["T_lo"] >= 0).all()
    assert epoch["ranks"].tolist() == [32, 64, 128]
    assert namespace["report"]["path"].is_file()
    assert not namespace["budget"].best.empty
    assert namespace["held_out"].errors["role"].eq("evaluation").any()
    assert not namespace["prediction"].summary.empty
