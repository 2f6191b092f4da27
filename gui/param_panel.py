"""Parameter controls shared by the tabs: which parameter is on the x axis, how far to extrapolate,
and sliders that fix every other parameter at one of its measured values.

`View` is the state every tab draws from; `model_grid` turns it into the (n, m) parameter matrix at
which models are evaluated along the x axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel, QSlider, QWidget

from extradeep.analysis.scales import MAX_FACTOR, last_with_a_step  # the x range ends where the CLI stops
from extradeep.gui.workspace import RegionPoints, Workspace


@dataclass
class View:
    """What the tabs show: the open workspace, selected regions and the parameter settings."""

    ws: Workspace | None = None
    metric: str = "time"
    rows: list[int] = field(default_factory=list)
    x_param: str = ""
    y_param: str = ""
    fixed: dict[str, float] = field(default_factory=dict)
    x_max: float = 0.0
    n_eval: int = 0
    app: object | None = None  # gui.app_models.AppModels once the application series are modeled

    @property
    def x_index(self) -> int:
        return self.ws.params.index(self.x_param)

    def point_mask(self, points: RegionPoints) -> np.ndarray:
        """Points on the current slice: other parameters equal to their fixed values."""
        keep = np.ones(len(points.X), bool)
        for i, name in enumerate(self.ws.params):
            if name != self.x_param and name in self.fixed:
                keep &= np.isclose(points.X[:, i], self.fixed[name])
        return keep

    def modeling_mask(self, points: RegionPoints) -> np.ndarray:
        return points.X[:, 0] <= self.ws.cutoff(self.n_eval)

    def x_range(self) -> tuple[float, float]:
        values = self.ws.param_grid[self.x_param]
        return float(values.min()), float(max(self.x_max, values.max()))

    def modeled_x_max(self) -> float:
        """Largest x used for modeling (beyond it is extrapolation)."""
        values = self.ws.param_grid[self.x_param]
        cutoff = self.ws.cutoff(self.n_eval)
        return float(cutoff) if self.x_index == 0 and np.isfinite(cutoff) else float(values.max())


FAR_FACTOR = 2  # beyond this multiple of the largest measured value, predictions extrapolate far (as the CLI warns)


@dataclass(frozen=True)
class XLimits:
    """How far the x axis may go: `measured` (largest measured), `far` (beyond it, predictions extrapolate
    far), `supported` (the end: the dataset still gives a training step, or MAX_FACTOR x measured),
    `integral` (the parameter takes whole values, like ranks), and why the end is where it is."""

    measured: float
    far: float
    supported: float
    integral: bool
    reason: str


def x_limits(ws: Workspace, x_param: str, fixed: dict) -> XLimits:
    """The range the x parameter may be extrapolated over, from the measured values and the dataset."""
    values = ws.param_grid[x_param]
    measured = float(values.max())
    integral = bool(np.allclose(values, np.round(values)))
    cap = measured * MAX_FACTOR if measured > 0 else measured + MAX_FACTOR
    reason = f"{MAX_FACTOR}x the largest measured value"
    if ws.dataset is not None and ws.per == "epoch":
        last = _last_with_a_step(ws, x_param, fixed, measured, cap, integral)
        if last < cap:
            cap = last
            reason = f"beyond it an epoch has no full training step ({_dataset_text(ws.dataset)})"
    if integral:
        cap = float(np.floor(cap))
    return XLimits(measured, min(FAR_FACTOR * measured, cap), cap, integral, reason)


def _last_with_a_step(ws: Workspace, x_param: str, fixed: dict, lo: float, hi: float, integral: bool) -> float:
    """Largest x in [lo, hi] at which the dataset gives at least one training step per epoch (n_t >= 1,
    paper Eq. 2): where the CLI refuses predictions too (extradeep.analysis.scales)."""
    return last_with_a_step(ws.dataset, ws.params, x_param, {**ws.fixed, **fixed}, lo, hi, integral)


def _dataset_text(dataset) -> str:
    return f"{dataset.train_samples:g} training samples, batch {dataset.batch_per_rank} per rank"


def model_grid(view: View, x: np.ndarray) -> np.ndarray:
    """(n, m) parameter matrix: x along the x parameter, others at their fixed values."""
    ws = view.ws
    grid = np.empty((len(x), len(ws.params)))
    values = ws.param_grid
    for i, name in enumerate(ws.params):
        grid[:, i] = x if name == view.x_param else view.fixed.get(name, values[name][0])
    return grid


class ParamPanel(QWidget):
    """X-axis parameter, y parameter for the 2-D view, extrapolation limit and sliders for the rest."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.ws: Workspace | None = None
        self.x_combo = QComboBox()
        self.y_combo = QComboBox()
        self.x_max = QDoubleSpinBox(decimals=0, maximum=1e9, minimum=0)
        self.x_max.setToolTip("Models are drawn up to this value of the x parameter (extrapolation is shaded)")
        self.range_note = QLabel(wordWrap=True)
        self.range_note.setStyleSheet("color: #555")
        self.limits: XLimits | None = None
        self.sliders: dict[str, tuple[QSlider, QLabel, np.ndarray]] = {}
        self.form = QFormLayout(self)
        self.form.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.x_combo, 1)
        row.addWidget(QLabel("up to"))
        row.addWidget(self.x_max, 1)
        self.form.addRow("x axis", row)
        self.form.addRow("", self.range_note)
        self.form.addRow("2-D view y", self.y_combo)
        self.x_combo.currentTextChanged.connect(self._x_changed)
        self.y_combo.currentTextChanged.connect(lambda *_: self.changed.emit())
        self.x_max.valueChanged.connect(lambda *_: (self._say_range(), self.changed.emit()))

    def set_workspace(self, ws: Workspace | None) -> None:
        self.ws = ws
        for w in (self.x_combo, self.y_combo, self.x_max):
            w.blockSignals(True)
        self.x_combo.clear()
        self.y_combo.clear()
        if ws is not None:
            self.x_combo.addItems(ws.params)
            self.y_combo.addItems(ws.params[1:] + ws.params[:1])
        self._rebuild_sliders()
        self._reset_x_max()
        for w in (self.x_combo, self.y_combo, self.x_max):
            w.blockSignals(False)
        self.form.setRowVisible(2, ws is not None and len(ws.params) > 1)

    def _reset_x_max(self) -> None:
        if self.ws is None or not self.x_combo.currentText():
            self.limits = None
            self.range_note.clear()
            return
        name = self.x_combo.currentText()
        values = self.ws.param_grid[name]
        self.limits = x_limits(self.ws, name, self._fixed())
        self.x_max.setDecimals(0 if self.limits.integral else 2)
        self.x_max.setRange(float(values.max()), self.limits.supported)
        self.x_max.setValue(
            min(float(values.max()) * 4 if values.min() > 0 else float(values.max()) * 2, self.limits.supported)
        )
        self._say_range()

    def _say_range(self) -> None:
        """Where predictions stop being meaningful, next to the range they are drawn over."""
        lim = self.limits
        if lim is None:
            return
        name = self.x_combo.currentText()
        text = (
            f"Measured up to {lim.measured:g}; beyond {lim.far:g} predictions extrapolate far; "
            f"the range ends at {lim.supported:g} ({lim.reason})."
        )
        if self.x_max.value() > lim.far:
            text = "<b>" + text + "</b>"
        self.range_note.setText(text)
        self.range_note.setToolTip(f"{name} up to {self.x_max.value():g}")

    def _fixed(self) -> dict:
        return {name: float(values[s.value()]) for name, (s, _, values) in self.sliders.items()}

    def _x_changed(self, *_):
        self._rebuild_sliders()
        self.x_max.blockSignals(True)
        self._reset_x_max()
        self.x_max.blockSignals(False)
        self.changed.emit()

    def _rebuild_sliders(self) -> None:
        while self.form.rowCount() > 3:
            self.form.removeRow(3)
        self.sliders = {}
        if self.ws is None:
            return
        for name, values in self.ws.param_grid.items():
            if name == self.x_combo.currentText():
                continue
            slider = QSlider(Qt.Horizontal, minimum=0, maximum=max(len(values) - 1, 0))
            label = QLabel(f"{values[0]:g}")
            slider.valueChanged.connect(lambda i, label=label, values=values: self._slid(label, values, i))
            row = QHBoxLayout()
            row.addWidget(slider, 1)
            row.addWidget(label)
            self.form.addRow(f"fix {name}", row)
            self.sliders[name] = (slider, label, values)

    def _slid(self, label: QLabel, values: np.ndarray, i: int) -> None:
        label.setText(f"{values[i]:g}")
        self.changed.emit()

    def fill(self, view: View) -> None:
        """Copy the panel's settings into `view`."""
        view.x_param = self.x_combo.currentText()
        view.y_param = self.y_combo.currentText()
        view.x_max = self.x_max.value()
        view.fixed = {name: float(values[s.value()]) for name, (s, _, values) in self.sliders.items()}
