"""Thin commands (issue 22 item 2): after parsing, `model`, `budget`, `evaluate`, `report` and `plan`
each make exactly one call into extradeep.workflows, and what they print is what that call returned."""

import json
import re

import pytest
from shared_data import simulate_small_runs

import extradeep.workflows as workflows
from extradeep.analysis.core import primary_quantity
from extradeep.cli import main
from extradeep.report.plan import plan_text
from extradeep.report.text import format_interval, format_pct, format_value

WORKFLOWS = ("model_study", "budget_study", "evaluation_study", "report_study", "plan_study")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("thin")
    simulate_small_runs(root / "runs")
    return root


@pytest.fixture
def reading(runs, tmp_path):
    return [str(runs / "runs"), "--cache-dir", str(runs / "cache"), "--no-replay", "--jobs", "1"]


@pytest.fixture
def calls(monkeypatch):
    """Every workflow wrapped: name -> the results of its calls (the command's own calls only: a
    workflow that uses another calls it directly, not through the package)."""
    made = {name: [] for name in WORKFLOWS}
    for name in WORKFLOWS:
        real = getattr(workflows, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            result = _real(*args, **kwargs)
            made[_name].append(result)
            return result

        monkeypatch.setattr(workflows, name, counted)
    return made


def only_call(calls, name):
    assert {k: len(v) for k, v in calls.items()} == {k: int(k == name) for k in WORKFLOWS}
    return calls[name][0]


def test_model_prints_the_predictions_the_workflow_returned(calls, reading, tmp_path, capsys):
    path = tmp_path / "m.json"
    assert main(["model", *reading, "--predict", "8,12", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    result = only_call(calls, "model_study")
    main_rows = result.predictions[result.predictions["quantity"] == primary_quantity(result.analysis)]
    assert sorted(main_rows["ranks"]) == [8, 12]
    for _, row in main_rows.iterrows():
        assert format_interval(row["T"], row["T_lo"], row["T_hi"]) in out
    assert result.written == [("json", str(path))] and f"extradeep: wrote {path}" in err
    doc = json.loads(path.read_text())
    written = {(p["quantity"], p["point"]["ranks"]): p["value"] for p in doc["predictions"]}
    for _, row in result.predictions.iterrows():
        assert written[(row["quantity"], row["ranks"])] == pytest.approx(row["T"])


def test_budget_prints_the_intervals_and_best_the_workflow_returned(calls, reading, capsys):
    assert main(["budget", *reading, "--max-time", "100d", "--candidates", "4:12:2"]) == 0
    out = capsys.readouterr().out
    result = only_call(calls, "budget_study")
    search = result.budget
    assert f"{len(search.table)} candidates" in out and len(search.table) == 5
    spans = [(r["from"], r["to"]) for _, r in search.intervals.iterrows()]
    assert spans == [(4, 12)]  # a 100-day deadline: every candidate is valid
    assert "Valid ranks: 4 .. 12" in out
    best = dict(re.findall(r"^\s+(efficiency|cost|time)\s+ranks=(\d+)", out, re.M))
    assert best == {r["criterion"]: f"{r['ranks']:g}" for _, r in search.best.iterrows()}


def test_evaluate_prints_the_errors_the_workflow_returned(calls, reading, tmp_path, capsys):
    path = tmp_path / "e.csv"
    assert main(["evaluate", *reading, "--min-points", "4", "--eval-points", "6", "--csv", str(path)]) == 0
    out = capsys.readouterr().out
    result = only_call(calls, "evaluation_study")
    errors = result.errors
    held = errors[(errors["role"] == "evaluation") & (errors["name"] == primary_quantity(result.analysis))]
    assert list(held["ranks"]) == [6]  # held out, and fitted without it
    assert 6 not in set(result.analysis.points["ranks"])
    row = held.iloc[0]
    line = next(line for line in out.splitlines() if line.strip().startswith("ranks=6") and "evaluation" in line)
    assert format_value(row["predicted"]) in line and format_pct(row["error_pct"], 2) in line
    assert path.read_text().count("\n") == len(errors) + 1  # the CSV holds what came back


def test_report_writes_the_html_the_workflow_returned(calls, reading, tmp_path, capsys):
    path = tmp_path / "r.html"
    assert main(["report", *reading, "--output", str(path)]) == 0
    err = capsys.readouterr().err
    result = only_call(calls, "report_study")
    assert path.read_text() == result.html
    assert f"extradeep: wrote {path} (" in err and f"{len(result.figures)} figures)" in err


def test_plan_prints_the_plan_the_workflow_returned(calls, reading, tmp_path, capsys):
    path = tmp_path / "next.csv"
    assert main(["plan", *reading, "--target", "16", "--max-ranks", "8", "-k", "2", "-o", str(path)]) == 0
    out, err = capsys.readouterr()
    result = only_call(calls, "plan_study")
    assert plan_text(result.plan, result.current) in out and len(result.plan) >= 1
    assert result.written == [("plan", str(path))] and path.is_file()
    assert f"plan written to {path}" in err


def test_a_bad_option_is_named_by_its_flag_before_any_workflow_runs(calls, reading, capsys):
    assert main(["model", *reading, "--level", "1.5"]) == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == "extradeep: error: --level: must be between 0 and 1, got 1.5"
    )
    assert all(not made for made in calls.values())
