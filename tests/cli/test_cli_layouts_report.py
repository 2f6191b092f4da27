"""`extradeep layouts PROFILES --report`: the search calibrated on the shipped layout study, written as
an HTML report that names the same best layout as the terminal; user errors are one line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from extradeep.cli import main

STUDY = Path(__file__).resolve().parents[2] / "sample_profiles" / "layouts" / "profiles"


def _digests(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_profiles_calibrate_the_search_and_the_report_names_its_best(tmp_path, capsys):
    before = _digests(STUDY)
    out, report = tmp_path / "layouts.csv", tmp_path / "layouts.html"
    args = ["layouts", str(STUDY), "--model", str(STUDY / "model.toml"), "--hardware", str(STUDY / "hardware.toml")]
    args += ["--gpus", "64,128,256,512", "--global-batch", "512", "-o", str(out), "--report", str(report)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    import pandas as pd

    table = pd.read_csv(out)
    best = table[table["best"]].iloc[0]
    line = f"GPUs {int(best['gpus'])}, t {int(best['tp'])}, p {int(best['pp'])}, d {int(best['dp'])}"
    text = report.read_text()
    assert line in printed and line in text
    assert "calibrated on 5 profiled runs" in text  # the five layouts of the shipped study
    assert "parts" in printed  # the coefficients the profiles' parts measured
    assert "Profiled runs and their layouts" in text and text.count("data:image/png;base64,") == 2
    assert _digests(STUDY) == before  # inputs are read, never written


@pytest.mark.parametrize(
    "extra,problem",
    [
        (["--report", "r.html"], "--report: the layout report shows a search"),
        (["--model", "M", "--gpus", "64", "--global-batch", "8", "--report", "r.txt"], "one HTML file"),
        (["--gpus", "64", "--global-batch", "8"], "--model: profiles need the model they trained"),
    ],
)
def test_report_and_profile_option_errors_are_one_line(tmp_path, capsys, extra, problem):
    extra = [str(STUDY / "model.toml") if a == "M" else str(tmp_path / a) if a.startswith("r.") else a for a in extra]
    assert main(["layouts", str(STUDY), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and "\n" not in err and "Traceback" not in err


def test_report_never_replaces_a_file_of_the_study(capsys):
    target = STUDY / "README.md"
    before = target.read_bytes()
    args = ["layouts", str(STUDY), "--model", str(STUDY / "model.toml"), "--gpus", "64", "--global-batch", "8"]
    assert main([*args, "-o", str(target)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err and target.read_bytes() == before


def test_the_budgeting_report_points_a_layout_study_to_the_layout_report(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", str(STUDY), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "several parallel layouts (tp, pp, dp" in err and f"extradeep layouts {STUDY}" in err
    assert "Traceback" not in err and not out.exists()
