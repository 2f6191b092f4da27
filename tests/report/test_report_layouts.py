"""The layout model's text: errors in percent stay readable whatever their size."""

from __future__ import annotations

import pytest

from extradeep.report.layouts import error_percent


@pytest.mark.parametrize(
    "value,text",
    [(6.6, "6.6%"), (0.0, "0.0%"), (9999.94, "9999.9%"), (12345.0, "1.23e+04%"), (1.38e300, "1.38e+300%")],
)
def test_error_percent_is_short_at_any_size(value, text):
    """A step time of 1e-300 ms in a table once printed its fit error as a 300-digit number."""
    assert error_percent(value) == text


def test_the_search_says_what_to_profile_for_what_its_best_layout_extrapolates(published):
    """Calibrated on vTrain's single node, the best 256-GPU layout of GPT 18.4B leans on DP across
    nodes, which no run measured: the text names the run that would. Calibrated on the multi-node
    runs as well, it measured that, and says nothing of it."""
    from pathlib import Path

    import pandas as pd

    from extradeep.layouts.model import LayoutModel
    from extradeep.layouts.search import best_layout, search_layouts
    from extradeep.layouts.validation import VTRAIN_CLUSTER, vtrain_tables
    from extradeep.layouts.workload import TransformerShape
    from extradeep.report.layout_html import best_text
    from extradeep.report.layouts import MEASURES, search_text

    folder = Path(published("vtrain_multi_node.csv")).parent
    single, multi = vtrain_tables(folder)
    shape = TransformerShape(layers=40, hidden=6144, heads=48, seq_len=2048)
    line = MEASURES["dp across nodes"]
    for observed, crossed in ((single, False), (pd.concat([single, multi], ignore_index=True), True)):
        model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(observed)
        table = search_layouts(model, shape, [256], 1024, hardware=VTRAIN_CLUSTER)
        leans = "dp across nodes" in best_layout(table)["extrapolated"]
        assert leans is not crossed
        text = search_text(model, table)
        assert (line in text) is leans
        assert ("What to profile next" in text) or crossed
        assert (line in best_text(table)) is leans  # the HTML report and the GUI's layouts tab


def test_an_assumed_algorithm_asks_for_a_second_group_shape_across_nodes():
    """A layout that leans on how collectives cross nodes, which the profiles' one group shape could
    not tell, is told which run would measure it; the GPU count alone asks for nothing."""
    from extradeep.report.layouts import MEASURES, runs_to_profile

    assert runs_to_profile("gpus,algorithm assumed") == [MEASURES["algorithm assumed"]]
    assert "another number of GPUs per node" in MEASURES["algorithm assumed"]
    assert runs_to_profile("gpus") == []
