"""GUI speed per tab: the time to redraw each plot tab (refresh from the models + one Agg draw).

Opens sample_profiles/ (saved as an experiment with its dataset sizes) in the real window offscreen,
waits for every model, then times for each plot tab the median and max of 15 redraws (a parameter
change: the tab's `refresh` and a full `canvas.draw()`), the Cost tab's slider move, and a plain line
plot on the same canvas as the machine's speed reference at that moment.
Run: QT_QPA_PLATFORM=offscreen python benchmarks/bench_gui_tabs.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
SAMPLES = Path(__file__).resolve().parents[1] / "sample_profiles"
TABS = ("Model", "Speedup", "Efficiency", "Cost", "Breakdown", "Bottlenecks")


def saved_sample(tmp: Path) -> Path:
    import json

    from extradeep import load_experiment
    from extradeep.aggregate.experiment import Dataset

    truth = json.loads((SAMPLES / "truth.json").read_text())
    exp = load_experiment([SAMPLES], dataset=Dataset(**truth["dataset"]), progress=False)
    exp.save(tmp / "sample.sqlite")
    return tmp / "sample.sqlite"


def timed(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times)), 1e3 * float(np.max(times))


def run(repeat: int) -> dict:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from extradeep.gui.app import process_events_until
    from extradeep.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(["bench"])  # noqa: F841 (kept alive)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = saved_sample(tmp)
        window = MainWindow(settings=QSettings(str(tmp / "gui.ini"), QSettings.IniFormat))
        window.show()
        window.open_path(path)
        process_events_until(lambda: window.runner.busy, 60)
        process_events_until(lambda: not window.runner.busy and window.app_models is not None, 120)
        pages = {p.title: p for p in window.tab_pages}
        for title in TABS:
            page = pages[title]
            window.tabs.setCurrentWidget(page)
            process_events_until(lambda: not window.runner.busy, 60)

            def redraw(page=page):
                page.refresh(window.current_view())
                page.canvas.draw()

            redraw()
            results[title] = timed(redraw, repeat)
        cost = pages["Cost"]
        window.tabs.setCurrentWidget(cost)
        positions = iter(np.linspace(200, 900, 10 * repeat).astype(int))

        def slide():
            cost.deadline_slider.setValue(next(positions))
            cost.canvas.draw()

        results["Cost (slider)"] = timed(slide, repeat)
        model = pages["Model"]

        def plain():
            model.clear_figure()
            model.figure.add_subplot().plot(np.arange(100), np.arange(100) ** 0.5)
            model.canvas.draw()

        results["reference (plain line plot)"] = timed(plain, repeat)
        window.runner.cancel_all()
        window.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    for name, (median, worst) in run(args.repeat).items():
        print(f"{name:28s} median {median:6.1f} ms   max {worst:6.1f} ms")
    print(f"load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
