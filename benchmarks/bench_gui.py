"""GUI speed: open a saved experiment with 5,000 regions and draw the first plot; redraw on selection.

Builds the experiment from a small simulator run whose kernel regions are cloned (renamed, scaled)
up to 5,000 regions, saves it, then opens it in the real window offscreen and times
  * open -> first model plot drawn (target < 2 s),
  * a selection change -> the figure drawn again (target < 100 ms) and painted on screen, median and
    max over 30 selections,
  * the longest stall of the UI thread while reading and modeling run (a 10 ms timer's largest gap),
  * all region models done (background, for the record).
Run: QT_QPA_PLATFORM=offscreen python benchmarks/bench_gui.py [--regions 5000] [--experiment exp.sqlite]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def build_experiment(n_regions: int, workdir: Path) -> Path:
    """A saved experiment with `n_regions` regions: simulator kernels cloned with scaled values."""
    from extradeep import load_experiment
    from extradeep.aggregate.experiment import Dataset
    from extradeep.simulate import simulate

    sim = simulate(workdir / "profiles", params={"ranks": [2, 3, 4, 5, 6]}, repetitions=2, train_steps=3, val_steps=1)
    exp = load_experiment(
        [workdir / "profiles"], dataset=Dataset(**sim.truth["dataset"]), progress=False, use_cache=False, jobs=1
    )
    have = exp.points["region"].nunique()
    stepped = exp.points[(exp.points["kind"] == "kernel") & exp.points["phase"].isin(["train", "val"])]
    kernels = sorted(stepped["region"].unique())
    copies = int(np.ceil((n_regions - have) / len(kernels)))
    rng = np.random.default_rng(0)
    scale = {(k, c): rng.uniform(0.05, 2.0) for k in kernels for c in range(copies)}

    def clone(frame: pd.DataFrame) -> pd.DataFrame:
        base = frame[frame["region"].isin(kernels)]
        parts = [frame]
        value_cols = [c for c in frame.columns if c == "value" or c.startswith(("rep_", "rank_"))]
        for c in range(copies):
            part = base.copy()
            factor = part["region"].map(lambda k, c=c: scale[(k, c)]).to_numpy()
            part[value_cols] = part[value_cols].mul(factor, axis=0)
            part["region"] = part["region"] + f"__clone{c}"
            parts.append(part)
        return pd.concat(parts, ignore_index=True)

    exp.values, exp.points = clone(exp.values), clone(exp.points)
    in_steps = exp.points[exp.points["phase"].isin(["train", "val"]) & (exp.points["kind"] != "total")]
    names = in_steps["region"].drop_duplicates()
    keep = set(names.iloc[:n_regions]) | {"step"}
    exp.values = exp.values[exp.values["region"].isin(keep)]
    exp.points = exp.points[exp.points["region"].isin(keep)]
    path = workdir / "exp5000.sqlite"
    exp.save(path)
    return path


def run(n_regions: int, experiment: Path | None = None) -> dict:
    from PySide6.QtCore import QElapsedTimer, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from extradeep.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(["bench"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        path = experiment or build_experiment(n_regions, tmp)
        print(f"saved experiment ready in {time.perf_counter() - t0:.1f} s: {path.stat().st_size / 1e6:.1f} MB")
        t0 = time.perf_counter()
        window = MainWindow(settings=QSettings(str(tmp / "gui.ini"), QSettings.IniFormat))
        window.show()
        _wait(app, lambda: not window.runner.busy, 60)  # the window warms up its imports when it starts
        warm_up = time.perf_counter() - t0
        stall = _stall_meter(app, QTimer, QElapsedTimer)
        model_tab = window.tab_pages[0]
        draws, paints = _draw_and_paint_times(model_tab.canvas)

        def first_plot_drawn():
            ws = window.ws
            rows = window.regions.selected_rows()
            return (
                ws is not None
                and rows
                and ws.models.get(rows[0]) is not None
                and model_tab.has_plot
                and draws
                and draws[-1] > start
            )

        start = time.perf_counter()
        window.open_path(path)
        _wait(app, first_plot_drawn, 60)
        first_plot = time.perf_counter() - start
        _wait(app, lambda: not window.runner.busy, 600)
        all_models = time.perf_counter() - start
        stall["timer"].stop()
        regions = window.ws.regions
        n_models = len(regions)
        time_rows = regions.index[(regions["metric"] == "time") & (regions["kind"] == "kernel")].to_numpy()
        picks = np.random.default_rng(1).choice(time_rows, size=30, replace=False)
        redraws, shown = [], []
        for row in picks:
            done = len(draws)
            t = time.perf_counter()
            window.regions.select_rows([int(row)])
            _wait(app, lambda: len(draws) > done and paints and paints[-1] > draws[-1], 10, pause_s=0)
            redraws.append(draws[-1] - t)
            shown.append(paints[-1] - t)
            idle = time.perf_counter() + 0.05  # the next click comes after the window is idle again
            _wait(app, lambda: time.perf_counter() > idle, 10)
        reference = _reference_draw_ms(model_tab)
        window.close()
    return {
        "reference_draw_ms": reference,
        "warm_up_s": warm_up,
        "regions": int(regions["region"].nunique()),
        "region_models": n_models,
        "first_plot_s": first_plot,
        "all_models_s": all_models,
        "redraw_median_ms": 1e3 * float(np.median(redraws)),
        "redraw_max_ms": 1e3 * float(np.max(redraws)),
        "shown_median_ms": 1e3 * float(np.median(shown)),
        "shown_max_ms": 1e3 * float(np.max(shown)),
        "longest_ui_stall_ms": stall["max_gap_ms"],
        "stall_after_open_s": stall["ended_at"] - start,
    }


def _draw_and_paint_times(canvas) -> tuple[list, list]:
    """Times at which the figure finished drawing (Agg) and at which Qt painted the canvas."""
    draws, paints = [], []
    canvas.mpl_connect("draw_event", lambda event: draws.append(time.perf_counter()))
    paint = canvas.paintEvent

    def paint_event(event):
        paint(event)
        paints.append(time.perf_counter())

    canvas.paintEvent = paint_event
    return draws, paints


def _reference_draw_ms(tab) -> float:
    """Machine speed reference: median time to draw one plain line plot on the same canvas."""
    times = []
    for _ in range(10):
        t = time.perf_counter()
        tab.clear_figure()
        tab.figure.add_subplot().plot(np.arange(100), np.arange(100) ** 0.5)
        tab.canvas.draw()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def _stall_meter(app, QTimer, QElapsedTimer) -> dict:
    """A 10 ms timer; the largest gap between its ticks is the longest time the UI thread was busy."""
    state = {"max_gap_ms": 0.0, "ended_at": 0.0}
    clock = QElapsedTimer()
    clock.start()
    timer = QTimer()
    timer.setInterval(10)

    def tick():
        gap = float(clock.restart())
        if gap > state["max_gap_ms"]:
            state["max_gap_ms"], state["ended_at"] = gap, time.perf_counter()

    timer.timeout.connect(tick)
    timer.start()
    state["timer"] = timer
    return state


def _wait(app, condition, timeout_s: float, pause_s: float = 0.002) -> None:
    from extradeep.gui.app import process_events_until

    process_events_until(condition, timeout_s, pause_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=5000, help="number of regions in the experiment")
    parser.add_argument("--experiment", type=Path, help="use this saved experiment instead of building one")
    args = parser.parse_args()
    result = run(args.regions, args.experiment)
    print(f"window start with import warm-up (background): {result['warm_up_s']:.2f} s")
    print(f"regions: {result['regions']} ({result['region_models']} region/metric models)")
    print(f"open saved experiment -> first model plot: {result['first_plot_s']:.2f} s (target < 2 s)")
    print(
        f"selection change redraw: median {result['redraw_median_ms']:.0f} ms, max "
        f"{result['redraw_max_ms']:.0f} ms (target < 100 ms); on screen (painted): median "
        f"{result['shown_median_ms']:.0f} ms, max {result['shown_max_ms']:.0f} ms"
    )
    print(
        f"longest UI-thread stall while reading and modeling: {result['longest_ui_stall_ms']:.0f} ms "
        f"(ended {result['stall_after_open_s']:.2f} s after open)"
    )
    print(f"reference: one plain line plot draws in {result['reference_draw_ms']:.0f} ms on this machine now")
    print(f"load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"all region models done (background): {result['all_models_s']:.1f} s")


if __name__ == "__main__":
    main()
