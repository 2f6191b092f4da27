"""`extradeep model --json` (schema in docs/json-schema.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from extradeep import __version__
from extradeep.analysis.core import Analysis
from extradeep.analysis.epoch import QUANTITY_HELP, REGION_KEYS
from extradeep.errors import InputError
from extradeep.io.store import json_safe as _clean

FORMAT = "extradeep-models/1"
UNITS = {"time": "s", "visits": "count", "bytes": "B"}


def _model_json(model, reason: str) -> dict | None:
    if model is None:
        return None
    return {"formula": model.formula(), "growth": model.growth(), "smape_pct": float(getattr(model, "smape", math.nan)),
            "parameters": model.to_dict()}


def _measured(points: pd.DataFrame, params: list[str]) -> list[dict]:
    return [{"point": {p: float(r[p]) for p in params}, "value": float(r["value"]), "rep_min": float(r["rep_min"]),
             "rep_max": float(r["rep_max"]), "n_reps": int(r["n_reps"])} for _, r in points.iterrows()]


def models_document(analysis: Analysis, predictions: pd.DataFrame | None, bottlenecks: pd.DataFrame | None,
                    cost, level: float, derived: pd.DataFrame | None = None,
                    region_scaling: pd.DataFrame | None = None) -> dict:
    """Everything `model` computed, as one JSON-ready dict."""
    params = analysis.params
    app_points = analysis.application_points.groupby("quantity")
    application = []
    for _, row in analysis.application_models.iterrows():
        q = row["quantity"]
        points = app_points.get_group(q) if q in app_points.groups else analysis.application_points.iloc[:0]
        application.append({"quantity": q, "description": QUANTITY_HELP.get(q, ""), "unit": "s",
                            "measured": _measured(points, params), "model": _model_json(row["model"], row["reason"]),
                            "reason": row["reason"] or ""})
    region_points = analysis.region_points.groupby(REGION_KEYS)
    regions = []
    for _, row in analysis.region_models.iterrows():
        key = tuple(row[k] for k in REGION_KEYS)
        points = region_points.get_group(key) if key in region_points.groups else analysis.region_points.iloc[:0]
        regions.append({**{k: row[k] for k in REGION_KEYS}, "unit": UNITS.get(row["metric"], ""),
                        "measured": _measured(points, params), "model": _model_json(row["model"], row["reason"]),
                        "reason": row["reason"] or ""})
    document = {
        "format": FORMAT, "extradeep_version": __version__, "params": params, "ranks_param": analysis.ranks_param,
        "per": analysis.per, "scaling": analysis.scaling, "baseline": analysis.baseline, "level": level,
        "dataset": None if analysis.dataset is None else vars(analysis.dataset).copy(),
        "modeler_options": {k: [str(x) for x in v] if isinstance(v, tuple) else v for k, v in analysis.options.items()},
        "cost": None if cost is None else {"unit": cost.unit, "description": cost.describe()},
        "notes": list(analysis.notes),
        "points": [{p: float(r[p]) for p in params} for _, r in analysis.points.iterrows()],
        "application": application,
        "predictions": [] if predictions is None else _records(predictions, params),
        "region_predictions": [] if region_scaling is None else _records(region_scaling, params),
        "bottlenecks": [] if bottlenecks is None else bottlenecks.to_dict("records"),
        "scaling_models": [] if derived is None else [
            {"quantity": r["quantity"], "derived": r["derived"], "model": _model_json(r["model"], r["reason"]),
             "reason": r["reason"] or ""} for _, r in derived.iterrows()],
        "regions": regions,
    }
    return _clean(document)


def _records(predictions: pd.DataFrame, params: list[str]) -> list[dict]:
    rename = {"T": "value", "T_lo": "lo", "T_hi": "hi", "T_base": "baseline_value"}
    out = []
    for row in predictions.rename(columns=rename).to_dict("records"):
        point = {p: row.pop(p) for p in params}
        out.append({"point": point, **row})
    return out


def write_json(path, analysis: Analysis, predictions, bottlenecks, cost, level: float, derived=None,
               region_scaling=None) -> None:
    document = models_document(analysis, predictions, bottlenecks, cost, level, derived, region_scaling)
    try:
        Path(path).write_text(json.dumps(document, indent=1, allow_nan=False), encoding="utf-8")
    except OSError as exc:
        raise InputError(path, f"cannot write the JSON file ({exc.strerror})") from None
