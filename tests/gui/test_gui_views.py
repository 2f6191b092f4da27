"""What the tabs show stays meaningful (items 15-18 of issue 17): the x range, the breakdown, the
wording and state of menus and exports."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def tab(window, title):
    page = next(p for p in window.tab_pages if p.title == title)
    window.tabs.setCurrentWidget(page)
    return page


def test_the_x_range_ends_where_the_model_means_something(opened, sample_truth, settle):
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
        cost = tab(window, "Cost")
        settle(lambda: cost.result is not None)
        assert (cost.result.table["T"] > 0).all()  # no 0 s epochs
        assert "-100%" not in cost.answer.text()
        bottlenecks = tab(window, "Bottlenecks")
        assert bottlenecks.has_plot and bottlenecks.table.rowCount() > 0
    finally:
        spin.setValue(before)
        tab(window, "Model")
