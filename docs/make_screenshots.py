"""Render screenshots of the real GUI offscreen into docs/img/ (used by docs/gui.md).

Opens sample_profiles/ (saved as an experiment with its dataset sizes) and a small simulated
two-parameter run (for the heatmap) in the real main window and grabs each tab; then searches the
shipped layout study in the Layouts tab. Run from the repository root:
    QT_QPA_PLATFORM=offscreen python docs/make_screenshots.py [experiment] [layouts]
(naming a group renders only its screenshots; both by default).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
IMG = Path(__file__).resolve().parent / "img"
SIZE = (1500, 900)


SAMPLE = Path(__file__).resolve().parent.parent / "sample_profiles"


def saved_experiment(profiles: Path, truth: dict, out: Path) -> Path:
    from extradeep import load_experiment
    from extradeep.aggregate.experiment import Dataset

    exp = load_experiment([profiles], dataset=Dataset(**truth["dataset"]), progress=False)
    exp.save(out)
    return out


def two_parameter_run(outdir: Path) -> Path:
    from extradeep.simulate import simulate

    sim = simulate(
        outdir / "profiles",
        params={"ranks": [2, 3, 4, 5, 6], "batch": [16, 32, 64, 128, 256]},
        repetitions=1,
        train_steps=2,
        val_steps=1,
    )
    return saved_experiment(outdir / "profiles", sim.truth, outdir / "two.sqlite")


def wait(app, condition, timeout_s: float = 120) -> None:
    from extradeep.gui.app import process_events_until

    process_events_until(condition, timeout_s)


def open_in(window, app, path) -> None:
    window.open_path(path)
    wait(app, lambda: window.runner.busy or window.last_error)
    wait(app, lambda: not window.runner.busy)
    if window.last_error:
        raise SystemExit(f"could not open {path}: {window.last_error}")


def shoot(window, app, name: str) -> None:
    settled = time.monotonic() + 0.2  # the tabs draw on a short timer (gui.plot_tab.DRAW_DELAY_MS)
    wait(app, lambda: time.monotonic() > settled)
    window.grab().save(str(IMG / f"{name}.png"))
    print(f"docs/img/{name}.png")


def tab(window, title: str):
    page = next(p for p in window.tab_pages if p.title == title)
    window.tabs.setCurrentWidget(page)
    return page


def layouts_shots(window, app) -> None:
    """The Layouts tab on the shipped layout study (as the README's tour searches it)."""
    study = Path(os.path.relpath(SAMPLE / "layouts" / "profiles"))  # as a user types it, from the repository
    layouts = tab(window, "Layouts")
    layouts.inputs.setText(str(study))
    layouts.model.setText(str(study / "model.toml"))
    layouts.hardware.setText(str(study / "hardware.toml"))
    layouts.gpus.setText("64,128,256,512")
    layouts.global_batch.setValue(512)
    layouts.search()
    wait(app, lambda: not window.runner.busy and layouts.result is not None and layouts.has_plot)
    shoot(window, app, "gui_layouts")


def main(groups=("experiment", "layouts")) -> int:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from extradeep.gui.main_window import MainWindow

    IMG.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(["extradeep"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        window = MainWindow(settings=QSettings(str(tmp / "gui.ini"), QSettings.IniFormat))
        window.resize(*SIZE)
        window.show()
        if "layouts" in groups:
            layouts_shots(window, app)
        if "experiment" not in groups:
            window.close()
            return 0
        truth = json.loads((SAMPLE / "truth.json").read_text())
        one = saved_experiment(SAMPLE, truth, tmp / "sample.sqlite")
        open_in(window, app, one)
        shoot(window, app, "gui_model")
        ws = window.ws
        time_rows = ws.rows_for_metric("time")
        comm = time_rows[time_rows["category"] == "communication"]["share"].nlargest(1).index.tolist()
        comp = time_rows[time_rows["category"] == "computation"]["share"].nlargest(2).index.tolist()
        window.regions.select_rows(comm + comp)
        shoot(window, app, "gui_model_overlay")
        window.regions.select_rows(comm + comp[:1])
        for title in ("Speedup", "Efficiency", "Breakdown", "Bottlenecks"):
            tab(window, title)
            shoot(window, app, f"gui_{title.lower()}")
        cost = tab(window, "Cost")
        cost.deadline_slider.setValue(450)
        cost.budget_slider.setValue(600)
        shoot(window, app, "gui_cost")
        predictor = tab(window, "Predictor")
        wait(app, lambda: not window.runner.busy)
        predictor.run_combo.setCurrentText("ranks=8, rep=1")
        predictor.kernel_factor.setValue(0.5)
        predictor.replay()
        wait(app, lambda: not window.runner.busy and predictor.has_plot)
        shoot(window, app, "gui_predictor")
        tab(window, "Model")
        window.regions.filter_edit.setText("nccl")
        shoot(window, app, "gui_filter")
        window.regions.filter_edit.clear()
        open_in(window, app, two_parameter_run(tmp / "two"))
        model = tab(window, "Model")
        model.heatmap.setChecked(True)
        shoot(window, app, "gui_heatmap")
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(tuple(sys.argv[1:]) or ("experiment", "layouts")))
