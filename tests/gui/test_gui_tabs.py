"""The analysis tabs on real inputs: predictor replay and what-if, Extra-P text, scaling, breakdown."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def test_predictor_tab_replays_a_simulator_run_and_answers_a_what_if(opened, settle, show_tab):
    tab = show_tab(opened, "Predictor")
    labels = list(tab.runs)
    assert "ranks=4, rep=1" in labels  # every run of the experiment can be replayed
    tab.run_combo.setCurrentText("ranks=4, rep=1")
    tab.kernel_factor.setValue(0.5)  # GEMM-like kernels twice as fast
    tab.replay()
    settle(lambda: not opened.runner.busy)
    settle(lambda: tab.prediction is not None and tab.has_plot)
    assert opened.last_error == ""
    pred = tab.prediction
    assert sorted(pred.files["rank"].unique()) == [0, 1, 2, 3]
    bars = tab.comparison(pred).set_index("label")["ms"]
    # Replaying measured durations reproduces the measured step time (the predictor's own check) ...
    assert bars["replayed"] == pytest.approx(bars["measured"], rel=0.03)
    # ... the what-if is faster, and the empirical model at the same point is shown beside it.
    what_if = next(v for k, v in bars.items() if k.startswith("what-if: kernel:*gemm*=0.5"))
    assert what_if < bars["replayed"]
    empirical = next(v for k, v in bars.items() if k.startswith("empirical model (ranks=4"))
    assert empirical == pytest.approx(bars["measured"], rel=0.15)
    # The timeline shows a lane per rank and stream, and the critical path is outlined.
    ax = tab.figure.axes[0]
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert {lane.split(" · ")[0] for lane in lanes} - {"all ranks"} == {f"rank {r}" for r in range(4)}
    # Lane labels never overlap (issue 17 item 16: ~49 lanes of labels were drawn on top of each other),
    # at the window's size and at a smaller one.
    from matplotlib.backend_bases import ResizeEvent

    for inches in (None, 2.6):  # 2.6 inches: a short window, or a splitter dragged down
        if inches:
            tab.figure.set_size_inches(tab.figure.get_figwidth(), inches, forward=False)
            tab.canvas.callbacks.process("resize_event", ResizeEvent("resize_event", tab.canvas))
        tab.canvas.draw()
        boxes = sorted((t.get_window_extent() for t in ax.get_yticklabels() if t.get_text()), key=lambda b: b.y0)
        assert len(boxes) >= 2
        assert all(low.y1 <= high.y0 + 0.5 for low, high in zip(boxes, boxes[1:]))
    # Every op of the shown step's critical path is outlined: together they cover its whole span.
    crit = tab.critical_drawn
    assert len(crit) > 0 and crit["step_id"].nunique() == 1
    span = pred.breakdown.set_index("step_id").at[crit["step_id"].iloc[0], "span"]
    assert crit["contribution"].sum() + crit["wait"].sum() == pytest.approx(span, rel=1e-6)
    tab.kernel_factor.setValue(1.0)


def test_speedup_efficiency_and_breakdown_are_drawn_from_the_models(opened, show_tab):
    from extradeep.analysis.core import samples_per_epoch_function
    from extradeep.analysis.scaling import scaling_table

    opened.regions.select_rows([])
    for title in ("Speedup", "Efficiency"):
        tab = show_tab(opened, title)
        assert tab.has_plot, tab.message.text()
        line = next(ln for ln in tab.figure.axes[0].get_lines() if ln.get_label().startswith("application"))
        x, y = line.get_data()
        app = opened.app_models
        model = app.model(app.time_quantity)
        import pandas as pd

        ws = opened.ws
        # per sample, as the CLI: floor() in the steps per epoch must not pass for speedup
        samples = samples_per_epoch_function(ws.dataset, ws.per, "strong", ws.fixed)
        table = scaling_table(
            pd.DataFrame({"q": ["t"], "model": [model]}),
            pd.DataFrame({"ranks": x}),
            ["ranks"],
            ["q"],
            {"ranks": float(x[0])},
            samples=samples,
        )
        assert np.allclose(y, table[title.lower()], rtol=1e-9)
    tab = show_tab(opened, "Breakdown")
    assert tab.has_plot, tab.message.text()
    labels = {t.get_text() for t in tab.figure.axes[0].get_legend().get_texts()}
    assert {"computation (model)", "communication (model)", "memory (model)"} <= labels
    show_tab(opened, "Model")


def test_bottleneck_ranking_puts_the_fastest_growing_region_first(opened, show_tab):
    tab = show_tab(opened, "Bottlenecks")
    assert tab.has_plot
    ranking = tab.ranking
    keys = [
        opened.ws.models[r].growth_key()
        for r in opened.ws.regions.index
        if opened.ws.models.get(r) is not None
        and opened.ws.regions.at[r, "metric"] == "time"
        and opened.ws.regions.at[r, "category"] in ("computation", "communication", "memory")
    ]
    first = ranking.iloc[0]
    row = opened.ws.regions[
        (opened.ws.regions["region"] == first["region"]) & (opened.ws.regions["metric"] == "time")
    ].index[0]
    assert tuple(opened.ws.models[row].growth_key()) == max(map(tuple, keys))
    assert tab.table.rowCount() == min(len(ranking), 200)
    show_tab(opened, "Model")


def write_extrap(path):
    """Two regions measured at six points, three repetitions: 3 + 0.5 p and 1 + 0.2 p log2 p (+-1%)."""
    import pandas as pd

    from extradeep.modeling import write_extrap_text

    p = np.array([2, 4, 8, 16, 32, 64], float)
    rows = [
        {"region": name, "metric": "time", "p": x, "value": f(x) * (1 + 0.01 * k)}
        for name, f in (("sweep", lambda x: 3 + 0.5 * x), ("exchange", lambda x: 1 + 0.2 * x * np.log2(x)))
        for x in p
        for k in (-1, 0, 1)
    ]
    write_extrap_text(path, pd.DataFrame(rows), ["p"])
    return path


def test_extrap_text_opens_with_region_models_and_no_cost_view(window, open_wait, tmp_path, show_tab):
    path = write_extrap(tmp_path / "app.txt")
    open_wait(window, path)
    assert window.last_error == ""
    ws = window.ws
    assert set(ws.regions["region"]) == {"sweep", "exchange"}
    sweep = ws.models[int(ws.regions.index[ws.regions["region"] == "sweep"][0])]
    assert sweep.predict(128.0) == pytest.approx(3 + 0.5 * 128, rel=0.05)
    cost = show_tab(window, "Cost")
    assert not cost.has_plot and "Extra-P" in cost.message.text()
    assert show_tab(window, "Predictor").has_plot is False


def test_opening_another_input_while_modeling_shows_only_the_new_one(
    window, open_wait, gui_experiment, tmp_path, settle
):
    window.open_path(gui_experiment)
    settle(lambda: window.ws is not None)  # read; its regions are still being modeled
    open_wait(window, write_extrap(tmp_path / "app.txt"))
    settle(lambda: not window.runner.busy)
    assert window.last_error == ""
    assert set(window.ws.regions["region"]) == {"sweep", "exchange"}
    assert window.app_models is None  # nothing of the experiment's application models is left
    assert set(window.ws.models) == set(window.ws.regions.index)


def test_predictor_tab_searches_what_to_change_in_the_background(opened, settle, show_tab):
    tab = show_tab(opened, "Predictor")
    tab.run_combo.setCurrentText("ranks=4, rep=1")
    tab.replay()
    settle(lambda: not opened.runner.busy)
    settle(lambda: tab.prediction is not None)
    tab.optimize_button.click()
    assert opened.runner.busy  # the search runs on a pool thread; the window stays responsive
    assert "Searching" in tab.strategies.text()
    settle(lambda: tab.search is not None, timeout_s=180)
    settle(lambda: not opened.runner.busy)
    assert opened.last_error == ""
    search = tab.search
    # the same run as the replay: the search's measured step is the prediction's
    summary = tab.prediction.summary
    measured = summary[(summary["phase"] == "train")]["measured"].iloc[0]
    assert search.measured_step_ == pytest.approx(measured, rel=1e-9)
    assert search.verdict_.split(";")[0].replace(">", "&gt;") in tab.strategies.text()
    # the before/after bars: the measured run's critical path adds up to its step time
    settle(lambda: len(tab.figure.axes) >= 3)
    bars = tab.figure.axes[2]
    measured_bar = sum(
        p.get_width() for p in bars.patches if abs(p.get_y() + p.get_height() / 2 - (len(bars.get_yticks()) - 1)) < 0.5
    )
    assert measured_bar == pytest.approx(1e3 * sum(search.breakdowns_.iloc[0][1:]), rel=1e-6)
    assert measured_bar == pytest.approx(1e3 * measured, rel=0.05)
