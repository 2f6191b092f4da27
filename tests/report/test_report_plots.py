"""Figures show the numbers they claim to show, and render to non-blank PNG and to SVG."""

import io

import numpy as np
import pandas as pd
import pytest
from matplotlib import image

from extradeep.analysis.budget import BudgetLimits, budget_search
from extradeep.analysis.core import prediction_table
from extradeep.analysis.cost import CostSettings
from extradeep.columns import OVERLAP, UNEXPLAINED
from extradeep.report import breakdown_plot, plots


def _ink(fig):
    pixels = image.imread(io.BytesIO(plots.figure_bytes(fig, "png")), format="png")[..., :3].mean(axis=2)
    return pixels.std(), (pixels < 0.9).mean()


def test_epoch_figure_draws_the_model_and_the_measured_points(small_analysis):
    a = small_analysis
    fig = plots.epoch_figure(a, x_max=40.0)
    ax = fig.axes[0]
    curve = next(line for line in ax.get_lines() if line.get_label().startswith("model"))
    x, y = curve.get_data()
    assert x.min() == pytest.approx(2.0) and x.max() == pytest.approx(40.0)
    np.testing.assert_allclose(y, a.model("epoch time").predict(np.asarray(x, float)))
    measured = a.application_points[a.application_points["quantity"] == "epoch time"]
    points = ax.containers[0]  # errorbar of the measured medians
    np.testing.assert_allclose(points.lines[0].get_ydata(), measured["value"])
    spread, ink = _ink(fig)
    assert spread > 0.05 and ink > 0.01


def test_cost_panel_uses_the_cost_function(small_analysis):
    fig = plots.epoch_figure(small_analysis, x_max=20.0, cost_of=lambda frame, y: 2 * y, cost_label="x")
    left, right = fig.axes[0].get_lines()[0].get_ydata(), fig.axes[1].get_lines()[0].get_ydata()
    np.testing.assert_allclose(right, 2 * left)


def test_scaling_breakdown_tradeoff_bottleneck_and_files(small_analysis, tmp_path):
    a = small_analysis
    grid = pd.DataFrame({"ranks": np.arange(2.0, 33.0, 2.0)})
    table = prediction_table(a, grid, CostSettings())
    scaling = plots.scaling_figure(table, "ranks", 10.0)
    epoch = scaling.axes[1].get_lines()[[line.get_label() for line in scaling.axes[1].get_lines()].index("epoch time")]
    expected = table[table["quantity"] == "epoch time"]["efficiency"].to_numpy()
    np.testing.assert_allclose(epoch.get_ydata(), expected)
    breakdown = breakdown_plot.breakdown_figure(table, "ranks", "epoch", measured_max=10.0)
    result = budget_search(
        a.model("epoch time"), grid, ["ranks"], BudgetLimits(max_time=1e9), CostSettings(), a.baseline
    )
    tradeoff = plots.tradeoff_figure(result.table, "ranks", 1e9, None, "core-hours")
    from extradeep.analysis.bottlenecks import bottleneck_table

    bars = plots.bottleneck_figure(bottleneck_table(a.region_models, {"ranks": 32.0}, ["ranks"]), "epoch")
    for fig in (scaling, breakdown, tradeoff, bars):
        spread, ink = _ink(fig)
        assert spread > 0.05 and ink > 0.01
    paths = plots.save_figure(bars, tmp_path, "bars", ("png", "svg"))
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in paths[1].read_bytes()


def test_breakdown_shows_the_overlap_so_the_parts_add_up_to_the_epoch_time(small_analysis):
    """The report's breakdown is the GUI's: bars of the parts, the stack above the epoch time hatched
    as overlap (and epoch time above the stack as time in no category), so stack - overlap +
    unexplained is the epoch time at every configuration."""
    a = small_analysis
    table = prediction_table(a, pd.DataFrame({"ranks": np.arange(2.0, 33.0, 6.0)}))
    fig = breakdown_plot.breakdown_figure(table, "ranks", "epoch", measured_max=10.0)
    parts = breakdown_plot.breakdown_parts(table, "ranks")
    stack = parts[[p for p in breakdown_plot.BREAKDOWN_PARTS if p in parts.columns]].sum(axis=1)
    epoch = table[table["quantity"] == "epoch time"].sort_values("ranks")["T"].to_numpy()
    np.testing.assert_allclose(stack - parts[OVERLAP] + parts[UNEXPLAINED], epoch)
    ax = fig.axes[0]
    assert (parts[OVERLAP] > 0).any()  # the simulator overlaps communication with computation
    bars = {c.get_label(): c for c in ax.containers}
    assert ("overlap (concurrent streams)" in bars) == bool((parts[OVERLAP] > 0).any())
    assert ("not in any category" in bars) == bool((parts[UNEXPLAINED] > 0).any())
    for label in ("overlap (concurrent streams)", "not in any category"):
        if label in bars:  # hatched from the lower to the higher of stack and epoch time
            assert all(p.get_hatch() for p in bars[label])
            tops = np.array([p.get_y() + p.get_height() for p in bars[label]])
            assert np.allclose(tops, np.maximum(stack, epoch))
