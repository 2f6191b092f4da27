"""The HTML report's tables stay on the page: long names are clipped with the full text in a
tooltip, long cells wrap, and print CSS fits tables to the paper."""

import html
import re

import pandas as pd

from extradeep.analysis.bottlenecks import bottleneck_table
from extradeep.analysis.core import prediction_table
from extradeep.analysis.cost import CostSettings
from extradeep.report.html import CLIP, ReportInputs, build_html


def test_long_region_names_are_clipped_with_the_full_name_in_a_title(small_analysis):
    a = small_analysis
    long_name = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<" + "x" * 200 + ">>(int)"
    grid = pd.DataFrame({"ranks": [16.0, 32.0]})
    table = bottleneck_table(a.region_models, {"ranks": 32.0}, ["ranks"])
    table.loc[table.index[0], "region"] = long_name
    page = build_html(ReportInputs(a, prediction_table(a, grid, CostSettings()), table, CostSettings(), x_max=32.0))
    cells = re.findall(r"<td([^>]*)>([^<]*)</td>", page)
    clipped = [(attrs, text) for attrs, text in cells if 'title="' in attrs and "elementwise_kernel" in attrs]
    assert len(clipped) == 1
    attrs, text = clipped[0]
    assert html.unescape(re.search(r'title="([^"]*)"', attrs).group(1)) == long_name
    assert len(html.unescape(text)) == CLIP and html.unescape(text).endswith("\u2026")
    # no cell shows more than the clip length in the bottleneck table's name and formula columns
    assert all(len(html.unescape(t)) <= CLIP for a_, t in cells if "wrap" in a_)
    assert "overflow-wrap:anywhere" in page and "@media print" in page


def test_prediction_table_shows_samples_per_epoch_and_flags_skipped_data(small_analysis):
    a = small_analysis
    grid = pd.DataFrame({"ranks": [16.0, 112.0]})
    page = build_html(
        ReportInputs(a, prediction_table(a, grid, CostSettings()), pd.DataFrame(), CostSettings(), x_max=112.0)
    )
    assert "training samples per epoch" in page
    assert "49,152" in page  # 48 steps x 16 ranks x 64
    assert "43,008 (! 14.0% skipped)" in page  # 6 steps x 112 x 64 of 50,000
    assert "ranks=112 (43,008 of 50,000, 14.0% left out)" in page  # the note
