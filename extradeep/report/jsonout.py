"""`extradeep model --json` (schema in docs/json-schema.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from extradeep import __version__
from extradeep.analysis.core import Analysis
from extradeep.analysis.epoch import QUANTITY_HELP, REGION_KEYS
from extradeep.columns import VALUE
from extradeep.errors import InputError
from extradeep.io.store import json_safe as _clean

FORMAT = "extradeep-models/1"
UNITS = {"time": "s", "visits": "count", "bytes": "B"}


def _model_json(model, reason: str, formula: str | None = None, growth: str | None = None) -> dict | None:
    """A model's JSON; `formula` and `growth` when the models table already holds them (the text is
    the slow part at thousands of regions)."""
    if model is None:
        return None
    return {
        "formula": formula or model.formula(),
        "growth": growth or model.growth(),
        "smape_pct": float(getattr(model, "smape", math.nan)),
        "parameters": model.to_dict(),
    }


def _measured_by(points: pd.DataFrame, keys: list[str], params: list[str]) -> dict:
    """{group key: [{"point", "value", "rep_min", "rep_max", "n_reps"}, ...]} in one pass over plain
    arrays: a pandas lookup and iterrows per region cost ~5 ms each, most of `--json` at 2,000 regions."""
    if points.empty:
        return {}
    cols = {c: points[c].to_numpy(float) for c in (*params, "value", "rep_min", "rep_max")}
    n_reps = points["n_reps"].to_numpy(int)
    out = {}
    for key, rows in points.groupby(keys, sort=False, dropna=False).indices.items():
        out[key if isinstance(key, tuple) else (key,)] = [
            {
                "point": {p: cols[p][i] for p in params},
                "value": cols[VALUE][i],
                "rep_min": cols["rep_min"][i],
                "rep_max": cols["rep_max"][i],
                "n_reps": n_reps[i],
            }
            for i in rows
        ]
    return out


def models_document(
    analysis: Analysis,
    predictions: pd.DataFrame | None,
    bottlenecks: pd.DataFrame | None,
    cost,
    level: float,
    derived: pd.DataFrame | None = None,
    region_scaling: pd.DataFrame | None = None,
) -> dict:
    """Everything `model` computed, as one JSON-ready dict."""
    params = analysis.params
    app_measured = _measured_by(analysis.application_points, ["quantity"], params)
    models = analysis.application_models[["quantity", "model", "reason", "formula", "growth"]]
    application = [
        {
            "quantity": q,
            "description": QUANTITY_HELP.get(q, ""),
            "unit": "s",
            "measured": app_measured.get((q,), []),
            "model": _model_json(model, reason, formula, growth),
            "reason": reason or "",
        }
        for q, model, reason, formula, growth in models.itertuples(index=False, name=None)
    ]
    region_measured = _measured_by(analysis.region_points, REGION_KEYS, params)
    regions = []
    columns = [*REGION_KEYS, "model", "reason", "formula", "growth"]
    for row in analysis.region_models[columns].itertuples(index=False, name=None):
        key, (model, reason, formula, growth) = row[: len(REGION_KEYS)], row[len(REGION_KEYS) :]
        regions.append(
            {
                **dict(zip(REGION_KEYS, key)),
                "unit": UNITS.get(key[REGION_KEYS.index("metric")], ""),
                "measured": region_measured.get(key, []),
                "model": _model_json(model, reason, formula, growth),
                "reason": reason or "",
            }
        )
    document = {
        "format": FORMAT,
        "extradeep_version": __version__,
        "params": params,
        "ranks_param": analysis.ranks_param,
        "per": analysis.per,
        "scaling": analysis.scaling,
        "baseline": analysis.baseline,
        "level": level,
        "dataset": None if analysis.dataset is None else vars(analysis.dataset).copy(),
        "modeler_options": {k: [str(x) for x in v] if isinstance(v, tuple) else v for k, v in analysis.options.items()},
        "cost": None if cost is None else {"unit": cost.unit, "description": cost.describe()},
        "notes": list(analysis.notes),
        "primary": None if analysis.primary is None else analysis.primary.as_dict(),
        "points": analysis.points[params].astype(float).to_dict("records"),
        "application": application,
        "predictions": [] if predictions is None else _records(predictions, params),
        "region_predictions": [] if region_scaling is None else _records(region_scaling, params),
        "bottlenecks": [] if bottlenecks is None else bottlenecks.to_dict("records"),
        "scaling_models": []
        if derived is None
        else [
            {
                "quantity": r["quantity"],
                "derived": r["derived"],
                "model": _model_json(r["model"], r["reason"]),
                "reason": r["reason"] or "",
            }
            for _, r in derived.iterrows()
        ],
        "regions": regions,
    }
    return document


def _records(predictions: pd.DataFrame, params: list[str]) -> list[dict]:
    rename = {"T": "value", "T_lo": "lo", "T_hi": "hi", "T_base": "baseline_value"}
    out = []
    for row in predictions.rename(columns=rename).to_dict("records"):
        point = {p: row.pop(p) for p in params}
        out.append({"point": point, **row})
    return out


def write_json(
    path, analysis: Analysis, predictions, bottlenecks, cost, level: float, derived=None, region_scaling=None
) -> None:
    document = models_document(analysis, predictions, bottlenecks, cost, level, derived, region_scaling)
    try:
        Path(path).write_bytes(dumps(document))
    except OSError as exc:
        raise InputError(path, f"cannot write the JSON file ({exc.strerror})") from None


def dumps(document) -> bytes:
    """The document as JSON bytes (NaN and infinity as null, numpy scalars as numbers). orjson writes
    the 6.6 MB of 2,000 regions in 0.08 s where the standard library takes 1.4 s
    (benchmarks/bench_json.py); without orjson installed the standard library is used."""
    try:
        import orjson
    except ModuleNotFoundError:  # pragma: no cover - orjson is a dependency; kept for minimal installs
        return json.dumps(_clean(document), indent=1, allow_nan=False).encode("utf-8")
    return orjson.dumps(
        document, default=_clean, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2
    )
