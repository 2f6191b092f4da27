"""The GUI opens inputs as the command line does (items 13-14 of issue 17): a folder with its
extradeep.toml, and bad files listed where they stay visible without blocking the good ones."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def test_a_folder_opens_exactly_as_extradeep_model_opens_it(window, open_wait, sample_profiles, gui_experiment,
                                                            tmp_path):
    from extradeep.cli import main
    from extradeep.gui.tabs.scaling_tab import scaling_frame

    out = tmp_path / "model.json"
    assert main(["model", str(sample_profiles), "--predict", "64", "--json", str(out)]) == 0
    cli = json.loads(out.read_text())
    open_wait(window, sample_profiles)
    assert window.last_error == "" and window.ws.per == "epoch"  # the folder's dataset sizes apply
    epoch = next(a for a in cli["application"] if a["quantity"] == "epoch time")
    assert window.app_models.model("epoch time").formula() == epoch["model"]["formula"]
    view = window.current_view()
    assert view.x_range()[1] >= 64
    table = scaling_frame(view, "strong")
    shown = table[table["series"].str.startswith("application") & (table["ranks"] == 64)]["speedup"]
    expected = next(p for p in cli["predictions"] if p["quantity"] == "epoch time")["speedup"]
    assert expected > 1  # strong scaling on a fixed dataset: faster with more ranks
    assert shown.iloc[0] == pytest.approx(expected, rel=1e-9)
