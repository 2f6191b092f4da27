"""Application quantities for the Speedup, Efficiency, Cost and Breakdown tabs, independent of Qt.

The quantities and their values come from `extradeep.analysis` (epoch time = measured step wall
time x steps, computation, communication, memory, GPU total, idle), per epoch when the experiment
knows its dataset sizes and per training step otherwise; they are modeled by the library function
`analyse` uses (`extradeep.analysis.core.application_models`), so they cannot differ from
`extradeep model`'s, across node boundaries included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.analysis.epoch import EPOCH_TIME
from extradeep.gui.workspace import RegionPoints, Workspace, epoch_values, points_per_row

BREAKDOWN = ("computation", "communication", "memory", "idle")


@dataclass
class AppModels:
    """Models and measured points of the application quantities; `per` is "epoch" or "step"."""

    per: str
    models: dict[str, object]
    points: dict[str, RegionPoints]
    notes: list[str] = field(default_factory=list)  # the layout and warnings about these models, one line each
    primary: object | None = None  # extradeep.analysis.primary.PrimaryTime: the one time model and why

    def model(self, quantity: str):
        return self.models.get(quantity)

    @property
    def time_label(self) -> str:
        """How the time the answers use is named: "epoch time" per epoch, "step time" per step."""
        from extradeep.analysis.epoch import quantity_label

        return quantity_label(self.time_quantity or "", self.per)

    @property
    def time_quantity(self) -> str | None:
        """The time the answers use: measured epoch time, else the GPU-activity sum."""
        if self.primary is not None:
            return self.primary.quantity
        return next((q for q in (EPOCH_TIME, "gpu total") if self.models.get(q) is not None), None)


def fit_application_models(report, ws: Workspace, options: dict, n_eval: int) -> AppModels | None:
    """Model the application quantities (extradeep.analysis.epoch.application_steps) of the open
    experiment; None for inputs without one (Extra-P text)."""
    if ws.experiment is None:
        return None
    report(0, 1, "Modeling the application quantities")
    if ws.reopen is not None:
        from extradeep.gui.modeling_process import run_remote

        app = run_remote(ws, application_models, options, n_eval)
    else:
        app = application_models(ws, options, n_eval)
    report(1, 1, "Application quantities modeled")
    return app


def application_models(ws: Workspace, options: dict, n_eval: int) -> AppModels | None:
    """The application quantities' models and points (the work of `fit_application_models`): the
    models from `extradeep.analysis.core.application_models`, the very function `analyse` (and so
    `extradeep model`) fits them with, layout and all; the points per epoch as `analyse` shows them."""
    from extradeep.analysis.core import reliability_notes
    from extradeep.analysis.fitting import application_models as library_models
    from extradeep.analysis.fitting import application_step_values
    from extradeep.analysis.primary import primary_from_models

    exp = ws.experiment
    app_steps = application_step_values(exp)
    if app_steps.empty:
        return None
    fitted, notes = library_models(exp, ws.dataset, options, upto=ws.cutoff(n_eval), app_steps=app_steps)
    models = {r["quantity"]: r["model"] for r in fitted.to_dict("records") if r["model"] is not None}
    values = epoch_values(app_steps, "quantity", ws.params, ws.dataset, ws.fixed)
    notes = reliability_notes(fitted, ws.per) + notes if not fitted.empty else notes
    primary = primary_from_models(fitted, ws.per, ws.params) if not fitted.empty else None
    if primary is not None:  # which model answers, and why, first under the plots
        notes = [f"Time per {ws.per} from one model: {primary.text}", *notes]
    return AppModels(ws.per, models, points_per_row(values, "quantity", ws.params), notes, primary)


def candidates(view, count: int = 400) -> np.ndarray:
    """x values to evaluate along the x parameter: whole numbers when it takes whole values (every one
    over a short range, else a geometric selection of them), else a geometric grid."""
    lo, hi = view.x_range()
    measured = view.ws.param_grid[view.x_param]
    if np.allclose(measured, np.round(measured)):
        if hi - lo <= 4096:
            return np.arange(np.ceil(lo), np.floor(hi) + 1)
        return np.unique(np.round(np.geomspace(max(lo, 1.0), hi, count)))
    return np.geomspace(lo, hi, count) if lo > 0 else np.linspace(lo, hi, count)


def node_layout(view) -> dict | None:
    """The cluster layout whose node boundaries the plots along the ranks mark (extradeep.analysis.
    communication.node_layout); None when the x axis is not the ranks or the input has no layout."""
    from extradeep.analysis.communication import node_layout as library_layout
    from extradeep.analysis.core import ranks_parameter

    ws = view.ws
    if ws.experiment is None or view.x_param != ranks_parameter(ws.params):
        return None
    return library_layout(ws.experiment.settings)


def frame_of(view, x: np.ndarray) -> pd.DataFrame:
    """Parameter points along the x parameter with the others at their fixed values."""
    from extradeep.analysis.points import point_grid

    return point_grid(list(x), view.ws.params, view.x_param, view.fixed)
