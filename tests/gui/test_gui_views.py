"""What the tabs show stays meaningful (items 15-18 of issue 17): the x range, the breakdown, the
wording and state of menus and exports."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def test_the_x_range_ends_where_the_model_means_something(opened, sample_truth, settle, show_tab):
    from extradeep.gui.app_models import candidates

    window, spin = opened, opened.params.x_max
    before = spin.value()
    data = sample_truth["dataset"]
    try:
        spin.setValue(1e6)  # far beyond: strong scaling runs out of training steps first
        last = np.floor(data["train_samples"] / data["batch_per_rank"])  # n_t = floor(D / (G B)) >= 1
        assert spin.value() == window.params.limits.supported == last
        assert f"{last:g}" in window.params.range_note.text() and "extrapolate" in window.params.range_note.text()
        view = window.current_view()
        x = candidates(view)
        assert x[-1] == last and np.array_equal(x, np.round(x))  # whole ranks only
        cost = show_tab(window, "Cost")
        settle(lambda: cost.result is not None)
        assert (cost.result.table["T"] > 0).all()  # no 0 s epochs
        assert "-100%" not in cost.answer.text()
        bottlenecks = show_tab(window, "Bottlenecks")
        assert bottlenecks.has_plot and bottlenecks.table.rowCount() > 0
    finally:
        spin.setValue(before)
        show_tab(window, "Model")


def test_the_breakdown_adds_up_to_the_modeled_epoch_time(opened, settle, show_tab):
    """The stacked categories minus the hatched overlap (plus any unexplained gap) are the epoch-time
    model at every x, and the overlap the stack would hide is really there in this data."""
    from extradeep.columns import OVERLAP, UNEXPLAINED
    from extradeep.gui.app_models import BREAKDOWN, EPOCH_TIME

    page = show_tab(opened, "Breakdown")
    try:
        settle(lambda: page.has_plot)
        parts = page.parts
        stacked = parts[list(BREAKDOWN)].sum(axis=1)
        assert np.allclose(stacked - parts[OVERLAP] + parts[UNEXPLAINED], parts[EPOCH_TIME])
        assert (parts[OVERLAP] >= 0).all() and (parts[UNEXPLAINED] >= 0).all()
        assert (parts[OVERLAP] > 0).any()  # GPU activity summed over streams exceeds the step time here
        labels = [t.get_text() for t in page.figure.axes[0].get_legend().get_texts()]
        assert any(label.startswith("overlap") for label in labels)
    finally:
        show_tab(opened, "Model")


def test_wording_and_state_say_what_is_true(window, open_wait, gui_experiment, tmp_path, monkeypatch):
    """Nothing to export before anything is open; Ctrl+Tab switches tabs; recent inputs are absolute;
    CSV headers carry units; the sign option says the constant is free; no stale progress message;
    the tree's SMAPE and Share columns start on screen."""
    import pandas as pd
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    assert not any(action.isEnabled() for action in window.input_actions)
    monkeypatch.chdir(gui_experiment.parent)
    open_wait(window, gui_experiment.name)  # a relative path
    assert window.recent_paths()[0] == str(gui_experiment.resolve())
    assert all(action.isEnabled() for action in window.input_actions)
    assert window.statusBar().currentMessage() != window._progress_message or not window._progress_message
    QTest.keyClick(window.regions.tree, Qt.Key_Tab, Qt.ControlModifier)
    assert window.tabs.currentIndex() == 1
    QTest.keyClick(window.regions.tree, Qt.Key_Backtab, Qt.ControlModifier | Qt.ShiftModifier)
    assert window.tabs.currentIndex() == 0
    header = pd.read_csv(window.export_csv(tmp_path / "m.csv")).columns
    assert {"smape_percent", "share_of_group_fraction", "unit"} <= set(header) and "smape" not in header
    assert "constant" in window.options.term_signs.toolTip()
    assert window.options.options().modeler["nonnegative"] == "auto"  # as `extradeep model` without --nonnegative
    tree = window.regions.tree
    share_starts = tree.header().sectionViewportPosition(4)
    assert share_starts + 40 <= tree.viewport().width()  # room for "12.3%" on screen
