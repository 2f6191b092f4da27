"""`extradeep budget` end to end on sample_profiles/; limits checked against the model's own numbers."""

import json
import re
from pathlib import Path

import pytest

from extradeep.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"
DATASET = ["--train-samples", "50000", "--val-samples", "10000", "--batch-size", "64"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return ["--cache-dir", str(tmp_path_factory.getbasetemp() / "extradeep-cache")]


@pytest.fixture(scope="module")
def epoch_seconds(tmp_path_factory, cache):
    """Predicted seconds per epoch at 8..64 ranks, from `model --json`."""
    path = tmp_path_factory.mktemp("budget") / "m.json"
    assert (
        main(["model", str(SAMPLES), "--param", "ranks", *DATASET, *cache, "--predict", "8:64:8", "--json", str(path)])
        == 0
    )
    doc = json.loads(path.read_text())
    return {p["point"]["ranks"]: p["value"] for p in doc["predictions"] if p["quantity"] == "epoch time"}


def test_deadline_and_budget_give_interval_and_best(capsys, cache, epoch_seconds):
    # deadline for 100 epochs between the times at 16 and 24 ranks: valid from 24 ranks up
    deadline = 100 * (epoch_seconds[16] + epoch_seconds[24]) / 2
    # core-hours for 100 epochs at 40 ranks: the budget allows up to 40 (cost grows with ranks here)
    budget = 100 * epoch_seconds[40] * 40 / 3600 * 1.0001
    code = main(
        [
            "budget",
            str(SAMPLES),
            "--param",
            "ranks",
            *DATASET,
            *cache,
            "--epochs",
            "100",
            "--max-time",
            f"{deadline:.3f}",
            "--max-cost",
            f"{budget:.6f}",
            "--candidates",
            "8:64:8",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Valid ranks: 24 .. 40" in out
    best = dict(re.findall(r"^\s+(efficiency|cost|time)\s+ranks=(\d+)", out, re.M))
    assert best == {"efficiency": "24", "cost": "24", "time": "40"}


def test_impossible_deadline_says_by_how_much(capsys, cache, epoch_seconds):
    fastest = min(epoch_seconds.values())
    code = main(
        [
            "budget",
            str(SAMPLES),
            "--param",
            "ranks",
            *DATASET,
            *cache,
            "--max-time",
            f"{fastest / 2:.4f}",
            "--candidates",
            "8:64:8",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "time limit" in out and "100.0%" in out.replace("99.9%", "100.0%")


def test_missing_limits_is_an_input_error(capsys, tmp_path):
    assert main(["budget", str(tmp_path)]) == 2
    assert "--max-time and/or --max-cost" in capsys.readouterr().err
