"""Node boundaries on the speedup, efficiency and cost plots, and the nodes each predicted point
spans, from the layout the simulator's exports carry (4-GPU nodes), checked against its truth."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from extradeep.report import plots

NODE = "node boundary"


@pytest.fixture(scope="module")
def on_4gpu_nodes(tmp_path_factory):
    from extradeep import load_experiment
    from extradeep.aggregate.experiment import Dataset
    from extradeep.analysis.core import analyse
    from extradeep.simulate import simulate

    out = tmp_path_factory.mktemp("nodes-report")
    sim = simulate(
        out,
        params={"ranks": [2, 3, 4, 6, 8]},
        topology="4gpu-1nic-per-gpu",
        scaling="weak",
        repetitions=1,
        epochs=2,
        train_steps=3,
        val_steps=1,
        truth_ranks=[16, 24],
    )
    experiment = load_experiment(
        [out], progress=False, use_cache=False, dataset=Dataset(50000, 10000, 64, weak_scaling=True)
    )
    return sim, analyse(experiment)


def _boundaries(ax) -> list[float]:
    return sorted(
        float(line.get_xdata()[0])
        for line in ax.get_lines()
        if line.get_linestyle() == "-." and np.ptp(line.get_xdata()) == 0
    )


def test_mark_node_boundaries_on_any_axes():
    ax = Figure().subplots()
    ax.plot([1, 20], [0, 1])
    assert plots.mark_node_boundaries(ax, 4, 1.0, 20.0) == [4.0, 8.0, 12.0, 16.0]
    assert _boundaries(ax) == [4.0, 8.0, 12.0, 16.0]
    labels = [label for label in ax.get_legend_handles_labels()[1] if NODE in label]
    assert labels == ["node boundary (4 GPUs per node)"]  # one legend entry, not one per line
    # a boundary is where a run fills whole nodes: 8 ranks on 8-GPU nodes is the edge, not inside
    assert plots.mark_node_boundaries(Figure().subplots(), {"gpus_per_node": 8}, 8.0, 24.0) == [16.0]
    for unknown in (None, 1, {}, {"gpus_per_node": None}):
        assert plots.mark_node_boundaries(Figure().subplots(), unknown, 1.0, 100.0) == []


def test_many_boundaries_are_thinned_and_say_so():
    ax = Figure().subplots()
    drawn = plots.mark_node_boundaries(ax, 4, 0.0, 1024.0)
    assert 0 < len(drawn) <= plots.MAX_BOUNDARIES
    step = np.diff(drawn)
    assert np.all(step == step[0]) and step[0] % 4 == 0 and drawn[0] == step[0]
    assert any(f"every {step[0] / 4:g} nodes)" in label for label in ax.get_legend_handles_labels()[1])


def test_report_marks_boundaries_and_counts_nodes(on_4gpu_nodes, tmp_path):
    from extradeep.report.build import build_report

    sim, analysis = on_4gpu_nodes
    assert analysis.gpus_per_node == sim.truth["topology"]["gpus_per_node"] == 4
    result = build_report(analysis, tmp_path / "r.html", grid=None)
    figures = result["figures"]
    cost_panel = figures["epoch"].axes[1]
    speedup, efficiency = figures["scaling"].axes[:2]
    tradeoff = figures["tradeoff"].axes[0]
    for ax in (cost_panel, speedup, efficiency, tradeoff):
        lo, hi = ax.get_xlim()
        expected = [float(x) for x in range(4, int(hi) + 1, 4) if lo < x < hi]
        assert _boundaries(ax) == expected and expected
    assert any(NODE in text.get_text() for text in figures["tradeoff"].legends[0].texts)
    # the nodes per predicted point are the simulator's: ranks fill nodes of 4 GPUs
    table = result["predictions"]
    truth_nodes = {p["params"]["ranks"]: p["nodes"] for p in sim.truth["truth_points"]}
    for _, row in table.iterrows():
        if row["ranks"] in truth_nodes:
            assert row["nodes"] == truth_nodes[row["ranks"]]
        assert row["nodes"] == np.ceil(row["ranks"] / 4) and row["nodes"] == int(row["nodes"])
    assert "nodes (4 GPUs each)" in result["html"] and "node boundaries (4 GPUs per node" in result["html"]
    # the report says which signal gave the layout, in the caption and in the notes
    assert "4 GPUs per node, from the profiles' host names)" in result["html"]
    assert "layout from host names (TARGET_INFO_SYSTEM_ENV Hostname)" in result["html"]


def test_cli_prediction_table_says_how_many_nodes(on_4gpu_nodes):
    from extradeep.analysis.core import prediction_table
    from extradeep.analysis.workflows import prediction_grid
    from extradeep.report.summary import prediction_section

    _, analysis = on_4gpu_nodes
    analysis, grid = prediction_grid(analysis, [4.0, 5.0, 16.0, 24.0], None)
    text = prediction_section(analysis, prediction_table(analysis, grid), 0.95, None)
    header = next(line for line in text.splitlines() if "point" in line and "nodes" in line)
    column = header.split().index("nodes")
    rows = {line.split()[0]: line.split()[column] for line in text.splitlines() if line.strip().startswith("ranks=")}
    assert rows == {"ranks=4": "1", "ranks=5": "2", "ranks=16": "4", "ranks=24": "6"}
    assert "nodes of 4 GPUs" in text


def test_no_layout_no_boundaries(small_analysis):
    from extradeep.analysis.core import prediction_table
    from extradeep.analysis.workflows import prediction_grid

    assert small_analysis.gpus_per_node is None  # the default simulation puts every rank on its own host
    analysis, grid = prediction_grid(small_analysis, [16.0, 32.0], None)
    assert "nodes" not in prediction_table(analysis, grid).columns
    fig = plots.epoch_figure(analysis, 32.0, cost_of=lambda frame, y: y)
    assert not any(_boundaries(ax) for ax in fig.axes)
