"""The main window end to end, offscreen: open, select, filter, remodel, export, survive bad input."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")  # provides the qapp fixture

from extradeep.gui.region_tree import ROW_ROLE  # noqa: E402


def canvas_pixels(tab) -> np.ndarray:
    tab.canvas.draw()
    return np.asarray(tab.canvas.buffer_rgba()).copy()


def region_row(ws, name, metric="time"):
    rows = ws.regions[(ws.regions["region"] == name) & (ws.regions["metric"] == metric)]
    return int(rows.index[0])


def test_open_sample_profiles_models_every_region(window, open_wait, sample_profiles, sample_truth, gui_experiment):
    open_wait(window, sample_profiles)  # gui_experiment filled the read cache, so this is quick
    assert window.last_error == ""
    ws = window.ws
    # Every region the simulator ran inside training or validation steps is in the tree, and no other:
    # work between steps and warm-up-only kernels are not part of the per-step models.
    truth = {(r["region"], r["kind"]) for r in sample_truth["regions"] if {"train", "val"} & set(r["models"])}
    gpu = ws.regions[ws.regions["kind"].isin(["kernel", "memcpy", "memset"])]
    assert set(zip(gpu["region"], gpu["kind"])) == truth
    step = region_row(ws, "step")
    assert ws.models[step] is not None and ws.regions.at[step, "formula"]
    assert window.regions.selected_rows() == [step]  # the step time is shown first
    assert window.tab_pages[0].has_plot


def test_models_are_the_ones_extradeep_model_makes(opened, gui_experiment):
    """Chunked background modeling gives exactly the CLI's models (extradeep.analysis.core)."""
    from extradeep.aggregate.experiment import Experiment
    from extradeep.analysis.core import analyse

    window = opened
    cli = analyse(Experiment.load(gui_experiment), options=window.options.options().modeler)
    ws = window.ws
    expected = cli.region_models.set_index(["region", "kind", "category", "metric"])["formula"]
    shown = ws.regions.set_index(["region", "kind", "category", "metric"])["formula"]
    assert len(shown) == len(expected)
    assert shown.reindex(expected.index).fillna("").tolist() == expected.fillna("").tolist()
    quantities = set(cli.application_models["quantity"])
    assert {"epoch time", "computation", "communication", "memory", "idle"} <= quantities
    for quantity in quantities:
        assert window.app_models.model(quantity).formula() == cli.model(quantity).formula(), quantity


def test_selecting_a_region_changes_the_plot(opened):
    window = opened
    window.tabs.setCurrentIndex(0)
    tab = window.tab_pages[0]
    before = canvas_pixels(tab)
    ws = window.ws
    other = int(ws.rows_for_metric("time").query("kind == 'kernel'")["share"].idxmax())
    window.regions.select_rows([other])
    assert window.regions.selected_rows() == [other]
    assert ws.regions.at[other, "region"][:20] in tab.ax.get_title()
    assert not np.array_equal(before, canvas_pixels(tab))
    # The y axis fits the new region, not the one shown before.
    x = np.linspace(*tab.ax.get_xlim(), 50)
    _, band_hi = ws.models[other].interval(x, level=0.95)
    top = max(ws.points[other].hi.max(), np.max(band_hi))
    assert top <= tab.ax.get_ylim()[1] <= 1.2 * top


def test_a_redraw_on_the_kept_axes_looks_like_a_fresh_plot(opened):
    """The Model tab keeps its axes between selections and only replaces the artists: after an overlay
    of three regions, one region looks exactly as it does on a new tab."""
    from extradeep.gui.tabs.model_tab import ModelTab

    window = opened
    window.tabs.setCurrentIndex(0)
    tab = window.tab_pages[0]
    kernels = window.ws.rows_for_metric("time").query("kind == 'kernel'")["share"].sort_values().index
    shown = [int(r) for r in kernels[-3:]]
    window.regions.select_rows(shown)
    assert len(tab.ax.get_legend().get_texts()) > 3
    window.regions.select_rows([shown[0]])
    fresh = ModelTab()
    fresh.figure.set_size_inches(tab.figure.get_size_inches())
    fresh.refresh(window.current_view())
    try:
        assert np.array_equal(canvas_pixels(tab), canvas_pixels(fresh))
        assert tab.ax.get_ylim() == fresh.ax.get_ylim()
    finally:
        fresh.deleteLater()


def test_filter_keeps_matching_regions_only(opened):
    window = opened
    everything = window.regions.visible_rows()
    window.regions.filter_edit.setText("NCCL")
    kept = window.regions.visible_rows()
    names = window.ws.regions.loc[kept, "region"]
    assert 0 < len(kept) < len(everything)
    assert names.str.lower().str.contains("nccl").all()
    expected = window.ws.rows_for_metric(window.regions.metric)
    assert len(kept) == expected["region"].str.lower().str.contains("nccl").sum()
    shown_groups = set(window.regions.model.groups)
    assert shown_groups == set(window.ws.regions.loc[kept, "group"])  # no empty groups while filtering
    window.regions.filter_edit.clear()
    assert sorted(window.regions.visible_rows()) == sorted(everything)


def test_sort_by_share_orders_each_group_and_keeps_the_selection(opened):
    window = opened
    regions = window.regions
    picked = regions.visible_rows()[3]
    regions.select_rows([picked])
    regions.sort_combo.setCurrentText("Share (largest first)")
    model = regions.model
    for g, group in enumerate(model.groups):
        rows = [model.index(i, 0, model.index(g, 0)).data(ROW_ROLE) for i in range(model.rowCount(model.index(g, 0)))]
        assert sorted(rows) == sorted(model.members[g].tolist())  # nothing lost or duplicated
        shares = window.ws.regions.loc[rows, "share"].fillna(-1).to_numpy()
        assert (np.diff(shares) <= 0).all(), group
    assert regions.selected_rows() == [picked]
    regions.sort_combo.setCurrentIndex(0)


def test_budget_sliders_change_the_valid_configurations(opened):
    window = opened
    cost = next(p for p in window.tab_pages if p.title == "Cost")
    window.tabs.setCurrentWidget(cost)
    assert cost.has_plot, cost.message.text()
    cost.budget_slider.setValue(cost.budget_slider.maximum())
    cost.deadline_slider.setValue(cost.deadline_slider.maximum())
    everything = cost.valid_points()
    cost.deadline_slider.setValue(cost.deadline_slider.maximum() // 3)
    tighter = cost.valid_points()
    assert set(tighter) < set(everything)
    # The valid set is exactly where the application time model meets the deadline.
    deadline, _ = cost.limits()
    model = window.app_models.model(window.app_models.time_quantity)
    x = np.array(everything, float)
    expected = x[np.asarray(model.predict(x), float) <= deadline]
    assert sorted(tighter) == sorted(expected.tolist())
    assert "Best by efficiency" in cost.answer.text()


def test_changing_modeler_options_remodels(window, open_wait, gui_experiment, settle):
    open_wait(window, gui_experiment)
    ws = window.ws
    before = ws.regions["formula"].copy()
    assert before.str.contains("log2").any()  # the default search finds log terms here
    window.options.preset.setCurrentText("Polynomial only")
    settle(lambda: window.runner.busy)
    settle(lambda: not window.runner.busy)
    after = ws.regions["formula"]
    assert not after.str.contains("log2").any()
    assert (after != before).any()


def test_export_plot_png_svg_pdf_and_model_csv(opened, tmp_path):
    import matplotlib.image
    import pandas as pd

    window = opened
    window.tabs.setCurrentIndex(0)
    png = window.export_plot(tmp_path / "plot.png")
    pixels = matplotlib.image.imread(png)
    assert pixels.shape[0] > 200 and pixels[..., :3].std() > 0.05  # not a blank image
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"
    assert window.export_plot(tmp_path / "plot.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert window.export_plot(tmp_path / "plot.pdf").read_bytes()[:5] == b"%PDF-"
    csv = pd.read_csv(window.export_csv(tmp_path / "models.csv"))
    assert len(csv) == len(window.ws.regions)
    assert set(csv["formula"].dropna()) == set(window.ws.regions["formula"]) - {""}


def test_bad_file_shows_an_error_and_the_window_survives(window, open_wait, gui_experiment, tmp_path):
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"this is not a database" * 10)
    open_wait(window, bad)
    assert "broken.sqlite" in window.last_error and "not an SQLite database" in window.last_error
    assert window._error_box is not None and window._error_box.isVisible()  # a dialog, not only the status bar
    assert window._error_box.text() == window.last_error
    assert window.isVisible() and window.ws is None
    window.last_error = ""
    open_wait(window, gui_experiment)  # and it still works afterwards
    assert window.ws is not None and window.last_error == ""


def test_missing_path_and_bad_export_are_errors_not_crashes(window, open_wait, tmp_path):
    open_wait(window, tmp_path / "nowhere")
    assert "no such file" in window.last_error
    assert window.export_plot(tmp_path / "plot.bmp") is None
    assert window.export_csv(tmp_path / "m.csv") is None


def test_recent_files_are_remembered(opened, gui_experiment):
    from PySide6.QtCore import QSettings

    from extradeep.gui.main_window import MainWindow

    assert opened.recent_paths()[0] == str(gui_experiment)
    again = MainWindow(settings=QSettings(opened.settings.fileName(), QSettings.IniFormat))
    assert [a.text() for a in again.recent_menu.actions()][0] == str(gui_experiment)
    again.deleteLater()


def test_export_html_report_uses_the_library_build_report(opened, settle, tmp_path):
    out = tmp_path / "report.html"
    opened.export_report(out)
    settle(lambda: not opened.runner.busy, 120)
    assert opened.last_error == ""
    html = out.read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "</html>" in html
    assert html.count("data:image/png;base64,") >= 3  # figures are embedded


def test_uncaught_errors_in_callbacks_are_shown_not_fatal(window, monkeypatch):
    import sys

    from extradeep.gui.app import install_excepthook

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    install_excepthook(window)
    try:
        raise ValueError("boom")
    except ValueError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    assert window.last_error == "ValueError: boom" and window.isVisible()


def test_cancel_while_opening_leaves_the_window_as_it_was(window, gui_experiment, settle):
    messages = []
    window.runner.cancelled.connect(messages.append)
    window.open_path(gui_experiment)
    assert window.cancel_button.isVisible()
    window.cancel_button.click()
    settle(lambda: not window.runner.busy)
    assert window.ws is None and window.last_error == ""
    assert "load" in messages and not window.cancel_button.isVisible()


def test_dataset_sizes_turn_a_profiles_folder_per_epoch(
    window, open_wait, bare_profiles, sample_truth, gui_experiment, settle
):
    from extradeep.aggregate.experiment import Dataset

    open_wait(window, bare_profiles)  # no extradeep.toml; cached by gui_experiment
    assert window.ws.per == "step"
    step_row = region_row(window.ws, "step")
    per_step = window.ws.points[step_row].value.copy()
    data = sample_truth["dataset"]
    window.set_dataset(Dataset(**data))
    settle(lambda: window.runner.busy)
    settle(lambda: not window.runner.busy)
    ws = window.ws
    assert ws.per == "epoch" and window.last_error == ""
    ranks = ws.points[step_row].X[:, 0]
    n_t = np.floor(data["train_samples"] / ranks / data["batch_per_rank"])
    assert np.all(ws.points[step_row].value > per_step * n_t * 0.999)  # train steps x n_t, plus validation


def test_dataset_dialog_round_trips_the_sizes(qapp):
    from extradeep.aggregate.experiment import Dataset
    from extradeep.gui.dataset_dialog import DatasetDialog

    given = Dataset(train_samples=1_281_167, val_samples=50_000, batch_per_rank=256, weak_scaling=True)
    assert DatasetDialog(given).dataset() == given
