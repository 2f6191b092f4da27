"""Predictor tab: replay one run's traces (extradeep.predictor.predict), draw one steady training step
per rank and stream with its critical path outlined, and answer what-if questions beside the
empirical model's prediction at the same point.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Patch
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
)

from extradeep.columns import (
    END,
    EPOCH,
    MEASURED,
    PATH,
    PHASE,
    PROPOSED,
    QUEUE,
    RANK,
    RANKS,
    REPLAYED,
    START,
    STEP,
    STEP_ID,
    WARMUP,
)
from extradeep.gui.param_panel import View
from extradeep.gui.plot_tab import MARGINS, PlotTab

LABEL_PX = 10  # vertical room a lane label needs at font size 7 (pixels): below it labels overlap
CLASS_COLORS = {
    "compute": "#4c72b0",
    "communication": "#dd8452",
    "memory": "#55a868",
    "cpu_overhead": "#b0b0b0",
    "idle": "#ffffff",
}


def run_choices(ws) -> dict[str, tuple[list[str], dict]]:
    """Label -> (export paths, parameter point) of each run of the open input whose files exist."""
    exp = getattr(ws, "experiment", None)
    if exp is None or exp.provenance.empty:
        return {}
    prov = exp.provenance
    keys = [*ws.params, "rep"]
    out = {}
    for key, group in prov.groupby(keys, sort=True):
        paths = [p for p in group[PATH] if Path(p).exists()]
        values = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        if paths:
            out[", ".join(f"{k}={v}" for k, v in values.items())] = (paths, values)
    return out


def run_prediction(report, run, specs: list[str]):
    from extradeep.predictor import predict

    report(0, 0, "Replaying the run's traces")
    return predict(run, what_if=specs)


def run_search(report, run):
    """The strategy search on the replay (extradeep.predictor.optimize), reporting its progress."""
    from extradeep.predictor.optimize import StrategySearch

    report(0, 0, "Searching the replay for what to change")
    return StrategySearch().fit(run, progress=report)


def steady_train_step(prediction) -> int | None:
    """step_id of the last steady-state training step with a critical path (the one shown)."""
    steps = prediction.steps[prediction.steps[STEP_ID].isin(prediction.critical_path[STEP_ID])]
    steady = steps[(~steps[WARMUP].astype(bool)) & (steps[PHASE] == "train")]
    if steady.empty:
        steady = steps
    return None if steady.empty else int(steady.sort_values([EPOCH, STEP])[STEP_ID].iloc[-1])


def lane_label(rank: int, queue: str) -> str:
    # Collectives synchronise all ranks; the replay graph keeps them on a lane of their own (rank -1).
    return f"all ranks · {queue}" if rank < 0 else f"rank {rank} · {queue}"


class PredictorTab(PlotTab):
    """Run chooser, what-if controls, the replayed timeline and the step-time comparison."""

    title = "Predictor"
    redraw_on = frozenset({"app"})
    margins = {**MARGINS, "left": 0.22, "top": 0.92, "hspace": 0.35}
    log_scales = False

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window = window
        self.view: View | None = None
        self.prediction = None
        self.critical_drawn = pd.DataFrame()  # critical-path ops outlined in the timeline
        self.lanes = pd.DataFrame(columns=[RANK, QUEUE])  # the timeline's lanes, top to bottom
        self.canvas.mpl_connect("resize_event", lambda event: self._label_lanes() if self.has_plot else None)
        self.runs: dict[str, tuple[object, dict | None]] = {}
        self.run_combo = QComboBox()
        self.browse = QPushButton("Other run…")
        self.pattern = QLineEdit("*gemm*")
        self.kernel_factor = QDoubleSpinBox(minimum=0.0, maximum=100.0, value=1.0, singleStep=0.1)
        self.bandwidth = QDoubleSpinBox(minimum=0.05, maximum=100.0, value=1.0, singleStep=0.5)
        self.ranks = QSpinBox(minimum=0, maximum=100000, value=0, specialValueText="as run")
        self.replay_button = QPushButton("Replay")
        self.optimize_button = QPushButton("What to change…")
        self.optimize_button.setToolTip(
            "Search the replay for bucket layouts, kernel fusion and streams that shorten the step (in the background)"
        )
        self.search, self.search_label = None, None  # the last strategy search and its run
        self.answer = QLabel(wordWrap=True)
        self.strategies = QLabel(wordWrap=True)
        grid = QGridLayout()
        grid.addWidget(QLabel("Run"), 0, 0)
        grid.addWidget(self.run_combo, 0, 1, 1, 3)
        grid.addWidget(self.browse, 0, 4)
        grid.addWidget(QLabel("Kernels matching"), 1, 0)
        grid.addWidget(self.pattern, 1, 1)
        grid.addWidget(QLabel("time ×"), 1, 2)
        grid.addWidget(self.kernel_factor, 1, 3)
        grid.addWidget(QLabel("Bandwidth ×"), 2, 0)
        grid.addWidget(self.bandwidth, 2, 1)
        grid.addWidget(QLabel("Ranks"), 2, 2)
        grid.addWidget(self.ranks, 2, 3)
        grid.addWidget(self.replay_button, 2, 4)
        grid.addWidget(self.optimize_button, 3, 4)
        grid.setColumnStretch(1, 1)
        self.controls_box.addLayout(grid)
        self.controls_box.addWidget(self.answer)
        self.controls_box.addWidget(self.strategies)
        self.replay_button.clicked.connect(self.replay)
        self.optimize_button.clicked.connect(self.optimize)
        self.browse.clicked.connect(self._browse)
        self._source = None

    def what_if_spec(self) -> str | None:
        """The what-if of the controls as a predictor spec, or None when nothing changes."""
        items = []
        if self.kernel_factor.value() != 1.0 and self.pattern.text().strip():
            items.append(f"kernel:{self.pattern.text().strip()}={self.kernel_factor.value():g}")
        if self.bandwidth.value() != 1.0:
            items.append(f"comm.bandwidth={self.bandwidth.value():g}")
        if self.ranks.value() > 0:
            items.append(f"ranks={self.ranks.value()}")
        return "; ".join(items) or None

    def refresh(self, view: View) -> None:
        self.view = view
        if view.ws is None:
            return
        if view.ws.source != self._source:
            self._source = view.ws.source
            self.prediction = None
            self.set_runs(run_choices(view.ws))
        if self.prediction is None:
            if not self.runs:
                self.show_message(
                    "No run to replay: the exports of this input are not on disk. "
                    "Choose a run folder with “Other run…”."
                )
            elif not self.window.runner.busy:
                self.replay()
            return
        self._draw()

    def set_runs(self, runs: dict) -> None:
        self.runs = runs
        self.run_combo.clear()
        self.run_combo.addItems(list(runs))
        if runs:  # the largest configuration shows the most communication
            self.run_combo.setCurrentIndex(len(runs) - 1)

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder with one run's per-rank exports")
        if path:
            self.use_run(path)

    def use_run(self, run) -> None:
        """Replay `run` (a folder, a file or a list of files)."""
        label = str(run) if not isinstance(run, list) else f"{len(run)} files"
        self.runs[label] = (run, None)
        self.run_combo.addItem(label)
        self.run_combo.setCurrentText(label)
        self.replay()

    def replay(self) -> None:
        if self.run_combo.currentText() not in self.runs:
            return
        if self.search_label != self.run_combo.currentText():  # another run: its strategies are not known
            self.search, self.search_label = None, None
            self.strategies.clear()
        run, _ = self.runs[self.run_combo.currentText()]
        spec = self.what_if_spec()
        self.show_message("Replaying the traces…")
        source = self._source
        self.window.runner.start(
            "predict",
            run_prediction,
            run,
            [spec] if spec else [],
            on_done=lambda prediction: self._replayed(prediction, source),
        )

    def optimize(self) -> None:
        """Run the strategy search on the chosen run in the background."""
        if self.run_combo.currentText() not in self.runs:
            return
        run, _ = self.runs[self.run_combo.currentText()]
        label, source = self.run_combo.currentText(), self._source
        self.strategies.setText("<i>Searching the replay for what to change…</i>")
        self.window.runner.start("optimize", run_search, run, on_done=lambda s: self._searched(s, source, label))

    def _searched(self, search, source, label) -> None:
        if source != self._source or label != self.run_combo.currentText():
            return
        self.search, self.search_label = search, label
        table = search.strategies_
        proposed = table[table[PROPOSED]].head(3)
        lines = [f"<b>{escape(search.verdict_)}</b>"]
        lines += [
            f"{escape(r.strategy)}: {1e3 * r.predicted_s:.2f} ms ({100 * r.gain:+.1f} %) — <code>{escape(r.setting)}</code>"
            for r in proposed.itertuples(index=False)
        ]
        self.strategies.setText("<br>".join(lines))
        if self.prediction is not None and self.window.tabs.currentWidget() is self:
            self._draw()

    def _replayed(self, prediction, source) -> None:
        if source != self._source:  # another input was opened meanwhile
            return
        self.prediction = prediction
        if self.window.tabs.currentWidget() is self:
            self._draw()

    def _draw(self) -> None:
        pred = self.prediction
        self.clear_figure()
        if self.search is not None and len(self.search.breakdowns_) > 1:
            from extradeep.report.optimisation import critical_path_bars, ordered_breakdowns

            ax_t, ax_b, ax_o = self.figure.subplots(3, 1, height_ratios=[3, 1.3, 1.3])
            critical_path_bars(ax_o, ordered_breakdowns(self.search))
        else:
            ax_t, ax_b = self.figure.subplots(2, 1, height_ratios=[3, 1.3])
        self._draw_timeline(ax_t, pred)
        self._draw_comparison(ax_b, pred)
        self.show_plot()

    def _draw_timeline(self, ax, pred) -> None:
        from extradeep.predictor import BASELINE

        timeline = pred.timeline(BASELINE)
        step_id = steady_train_step(pred)
        path = pred.critical_path[pred.critical_path[STEP_ID] == step_id] if step_id is not None else pred.critical_path
        lo, hi = (path[START].min(), path[END].max()) if len(path) else (timeline[START].min(), timeline[END].max())
        shown = timeline[(timeline[END] > lo) & (timeline[START] < hi)]
        lanes = pd.concat([shown[[RANK, QUEUE]], path[[RANK, QUEUE]]]).drop_duplicates()
        lanes = lanes.sort_values([RANK, QUEUE]).reset_index(drop=True)
        lane_of = {(r, q): i for i, (r, q) in enumerate(zip(lanes[RANK], lanes[QUEUE]))}
        ms = 1e3
        for (rank, queue, cls), ops in shown.groupby([RANK, QUEUE, "class"]):
            y = lane_of[(rank, queue)]
            bars = np.column_stack([(ops[START] - lo) * ms, (ops[END] - ops[START]) * ms])
            ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=CLASS_COLORS.get(cls, "#999999"), lw=0)
        self.critical_drawn = path
        for row in path.itertuples(index=False):
            y = lane_of[(row.rank, row.queue)]
            ax.broken_barh(
                [((row.start - lo) * ms, (row.end - row.start) * ms)],
                (y - 0.45, 0.9),
                facecolors="none",
                edgecolors="#d62728",
                lw=1.6,
            )
        self.lanes = lanes
        ax.set_ylim(len(lanes) - 0.5, -0.5)  # the first lane on top
        self._label_lanes()
        ax.set_xlim(0, (hi - lo) * ms)
        ax.set_xlabel("ms since the step started (replayed)")
        handles = [Patch(color=c, label=k) for k, c in CLASS_COLORS.items() if k != "idle"]
        handles.append(Patch(facecolor="none", edgecolor="#d62728", label="critical path"))
        ax.legend(
            handles=handles,
            fontsize=7,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncols=5,
            frameon=False,
            title="Replayed training step per rank and stream",
            title_fontsize=9,
        )

    def _label_lanes(self) -> None:
        """One label per lane when they fit; else one per rank (its lanes counted) with a thin line
        between ranks, and only every k-th rank named if even those would overlap."""
        if not self.figure.axes or self.lanes.empty:
            return
        ax, lanes = self.figure.axes[0], self.lanes
        height = ax.get_window_extent().height / self.canvas.device_pixel_ratio
        if height / len(lanes) >= LABEL_PX:
            ax.set_yticks(range(len(lanes)), [lane_label(r, q) for r, q in zip(lanes[RANK], lanes[QUEUE])], fontsize=7)
            ax.set_yticks([], minor=True)
            return
        ranks = lanes.groupby(RANK, sort=False).indices
        every = int(np.ceil(len(ranks) * LABEL_PX / max(height, 1.0)))
        centres, labels = [], []
        for i, (rank, rows) in enumerate(ranks.items()):
            if i % every == 0:
                centres.append(float(np.mean(rows)))
                labels.append(lane_label(rank, f"{len(rows)} streams"))
        ax.set_yticks(centres, labels, fontsize=7)
        ax.set_yticks(range(len(lanes)), minor=True)
        starts = [rows[0] - 0.5 for rows in ranks.values()][1:]
        for line in [line for line in ax.lines if line.get_gid() == "rank boundary"]:
            line.remove()
        for y in starts:
            ax.axhline(y, color="0.6", lw=0.6, gid="rank boundary")

    def _draw_comparison(self, ax, pred) -> None:
        bars = self.comparison(pred)
        y = np.arange(len(bars))
        ax.barh(y, bars["ms"], color=[f"C{i}" for i in range(len(bars))])
        ax.set_yticks(y, bars["label"], fontsize=8)
        ax.invert_yaxis()
        for i, v in enumerate(bars["ms"]):
            ax.text(v, i, f" {v:.2f} ms", va="center", fontsize=8)
        ax.set_xlabel("training step time [ms] (median over steady steps, slowest rank)")
        ax.set_xlim(0, bars["ms"].max() * 1.25)
        self.answer.setText(
            " · ".join(f"{lab}: <b>{v:.2f} ms</b>" for lab, v in zip(bars["label"], bars["ms"]))
            + (f"<br><i>{'; '.join(pred.notes)}</i>" if pred.notes else "")
        )

    def comparison(self, pred) -> pd.DataFrame:
        """Step times to compare: measured, replayed, kernel-sum baseline, what-if, empirical model."""
        from extradeep.predictor import BASELINE

        summary = pred.summary[pred.summary[PHASE] == "train"]
        if summary.empty:
            summary = pred.summary
        base = summary[summary["scenario"] == BASELINE].iloc[0]
        rows = [("measured", base[MEASURED]), ("replayed", base[REPLAYED])]
        if "kernel_sum_baseline" in summary and np.isfinite(base.get("kernel_sum_baseline", np.nan)):
            rows.append(("sum of kernel times", base["kernel_sum_baseline"]))
        for row in summary[summary["scenario"] != BASELINE].itertuples(index=False):
            rows.append((f"what-if: {row.scenario}", row.predicted))
        empirical = self.empirical_step_time()
        if empirical is not None:
            rows.append(empirical)
        return pd.DataFrame({"label": [r[0] for r in rows], "ms": [1e3 * float(r[1]) for r in rows]})

    def empirical_step_time(self) -> tuple[str, float] | None:
        """(label, seconds) of the empirical training-step model at the run's point (ranks as in the
        what-if), or None without one."""
        from extradeep.gui.app_models import EPOCH_TIME

        app = self.view.app if self.view is not None else None
        model = app.model(EPOCH_TIME) if app is not None else None
        model = getattr(model, "train", model)  # epoch models combine per-step models
        if model is None or self.view is None:
            return None
        point = self._run_point()
        if point is None:
            return None
        X = np.array([[point[p] for p in self.view.ws.params]], float)
        X = X[:, 0] if X.shape[1] == 1 else X
        where = ", ".join(f"{p}={point[p]:g}" for p in self.view.ws.params)
        return f"empirical model ({where})", float(np.asarray(model.predict(X), float).reshape(-1)[0])

    def _run_point(self) -> dict | None:
        _, values = self.runs.get(self.run_combo.currentText(), (None, None))
        if not values or any(p not in values for p in self.view.ws.params):
            return None
        point = {p: float(values[p]) for p in self.view.ws.params}
        if self.ranks.value() > 0 and RANKS in point:
            point[RANKS] = float(self.ranks.value())
        return point
