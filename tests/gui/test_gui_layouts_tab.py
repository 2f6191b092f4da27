"""The Layouts tab: the same search as `extradeep layouts`, off the UI thread, with the table, the
plots, the reasons a layout does not fit and the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

LAYOUT_STUDY = Path(__file__).resolve().parents[2] / "sample_profiles" / "layouts" / "profiles"

GPUS = "64,128,256,512"


@pytest.fixture(scope="module")
def cli_search(tmp_path_factory):
    """The search table as `extradeep layouts` writes it for the shipped layout study."""
    from extradeep.cli import main

    out = tmp_path_factory.mktemp("layouts_cli") / "layouts.csv"
    model = LAYOUT_STUDY / "model.toml"
    args = [str(LAYOUT_STUDY), "--model", str(model), "--hardware", str(LAYOUT_STUDY / "hardware.toml")]
    assert main(["layouts", *args, "--gpus", GPUS, "--global-batch", "512", "--max-time", "0.03", "-o", str(out)]) == 0
    return pd.read_csv(out)


def test_layouts_tab_shows_the_best_layout_of_the_cli(window, settle, show_tab, cli_search, tmp_path):
    tab = show_tab(window, "Layouts")
    tab.inputs.setText(str(LAYOUT_STUDY))
    tab.model.setText(str(LAYOUT_STUDY / "model.toml"))
    tab.hardware.setText(str(LAYOUT_STUDY / "hardware.toml"))
    tab.gpus.setText(GPUS)
    tab.global_batch.setValue(512)
    tab.max_time.setValue(0.03)
    tab.search()
    assert tab.result is None and window.runner.busy  # the search runs off the UI thread: not done yet
    settle(lambda: not window.runner.busy and tab.result is not None, 120)
    assert window.last_error == ""
    table = tab.result.table
    assert len(table) == len(cli_search) and tab.table.rowCount() == len(table)
    best, cli_best = table[table["best"]].iloc[0], cli_search[cli_search["best"]].iloc[0]
    layout = ["gpus", "tp", "pp", "dp", "micro_batch", "micro_batches", "zero", "recompute", "schedule"]
    assert [best[c] for c in layout] == [cli_best[c] for c in layout]
    assert best["time"] == pytest.approx(cli_best["time"], rel=1e-9) and best["time"] <= 0.03
    assert f"{int(best['gpus'])}" in tab.best.text() and "calibrated on 5 profiled runs" in tab.best.text()
    assert tab.has_plot and tab.figure.axes
    header = [tab.table.horizontalHeaderItem(h).text() for h in range(tab.table.columnCount())]
    first = {h: tab.table.item(0, j).text() for j, h in enumerate(header)}  # sorted by rank: the best first
    assert first["rank"] == "1" and (first["GPUs"], first["t"], first["p"]) == tuple(
        str(int(best[c])) for c in ("gpus", "tp", "pp")
    )
    # the table sorts by a column as numbers: the fastest layout first
    column = [h for h in range(tab.table.columnCount()) if tab.table.horizontalHeaderItem(h).text() == "time"][0]
    tab.table.sortItems(column)
    shown = [float(tab.table.item(i, column).text()) for i in range(tab.table.rowCount())]
    assert shown == sorted(shown) and shown[0] == pytest.approx(table["time"].min(), rel=1e-3)
    tab.view.setCurrentText("heat map")  # the other figure, from the same table
    settle(lambda: tab.has_plot)
    assert tab.figure.axes[0].get_xlabel() == "GPUs"
    tab.save_report(tmp_path / "layouts.html")
    settle(lambda: not window.runner.busy and (tmp_path / "layouts.html").exists())
    assert "Pareto" in (tmp_path / "layouts.html").read_text()


def test_layouts_tab_says_what_is_wrong_in_one_line(window, settle, show_tab):
    tab = show_tab(window, "Layouts")
    tab.search()  # no model chosen
    assert "model" in window.last_error and tab.result is None  # refused before any work
    tab.model.setText(str(LAYOUT_STUDY / "model.toml"))
    tab.gpus.setText("64,x")
    tab.search()
    assert "GPUs" in window.last_error
    tab.gpus.setText("64")
    tab.inputs.setText(str(LAYOUT_STUDY / "no_such_folder"))
    window.last_error = ""
    tab.search()
    settle(lambda: not window.runner.busy and bool(window.last_error))
    assert "no_such_folder" in window.last_error and "Traceback" not in window.last_error
