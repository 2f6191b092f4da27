"""The layout search in HTML and figures: the heat map's cells are the search's numbers, the Pareto
points are not dominated, and the report names the search's best layout (or why there is none)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from extradeep.layout_study import LayoutStudy, run_layout_study
from extradeep.layouts.search import best_layout
from extradeep.report.layout_figures import (
    FEASIBLE,
    INFEASIBLE,
    MAX_ANNOTATED,
    NO_LAYOUT,
    heatmap_cells,
    heatmap_figure,
    pareto_figure,
)
from extradeep.report.layout_html import build_layout_report

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles" / "layouts"


@pytest.fixture(scope="module")
def searched():
    """GPT 39.1B on vTrain's cluster and on H100s, physics alone: some layouts do not fit in 80 GB."""
    study = LayoutStudy(
        model=SAMPLES / "gpt-39b.toml",
        hardware=SAMPLES / "a100-cluster.toml",
        search_hardware=[SAMPLES / "a100-cluster.toml", "h100-sxm"],
        gpus=[64, 96, 128, 512],
        global_batch=1536,
        max_time=40.0,
    )
    return run_layout_study(study)


def test_heatmap_cells_are_the_search_numbers(searched):
    table = searched.table
    cells = heatmap_cells(table)
    pairs = table[["hardware", "tp", "pp"]].drop_duplicates()
    assert len(cells) == len(pairs) * table["gpus"].nunique()  # every (t, p) row at every GPU count
    states = set()
    for cell in cells.itertuples(index=False):
        group = table[
            (table["hardware"] == cell.hardware)
            & (table["tp"] == cell.tp)
            & (table["pp"] == cell.pp)
            & (table["gpus"] == cell.gpus)
        ]
        states.add(cell.state)
        if cell.state == NO_LAYOUT:
            assert group.empty and np.isnan(cell.value)
        elif cell.state == INFEASIBLE:
            assert len(group) and not group["fits"].any() and np.isnan(cell.value)
            assert cell.reason == group.loc[group["peak_memory"].idxmin(), "reason"]
            assert cell.reason.startswith("needs ") and "GiB per GPU" in cell.reason
        else:
            assert cell.value == group.loc[group["fits"], "time"].min() > 0
            assert cell.best == bool(group["best"].any())
    assert states == {FEASIBLE, INFEASIBLE, NO_LAYOUT}  # the fixture covers every kind of cell
    assert cells["best"].sum() == 1  # the recommended layout lies in exactly one cell


def test_heatmap_figure_draws_the_cells(searched):
    one = searched.table[searched.table["hardware"] == searched.table["hardware"].iloc[0]]
    one.attrs = searched.table.attrs
    cells = heatmap_cells(one)
    assert len(cells) <= MAX_ANNOTATED and (cells["state"] == INFEASIBLE).any()
    fig = heatmap_figure(one)
    image = fig.axes[0].images[0].get_array()
    rows = list(dict.fromkeys(cells["row"]))
    gpus = sorted(cells["gpus"].unique())
    for cell in cells.itertuples(index=False):
        shown = image[rows.index(cell.row), gpus.index(cell.gpus)]
        if cell.state == FEASIBLE:
            assert shown == cell.value
        else:
            assert np.ma.is_masked(shown)  # no colour: hatched (infeasible) or '-' (no layout)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum(t.startswith("needs ") for t in texts) == (cells["state"] == INFEASIBLE).sum()


def test_pareto_points_are_not_dominated_and_the_front_is_complete(searched):
    table = searched.table
    fits = table[table["fits"]]
    time, cost = fits["time"].to_numpy(), fits["cost"].to_numpy()
    for i, on_front in enumerate(fits["pareto"].to_numpy()):
        dominated = ((time <= time[i]) & (cost <= cost[i]) & ((time < time[i]) | (cost < cost[i]))).any()
        assert on_front != dominated
    assert not table.loc[~table["fits"], "pareto"].any()
    line = pareto_figure(table).axes[0].lines[0]
    front = table[table["pareto"]].sort_values("time")
    assert np.array_equal(line.get_xdata(), front["time"].to_numpy())
    assert np.array_equal(line.get_ydata(), front["cost"].to_numpy())


@pytest.mark.parametrize("hardware", ["one", "both"])
def test_no_two_tick_labels_of_the_figures_overlap(searched, hardware, overlapping_tick_labels):
    table = searched.table
    if hardware == "one":  # one GPU type spans fewer decades: more minor ticks fall on the axes
        table = table[table["hardware"] == table["hardware"].iloc[0]]
        table.attrs = searched.table.attrs
    for fig in (pareto_figure(table), heatmap_figure(table)):
        assert overlapping_tick_labels(fig) is None


def test_report_names_the_best_layout_and_the_infeasible_cells(searched, tmp_path):
    out = tmp_path / "layouts.html"
    result = build_layout_report(searched, out)
    text = out.read_text()
    assert result["html"] == text and set(result["figures"]) == {"layout_heatmap", "layout_pareto"}
    best = best_layout(searched.table)
    assert best is not None and best["time"] <= 40.0
    line = f"GPUs {int(best['gpus'])}, t {int(best['tp'])}, p {int(best['pp'])}, d {int(best['dp'])}"
    assert line in text and f"{best['time']:.4g}" in text
    infeasible = (heatmap_cells(searched.table)["state"] == INFEASIBLE).sum()
    assert f"{infeasible} cells where no layout fits in GPU memory" in text
    assert "physics alone" in text and text.count("data:image/png;base64,") == 2


def test_report_says_why_no_layout_is_recommended(searched):
    from dataclasses import replace

    strict = run_layout_study(replace(searched.study, search_hardware=[], max_time=0.001))
    text = build_layout_report(strict)["html"]
    assert "No layout recommended: the fastest layout takes" in text and "over --max-time 0.001 s" in text
