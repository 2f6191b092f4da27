"""The one model that answers "time per epoch (or step) at P", and why it is the one.

Every command (model, budget, report, plan, evaluate), the API and the GUI's default view take that
time from :func:`primary_time`: the model of the measured step time ("epoch time", shown as "step
time" per step), else, without step marks, the GPU-activity sum. For one parameter with
communication, the training step has several candidate models (a direct PMNF fit of the step time,
and the step composed of its parts under three or four overlap rules); they are compared once, by
leave-one-out error over the measured points, when the model is fitted
(:func:`extradeep.analysis.overlap.fit_step_composition`), and :func:`choice_text` says which one
predicts and why, in the same words everywhere. The region ``step`` (the same measured step time)
carries the very same model, so no view can show another.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.analysis.epoch import EPOCH_TIME, quantity_label
from extradeep.errors import InputError

STEP_REGION = {"region": "step", "kind": "step", "category": "step", "metric": "time"}
TIME_QUANTITIES = (EPOCH_TIME, "gpu total")
RULES = {
    "direct": "a direct PMNF fit of the step time",
    "proportional": "the step composed of its parts, communication hidden in its measured share",
    "saturated": "the step composed of its parts, overlap window full at the largest measured overlap",
    "replayed": "the step composed of its parts, overlap replayed from the trace",
}


@dataclass
class PrimaryTime:
    """The primary time model of an analysis: ``quantity`` ("epoch time" or "gpu total"), how it is
    shown (``label``), its ``model``, the candidate that predicts (``rule``), every candidate's
    leave-one-out SMAPE (``cv_smapes``, %) and the one-line reason (``text``)."""

    quantity: str
    label: str
    per: str
    model: object
    rule: str
    cv_smapes: dict
    text: str

    def predict(self, points: pd.DataFrame, params: list[str], level: float = 0.95) -> pd.DataFrame:
        """The points with T, T_lo, T_hi: the value and interval every view shows."""
        from extradeep.analysis.scaling import predict_table

        models = pd.DataFrame({"quantity": [self.quantity], "model": [self.model]})
        return predict_table(models, points[params].reset_index(drop=True), params, ["quantity"], level)

    def as_dict(self) -> dict:
        """For JSON and saved files."""
        return {
            "quantity": self.quantity,
            "label": self.label,
            "per": self.per,
            "rule": self.rule,
            "cv_smape_pct": dict(self.cv_smapes),
            "why": self.text,
        }


def primary_quantity_of(app_models: pd.DataFrame) -> str | None:
    """The time the answers use: measured epoch time, else the GPU-activity sum (None: neither)."""
    for quantity in TIME_QUANTITIES:
        rows = app_models[app_models["quantity"] == quantity]
        if len(rows) and rows["model"].iloc[0] is not None:
            return quantity
    return None


def primary_from_models(app_models: pd.DataFrame, per: str, params: list[str]) -> PrimaryTime | None:
    """The :class:`PrimaryTime` of an application-model table (None when no time could be modeled)."""
    quantity = primary_quantity_of(app_models)
    if quantity is None:
        return None
    model = app_models.loc[app_models["quantity"] == quantity, "model"].iloc[0]
    label = quantity_label(quantity, per)
    step = getattr(model, "train", model)
    rule = getattr(step, "choice", "direct")
    cv = {k: float(v) for k, v in (getattr(step, "cv_smapes", None) or {}).items()}
    return PrimaryTime(quantity, label, per, model, rule, cv, choice_text(quantity, label, step, params, app_models))


def choice_text(quantity: str, label: str, step, params: list[str], app_models: pd.DataFrame) -> str:
    """Which candidate gives the time per step and why, in one line."""
    if quantity != EPOCH_TIME:
        return f"{label}: no step marks were measured, so the GPU-activity sum (paper Eq. 6) stands in"
    cv = getattr(step, "cv_smapes", None)
    if not cv:
        return f"{label}: {RULES['direct']} (one candidate only: {_why_direct_only(params, app_models)})"
    rule = step.choice
    traced = f" at {params[0]}={step.exposure.x_ref:g}" if rule == "replayed" and step.exposure else ""
    name = RULES[rule] + traced
    scores = ", ".join(f"{k} {v:.2f}%" for k, v in sorted(cv.items(), key=lambda kv: kv[1]))
    if "replayed" in cv:
        why = (
            "the replayed trace sees where the overlap window ends, which no leave-one-out test can, so it "
            "predicts unless another candidate is lower by more than the noise and half its error"
        )
    else:
        why = (
            "the composed step (overlap in its measured share) predicts unless another candidate is lower "
            "by more than the repetition noise; with one repetition the lowest wins"
        )
    return f"{label}: {name}, chosen by leave-one-out SMAPE over the measured points ({scores}): {why}"


def _why_direct_only(params: list[str], app_models: pd.DataFrame) -> str:
    if len(params) != 1:
        return "the step composition models one parameter, this experiment has several"
    comm = app_models[app_models["quantity"] == "communication"]
    if comm.empty or comm["model"].iloc[0] is None:
        return "no communication was measured or modeled"
    return "too few measured points, or a part without a model, for the step composition"


def require_primary(primary: PrimaryTime | None, per: str, app_models: pd.DataFrame) -> PrimaryTime:
    """``primary``, or one line saying why no time per epoch/step could be modeled."""
    if primary is not None:
        return primary
    if per == "measurement":
        raise InputError(
            None,
            "a plain measurement table (e.g. Extra-P text) has no time per epoch; this needs Nsight Systems exports",
        )
    reasons = "; ".join(sorted(set(r for r in app_models["reason"] if r))) or "no step marks and no GPU activity"
    hint = " (--min-points N lowers the number of configurations a model needs)" if "need at least" in reasons else ""
    raise InputError(None, f"no model of the time per {per} could be made: {reasons}{hint}")


def with_primary_step_region(region_models: pd.DataFrame, primary: PrimaryTime | None) -> pd.DataFrame:
    """The region models with the measured step time's own row carrying the primary model: it is
    the same measured time, so it must give the same answer (only when that is the epoch time)."""
    if primary is None or primary.quantity != EPOCH_TIME or region_models.empty:
        return region_models
    rows = np.ones(len(region_models), bool)
    for key, value in STEP_REGION.items():
        rows &= (region_models[key] == value).to_numpy() if key in region_models else False
    if not rows.any():
        return region_models
    out = region_models.copy()
    index = out.index[rows][0]
    model = primary.model
    out.at[index, "model"] = model
    out.at[index, "formula"], out.at[index, "growth"] = model.formula(), model.growth()
    out.at[index, "smape"], out.at[index, "reason"] = float(getattr(model, "smape", np.nan)), ""
    return out


def primary_time_model(experiment, options: dict | None = None, upto: float = np.inf) -> PrimaryTime | None:
    """The primary time model of an experiment as :func:`extradeep.analysis.core.analyse` makes it (the
    saved one when it was fitted the same way), without the region models: for the advisor."""
    from extradeep.analysis.core import per_unit
    from extradeep.analysis.fitting import application_models
    from extradeep.analysis.saved import effective_options, reusable_models

    dataset = experiment.dataset
    options = effective_options(experiment, options)
    saved = None
    if not np.isfinite(upto):
        saved = reusable_models(experiment.saved_models, dataset, options, experiment.settings.system)
    app = saved[0] if saved is not None else application_models(experiment, dataset, options, upto=upto)[0]
    return primary_from_models(app, per_unit(dataset), list(experiment.params))
