"""The report's Optimisation section: added when a run's strategy search is given, and as a page."""

from __future__ import annotations

import html

import pytest

from extradeep import CostSettings, StrategySearch, build_report
from extradeep.report.optimisation import write_optimisation_page


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    from extradeep.simulate import simulate

    out = tmp_path_factory.mktemp("opt_report")
    simulate(
        out,
        params={"ranks": [4]},
        repetitions=1,
        epochs=2,
        train_steps=3,
        val_steps=1,
        ddp=True,
        gradients=8,
        gradient_profile="uniform",
        nccl_bandwidth_scale=0.3,
    )
    return StrategySearch().fit(out)


def test_the_section_shows_the_verdict_the_bars_and_every_strategy(small_analysis, search, tmp_path):
    cost = CostSettings(price_per_gpu_hour=2.5)
    plain = build_report(small_analysis, None, cost=cost)["html"]
    assert "Optimisation" not in plain
    text = build_report(small_analysis, None, cost=cost, optimization=search)["html"]
    assert "<h2>Optimisation: what to change</h2>" in text
    assert html.escape(search.verdict_) in text
    section = text[text.index("<h2>Optimisation") :]
    assert section.count("data:image/png;base64") == 1  # the before/after bars
    rows = section[section.index("<table>") : section.index("</table>")].count("<tr>") - 1
    assert rows == len(search.strategies_)
    for setting in search.strategies_["setting"]:
        assert html.escape(setting) in section
    page = tmp_path / "opt.html"
    write_optimisation_page(search, page)
    body = page.read_text()
    assert body.startswith("<!DOCTYPE html>") and body.rstrip().endswith("</html>")
    assert html.escape(search.verdict_) in body and "<h2>Optimisation" not in body  # the page's title is h1
