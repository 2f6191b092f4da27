"""The GUI's plot tabs and the HTML report draw the same figures: each tab draws through the report's
panel function (extradeep.report.plots) into its own kept axes, so a tab shows exactly what the panel
draws on a fresh Axes from the same table."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def drawn(ax) -> list:
    """What an Axes shows, comparable across figures: lines (label, data), patches and collections
    (type, label), the legend's entries and the title."""
    lines = [(line.get_label(), np.round(np.asarray(line.get_xydata(), float), 9).tolist()) for line in ax.lines]
    shapes = sorted((type(a).__name__, a.get_label()) for a in [*ax.patches, *ax.collections])
    legend = [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []
    return [lines, shapes, legend, ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]


def fresh_axes(n=1):
    from matplotlib.figure import Figure

    fig = Figure()
    return fig.subplots(1, n, squeeze=False)[0].tolist()


def test_every_plot_tab_draws_what_the_report_panel_draws(opened, show_tab):
    from extradeep.analysis.scaling import predict_table
    from extradeep.gui.app_models import BREAKDOWN, EPOCH_TIME, candidates, frame_of, node_layout
    from extradeep.gui.tabs.scaling_tab import ranks_param, scaling_frame
    from extradeep.report import breakdown_plot, plots

    window = opened
    window.regions.select_rows([])
    try:
        view = window.current_view()
        for title in ("Speedup", "Efficiency"):
            tab = show_tab(window, title)
            assert tab.has_plot, tab.message.text()
            table = scaling_frame(window.current_view(), tab.mode.currentText())
            (ax,) = fresh_axes()
            axes = (ax, None) if title == "Speedup" else (None, ax)
            plots.scaling_panels(
                *axes,
                table,
                view.x_param,
                view.modeled_x_max(),
                by="series",
                highlight=table["series"].iloc[0],
                x_end=view.x_range()[1],
                ideal_speedup=view.x_param == ranks_param(view.ws.params),
                layout=node_layout(view),
            )
            assert drawn(tab.axes[0]) == drawn(ax)
            assert any(line.get_label().startswith("application") for line in tab.axes[0].lines)

        tab = show_tab(window, "Breakdown")
        app = window.app_models
        names = [q for q in (*BREAKDOWN, EPOCH_TIME) if app.model(q) is not None]
        import pandas as pd

        models = pd.DataFrame({"quantity": names, "model": [app.model(q) for q in names]})
        table = predict_table(models, frame_of(view, candidates(view)), view.ws.params, ["quantity"])
        points = app.points[EPOCH_TIME]
        measured = pd.DataFrame({view.x_param: points.X[:, 0], "value": points.value})
        (ax,) = fresh_axes()
        parts = breakdown_plot.breakdown_panel(
            ax, table, view.x_param, app.per, view.modeled_x_max(), areas=True, measured=measured
        )
        ax.legend()
        assert drawn(tab.axes[0]) == drawn(ax)
        pd.testing.assert_frame_equal(tab.parts, parts)

        tab = show_tab(window, "Cost")
        res = tab.result
        deadline, budget = tab.limits()
        ax_t, ax_c = fresh_axes(2)
        best = res.best[res.best["criterion"] == "efficiency"]
        plots.tradeoff_panels(
            ax_t,
            ax_c,
            res.table,
            view.x_param,
            deadline,
            budget,
            res.cost_unit,
            per=app.per,
            best=None if best.empty else best.iloc[0],
            layout=node_layout(view),
        )
        ax_t.legend(), ax_c.legend()
        ax_t.set_title(tab.axes[0].get_title()), ax_c.set_title(tab.axes[1].get_title())
        assert drawn(tab.axes[0]) == drawn(ax_t) and drawn(tab.axes[1]) == drawn(ax_c)

        tab = show_tab(window, "Bottlenecks")
        (ax,) = fresh_axes()
        where = tab.axes[0].get_title().split(" at ", 1)[1]
        plots.bottleneck_panel(ax, tab.ranking, view.ws.per, 15, value="share_of_total", where=where)
        assert drawn(tab.axes[0]) == drawn(ax)
        labels = [t.get_text() for t in tab.axes[0].get_yticklabels()]
        assert labels == [t.get_text() for t in ax.get_yticklabels()] and len(labels) > 3
        # Every bar's label is whole on the canvas and none overlaps the next (sized to the content).
        tab.canvas.draw()
        boxes = sorted((t.get_window_extent() for t in tab.axes[0].get_yticklabels()), key=lambda b: b.y0)
        assert all(b.x0 >= 0 for b in boxes)
        assert all(low.y1 <= high.y0 + 0.5 for low, high in zip(boxes, boxes[1:]))
    finally:
        show_tab(window, "Model")


def test_kept_axes_redraw_like_a_fresh_tab(opened, show_tab):
    """After a redraw with other settings (weak scaling, another overlay), each tab's kept axes show
    what a new tab shows for the same view: nothing of the earlier plot is left behind."""
    from extradeep.gui.tabs.scaling_tab import ScalingTab

    window = opened
    kernels = window.ws.rows_for_metric("time").query("kind == 'kernel'")["share"].sort_values().index
    try:
        tab = show_tab(window, "Speedup")
        window.regions.select_rows([int(r) for r in kernels[-3:]])
        tab.mode.setCurrentText("weak")
        window.regions.select_rows([int(kernels[-1])])
        tab.mode.setCurrentText("strong")
        fresh = ScalingTab("speedup")
        fresh.refresh(window.current_view())
        assert drawn(tab.axes[0]) == drawn(fresh.axes[0])
        assert tab.axes[0].get_ylim() == pytest.approx(fresh.axes[0].get_ylim())
        fresh.deleteLater()
    finally:
        window.regions.select_rows([])
        show_tab(window, "Model")


def test_log_axes_hold_across_redraws_and_show_positive_ranges(opened, show_tab):
    """log x / log y put the plot tabs' axes on a log scale that survives a redraw, with limits the
    data fill (no bottom of 0 on a log axis); unticked, the axes are linear again."""
    window = opened
    try:
        for title in ("Model", "Speedup", "Cost", "Breakdown"):
            tab = show_tab(window, title)
            tab.log_x.setChecked(True)
            tab.log_y.setChecked(True)
            window.refresh_current()  # a redraw with the boxes ticked
            tab.canvas.draw()
            for ax in tab.axes:
                assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log"), title
                assert ax.get_ylim()[0] > 0 and ax.get_xlim()[0] > 0, title
            tab.log_x.setChecked(False)
            tab.log_y.setChecked(False)
            window.refresh_current()
            assert all((ax.get_xscale(), ax.get_yscale()) == ("linear", "linear") for ax in tab.axes), title
    finally:
        show_tab(window, "Model")
