"""`extradeep simulate --gpt` and what `extradeep inspect` says about parallel layouts."""

from __future__ import annotations

import json

import pytest
from shared_data import GPT_TINY

from extradeep.cli import main

MODEL = ",".join(f"{k}={v}" for k, v in GPT_TINY.items())


@pytest.fixture(scope="module")
def cli_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli_gpt")
    code = main(
        [
            "simulate",
            str(out),
            "--gpt",
            "tp2.pp2.dp1.mbs1.nmb2",
            "--gpt-truth",
            "tp4.pp4.dp16.mbs1.nmb8",
            "--gpt-model",
            MODEL,
            "--steps",
            "3",
            "--repetitions",
            "1",
            "--quiet",
        ]
    )
    assert code == 0
    return out


def test_simulate_gpt_writes_profiles_and_truth(cli_study):
    truth = json.loads((cli_study / "truth.json").read_text())
    assert truth["format"] == "extradeep-gpt-truth/1"
    assert [e["label"] for e in truth["layouts"]] == ["tp2.pp2.dp1.mbs1.nmb2.zero0.rc0.vpp1"]
    assert truth["truth_layouts"][0]["layout"]["gpus"] == 256
    names = sorted(p.name for p in cli_study.iterdir() if p.name not in ("truth.json", "extradeep.toml"))
    assert names == sorted(truth["layouts"][0]["files"]) and len(names) == 8
    assert 'system = "dgx-8-nvswitch"' in (cli_study / "extradeep.toml").read_text()


def test_inspect_shows_each_field_with_its_source(cli_study, capsys):
    trace = next(cli_study.glob("*.mpi3.pt.trace.json.gz"))
    assert main(["inspect", str(trace), "--model-shape", f"{GPT_TINY['seq']},{GPT_TINY['hidden']}"]) == 0
    out = capsys.readouterr().out
    assert "parallel layout" in out
    assert "tensor parallel (tp)           2            Kineto pg_config" in out
    assert "micro-batch size (mbs)         1" in out
    assert "this rank: stage 1, tp rank 1, dp rank 0" in out


def test_inspect_json_and_folder_runs(cli_study, capsys):
    export = next(cli_study.glob("*.mpi0.sqlite"))
    assert main(["inspect", str(export), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    layout = doc["files"][0]["parallel_layout"]
    assert layout["tp"] == {"value": 2, "source": layout["tp"]["source"]} and "NCCL" in layout["tp"]["source"]
    assert main(["inspect", str(cli_study), "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert "parallel layouts per run" in out
    assert "micro-batch size (mbs)         1            file name (mbs 1)" in out


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--gpt", "tp2.xx3"], "cannot read 'xx3'"),
        (["--gpt", "tp3"], "divide by tp 3"),
        (["--gpt", "tp1", "--gpt-model", "layers=2,wings=3"], "unknown key(s) wings"),
        (["--gpt-truth", "tp8"], "needs at least one --gpt layout"),
    ],
)
def test_simulate_gpt_errors_are_one_line(tmp_path, capsys, argv, problem):
    assert main(["simulate", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and err.count("\n") == 0


def test_inspect_model_shape_is_checked(cli_study, capsys):
    assert main(["inspect", str(cli_study), "--model-shape", "1024"]) == 2
    assert "--model-shape" in capsys.readouterr().err
