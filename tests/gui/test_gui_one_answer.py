"""One question, one answer (issue 20): "what is the time per epoch at 64 ranks?" asked through the
CLI (model, budget, report, plan), the API and the GUI's default view gets one value and one interval.

Before, `model`, `budget` and `report` answered 1.371 s [1.26, 1.48] from the composed epoch-time
model while the GUI opened on the step region's own fit and `plan` on a per-step PMNF: 0.949 s
[0.70, 1.20] on sample_profiles/, intervals that do not even overlap."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

TARGET = 64


@pytest.fixture(scope="module")
def saved(sample_saved):
    """sample_profiles/ modeled and saved by `extradeep model --save --json` (tests/conftest.py)."""
    return sample_saved


@pytest.fixture(scope="module")
def api(saved):
    """The answer of the API: analyse the saved experiment, predict at the target."""
    import extradeep as xd
    from extradeep.aggregate.experiment import Experiment

    analysis = xd.analyse(Experiment.load(saved[0]))
    table = xd.prediction_table(analysis, xd.point_grid([TARGET], analysis.params, "ranks", {}))
    row = table[table["quantity"] == analysis.primary.quantity].iloc[0]
    return analysis, (float(row["T"]), float(row["T_lo"]), float(row["T_hi"]))


def run(argv, capsys) -> str:
    from extradeep.cli import main

    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def test_every_command_the_api_and_the_gui_give_one_value_and_one_interval(
    saved, api, capsys, window, open_wait, tmp_path
):
    import extradeep as xd
    from extradeep.aggregate.experiment import Experiment
    from extradeep.report.text import format_interval, format_value

    path, document = saved
    analysis, (value, lo, hi) = api
    assert analysis.primary.quantity == "epoch time" and lo < value < hi
    shown = format_interval(value, lo, hi)  # "1.37 s [1.26 s, 1.48 s]"
    why = analysis.primary.text

    # model: its JSON holds the same numbers, its table the same text, and it says which model and why
    row = next(p for p in document["predictions"] if p["quantity"] == "epoch time" and p["point"]["ranks"] == TARGET)
    assert np.allclose([row["value"], row["lo"], row["hi"]], [value, lo, hi], rtol=1e-12)
    assert document["primary"]["why"] == why and document["primary"]["quantity"] == "epoch time"
    out = run(["model", str(path), "--predict", str(TARGET)], capsys)
    assert f"ranks={TARGET}" in out and shown in out and why in out

    # budget: the candidate at the target, with the same interval
    out = run(["budget", str(path), "--max-time", "1d", "--candidates", str(TARGET), "--all"], capsys)
    assert shown in out and why in out

    # report: the same value and interval in the table of the epoch time, and the reason
    report = tmp_path / "report.html"
    run(["report", str(path), "--predict", str(TARGET), "-o", str(report)], capsys)
    page = report.read_text()
    assert f'<td class="num">{format_value(value)}</td>' in page
    assert html.escape(f"{format_value(lo)} .. {format_value(hi)}") in page and html.escape(why) in page

    # plan: the prediction it would improve is the same one
    out = run(["plan", str(path), "--target", str(TARGET), "--max-ranks", str(TARGET)], capsys)
    assert f"epoch time at {TARGET} ranks: {shown}" in out and why in out
    plan = xd.plan_measurements(TARGET, TARGET, experiment=Experiment.load(path))
    current = plan.attrs["current"].iloc[0]
    assert np.allclose([current["predicted"], current["lo"], current["hi"]], [value, lo, hi], rtol=1e-12)

    # the GUI's default view: the measured step time, drawn with the primary model
    open_wait(window, path)
    ws = window.ws
    step = int(ws.regions.index[(ws.regions["region"] == "step") & (ws.regions["metric"] == "time")][0])
    assert window.regions.selected_rows() == [step] and window.tabs.currentIndex() == 0
    model = ws.models[step]
    gui_lo, gui_hi = model.interval(np.array([float(TARGET)]), level=0.95)
    gui = [float(model.predict(np.array([float(TARGET)]))[0]), float(gui_lo[0]), float(gui_hi[0])]
    assert np.allclose(gui, [value, lo, hi], rtol=1e-9)
    assert model.formula() == analysis.primary.model.formula()
    legend = [t.get_text() for t in window.tab_pages[0].ax.get_legend().get_texts()]
    assert any(model.formula()[:40] in text for text in legend)
    assert why in window.app_notes.text()


def test_the_step_region_carries_the_primary_model(api):
    """The measured step time as a region is the same measured time: same model, same answer."""
    analysis, (value, lo, hi) = api
    regions = analysis.region_models
    step = regions[(regions["region"] == "step") & (regions["kind"] == "step") & (regions["metric"] == "time")]
    model = step["model"].iloc[0]
    assert model is analysis.primary.model
    x = pd.DataFrame({"ranks": [float(TARGET)]})["ranks"].to_numpy()
    assert np.isclose(float(model.predict(x)[0]), value)
