"""Application quantities for the Speedup, Efficiency, Cost and Breakdown tabs, independent of Qt.

The quantities and their values come from `extradeep.analysis` (epoch time = measured step wall
time x steps, computation, communication, memory, GPU total, idle), per epoch when the experiment
knows its dataset sizes and per training step otherwise; they are modeled with `fit_models` exactly
like `extradeep model` does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    """The application quantities' models and points (the work of `fit_application_models`)."""
    exp = ws.experiment
    from extradeep.aggregate.experiment import EPOCH_CATEGORIES
    from extradeep.analysis.epoch import application_steps, step_values

    # Only the step time (and the reader's GPU-busy union, both category "step") and the regions the
    # category sums add up are needed.
    wanted = (*EPOCH_CATEGORIES, "step")
    needed = exp.values["category"].isin(wanted).to_numpy()
    keep = exp.points["category"].isin(wanted).to_numpy()
    app_steps = application_steps(step_values(replace(exp, values=exp.values[needed], points=exp.points[keep])),
                                  ws.params)
    if app_steps.empty:
        return None
    models = _application_models(ws, exp, app_steps, options, ws.cutoff(n_eval))
    values = epoch_values(app_steps, "quantity", ws.params, ws.dataset, ws.fixed)
    return AppModels(ws.per, models, points_per_row(values, "quantity", ws.params))


def _application_models(ws: Workspace, exp, app_steps: pd.DataFrame, options: dict, cutoff: float) -> dict:
    """The application models exactly as `extradeep model` makes them (per-phase step models, the
    training step composed of computation and exposed communication), from points up to `cutoff`."""
    from extradeep.analysis.core import fit_application_models
    from extradeep.analysis.overlap import Exposure

    first = ws.params[0]
    steps = app_steps[app_steps[first].to_numpy(float) <= cutoff]
    if steps.empty:
        return {}
    values = exp.values[exp.values[first].to_numpy(float) <= cutoff]
    exposure = Exposure.from_experiment(exp, upto=cutoff)
    fitted = fit_application_models(steps, values, ws.params, ws.dataset, ws.fixed, options, exposure)
    return {r["quantity"]: r["model"] for r in fitted.to_dict("records") if r["model"] is not None}


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


def frame_of(view, x: np.ndarray) -> pd.DataFrame:
    """Parameter points along the x parameter with the others at their fixed values."""
    from extradeep.analysis.points import point_grid

    return point_grid(list(x), view.ws.params, view.x_param, view.fixed)
