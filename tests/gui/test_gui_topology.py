"""The GUI's application models are `extradeep model`'s: one library function fits both, so on a study
measured across node boundaries the GUI predicts the same epoch time as the command line, and it shows
the layout (GPUs per node, nodes per configuration) and the one-node warning under the plots."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

DATASET = "train-samples = 50000\nval-samples = 10000\nbatch-size = 64\nweak-scaling = true\n"
SMALL = {"repetitions": 1, "epochs": 2, "train_steps": 3, "val_steps": 1, "scaling": "weak"}


def study(folder, ranks, topology, signals="all"):
    from extradeep.simulate import simulate

    simulate(folder, params={"ranks": ranks}, topology=topology, signals=signals, **SMALL)
    (folder / "extradeep.toml").write_text(DATASET)
    return folder


def cli_predictions(folder, tmp_path, points="32,64") -> dict:
    """`extradeep model --predict` (in this process: a fresh interpreter would add only its start-up)."""
    from extradeep.cli import main

    out = tmp_path / "model.json"
    argv = ["model", str(folder), "--predict", points, "--json", str(out), "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    rows = json.loads(out.read_text())["predictions"]
    return {float(r["point"]["ranks"]): r["value"] for r in rows if r["quantity"] == "epoch time"}


def test_gui_predicts_the_epoch_time_of_extradeep_model_across_nodes(window, open_wait, tmp_path):
    # the exports keep the layout only in their GPU UUID sets and EXPORT_HOST
    folder = study(tmp_path / "nodes4", [2, 3, 4, 8, 12, 16], "4gpu-1nic-per-gpu", signals="uuids")
    expected = cli_predictions(folder, tmp_path)
    open_wait(window, folder)
    assert window.last_error == ""
    model = window.app_models.model("epoch time")
    x = np.array(sorted(expected))
    np.testing.assert_allclose(np.asarray(model.predict(x), float), [expected[v] for v in x], rtol=1e-9)
    assert model.train.comm is not None  # the step is computation + exposed communication, by node
    notes = window.app_notes.text()
    assert window.app_notes.isVisibleTo(window)
    assert "4 GPUs per node" in notes and "16 ranks on 4 nodes" in notes
    assert "layout from GPU UUID sets (TARGET_INFO_GPU)" in notes  # which signal gave it
    assert "every measured point lies inside one node" not in notes
    # The speedup, efficiency and cost plots mark where a run starts to fill another node (4 GPUs each).
    from extradeep.report.plots import NODE_COLOR

    for title in ("Model", "Speedup", "Efficiency", "Cost"):
        page = next(p for p in window.tab_pages if p.title == title)
        window.tabs.setCurrentWidget(page)
        for ax in page.axes:
            marks = [line.get_xdata()[0] for line in ax.lines if line.get_color() == NODE_COLOR]
            assert marks and all(x % 4 == 0 for x in marks), title
            assert any(t.get_text().startswith("node boundary (4 GPUs per node") for t in ax.get_legend().get_texts())


def test_gui_warns_when_every_measured_point_lies_inside_one_node(window, open_wait, tmp_path):
    folder = study(tmp_path / "node1", [2, 3, 4, 6, 8], "dgx-8-nvswitch")
    open_wait(window, folder)
    assert window.last_error == ""
    notes = window.app_notes.text()
    assert "every measured point lies inside one node" in notes and "8 GPUs per node" in notes
    assert "<b" in notes.split("every measured point")[0]  # the warning stands out
