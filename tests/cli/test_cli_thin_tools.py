"""Thin front ends (issue 22 item 2) for the trace, layout and tool commands: after parsing, each
command makes exactly one call into extradeep.workflows (or the GUI launcher) and prints only what
that call returns. Each workflow is wrapped by a counting spy; what is printed is compared with the
library's own formatting of the result the spy saw."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from extradeep.cli import main
from extradeep.report.inspect_text import inspect_text, profile_text, run_lines
from extradeep.report.layouts import fit_text
from extradeep.report.trace_text import analyses_text, prediction_text
from extradeep.simulate import simulate

SHAPE = "layers = 8\nhidden = 1024\nheads = 16\nseq-len = 1024\nvocab = 51200\n"
HARDWARE = 'gpu = "a100-80gb"\ngpus-per-node = 8\nintra-bandwidth = "150 GB/s"\ninter-bandwidth = "25 GB/s"\n'


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One simulated run of 2 ranks (2 exports)."""
    out = tmp_path_factory.mktemp("run")
    simulate(out, params={"ranks": [2]}, repetitions=1, epochs=2, train_steps=3, val_steps=1, seed=5)
    return out


@pytest.fixture
def spy(monkeypatch):
    """spy(module, name) wraps the workflow `module.name`; returns the list of the results it gave."""
    import importlib

    def wrap(module: str, name: str) -> list:
        target = importlib.import_module(module)
        real, results = getattr(target, name), []

        def counted(*args, **kwargs):
            results.append(real(*args, **kwargs))
            return results[-1]

        monkeypatch.setattr(target, name, counted)
        return results

    return wrap


def test_predict_is_one_call_and_prints_its_result(small_run, spy, capsys):
    calls = spy("extradeep.workflows.traces", "predict_run")
    assert main(["predict", str(small_run), "--what-if", "comm.bandwidth=2", "--analysis", "idle"]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 1
    result = calls[0]
    assert set(result.prediction.summary["scenario"]) >= {"comm.bandwidth=2"}
    assert out == prediction_text(result.prediction, 10) + "\n" + analyses_text(result.analyses) + "\n"


def test_a_bad_option_fails_before_the_workflow_runs(small_run, spy, capsys):
    calls = spy("extradeep.workflows.traces", "predict_run")
    assert main(["predict", str(small_run), "--ranks", "0"]) == 2
    err = capsys.readouterr().err
    assert calls == [] and err == "extradeep: error: --ranks: must be a whole number >= 1 (got 0)\n"


def test_inspect_is_one_call_and_prints_its_result(small_run, spy, capsys):
    calls = spy("extradeep.workflows.inspection", "inspect_profiles")
    assert main(["inspect", str(small_run)]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 1 and len(calls[0].profiles) == 2  # the simulator wrote 2 exports
    result = calls[0]
    assert out == inspect_text(result)
    blocks = out.split("\n\n")  # one block per profile, in the result's order, then the runs' layouts
    assert [b.split("  (")[0] for b in blocks[:2]] == [p.info["path"] for p in result.profiles]
    assert blocks[:2] == [profile_text(p.info) for p in result.profiles]
    assert len(result.runs) == 1 and out.endswith("\n".join(run_lines(result.runs, result.run_params)) + "\n")

    assert main(["inspect", str(small_run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(calls) == 2
    assert [f["path"] for f in doc["files"]] == [p.info["path"] for p in calls[1].profiles]


def test_layouts_is_one_call_and_prints_its_result(published, tmp_path, spy, capsys):
    hardware = tmp_path / "cluster.toml"
    hardware.write_text(HARDWARE)
    calls = spy("extradeep.workflows.layouts", "layout_search")
    table = published("vtrain_multi_node.csv")
    out_file = tmp_path / "fit.csv"
    assert main(["layouts", "--table", str(table), "--hardware", str(hardware), "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 1
    study = calls[0].study
    written = pd.read_csv(out_file)
    assert out == fit_text(study.model, study.observations) + f"\nwrote {len(written)} layouts to {out_file}\n"
    assert len(written) == len(study.observations) == len(calls[0].fit)


def test_plan_layout_model_is_one_call_and_prints_its_result(tmp_path, spy, capsys):
    model = tmp_path / "gpt.toml"
    model.write_text(SHAPE)
    calls = spy("extradeep.workflows.layouts", "layout_plan")
    out_file = tmp_path / "runs.csv"
    args = ["plan", "--layout-model", str(model), "--target", "64,256", "--global-batch", "512"]
    assert main([*args, "--max-ranks", "8", "--budget", "1", "-o", str(out_file)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(calls) == 1
    runs = calls[0].runs
    assert out[0].startswith(f"{len(runs)} runs of {runs.attrs['candidates']} candidates on <= 8 GPUs")
    assert out[-1] == f"wrote {len(runs)} runs to {out_file}"
    assert len(out) == 1 + 2 + len(runs) + 1  # title, header and rule, one row per run, the file
    pd.testing.assert_frame_equal(pd.read_csv(out_file), runs.reset_index(drop=True), check_dtype=False)


def test_simulate_is_one_call_and_prints_its_result(tmp_path, spy, capsys):
    calls = spy("extradeep.workflows.tools", "simulate_profiles")
    outdir = tmp_path / "sim"
    argv = ["simulate", str(outdir), "--param", "ranks=2,3", "--repetitions", "1", "--train-steps", "2", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert len(calls) == 1
    sim = calls[0].simulation
    assert len(sim.files) == 5 == len(list(outdir.glob("*.sqlite")))  # 2 + 3 ranks, one repetition
    assert out == f"wrote 5 exports, truth.json and extradeep.toml to {sim.outdir}\n"


def test_profile_cmd_is_one_call_and_prints_its_result(spy, capsys):
    calls = spy("extradeep.workflows.tools", "profile_jobs")
    assert main(["profile-cmd", "--ranks", "2,4", "--reps", "1", "--app", "net", "--", "python", "t.py"]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 1 and out == calls[0].script
    assert out.count("# run ") == 2 and "net.p4.r1.mpi" in out


def test_instrument_is_one_call_and_prints_its_result(tmp_path, spy, capsys):
    pytest.importorskip("libcst")
    src = tmp_path / "train.py"
    src.write_text("def step(x):\n    return x + 1\n\n\nprint(step(1))\n")
    calls = spy("extradeep.workflows.tools", "instrument_project")
    assert main(["instrument", str(src), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 1 and out == "\n".join(calls[0].lines(verbose=False)) + "\n"
    assert '_extradeep_marks.range("train.step")' in (tmp_path / "out" / "train.py").read_text()


def test_gui_is_one_call_to_the_launcher(monkeypatch, tmp_path):
    """The window itself is the GUI tests' business: here the launcher is replaced and counted."""
    pytest.importorskip("PySide6")
    import extradeep.gui.launch as launch

    calls = []
    monkeypatch.setattr(launch, "launch", lambda path: calls.append(path) or 0)
    assert main(["gui", str(tmp_path)]) == 0
    assert calls == [str(tmp_path)]
