"""Models saved with an experiment, and read back instead of refitted.

`extradeep model --save` keeps every fitted model (lossless JSON) beside the measurements. Commands
that open the file later (evaluate, budget, report, gui) reuse them as long as they were fitted the
same way: the same modeler options, dataset sizes and system description (`--system`: the
communication models are calibrated on its links). Anything else refits, and says why.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from extradeep.aggregate.experiment import dataset_dict
from extradeep.analysis.epoch import REGION_KEYS, model_from_dict
from extradeep.columns import CATEGORY, KIND, METRIC, NAME, REGION, VALUE
from extradeep.io.store import json_safe as _clean

APP_KEY = "quantity"
# 2: the parts of the epoch time are kept within it (analysis/parts.py) and the step region carries the
# primary model; models of version 1 are refitted, saying so
MODELS_VERSION = 2
MODEL_COLUMNS = ["model", "formula", "growth", "smape", "reason"]


def models_tables(analysis) -> dict[str, pd.DataFrame]:
    """The `models` and `models_meta` tables of a saved experiment for `analysis`."""
    rows = [
        {
            "model_type": "application",
            "name": r[APP_KEY],
            "kind": "",
            "category": r[APP_KEY],
            "metric": "time",
            **_model_row(r),
        }
        for r in analysis.application_models.to_dict("records")
    ]
    rows += [
        {
            "model_type": "region",
            "name": r[REGION],
            "kind": r[KIND],
            "category": r[CATEGORY],
            "metric": r[METRIC],
            **_model_row(r),
        }
        for r in analysis.region_models.to_dict("records")
    ]
    primary = analysis.primary
    meta = {
        "models_version": MODELS_VERSION,
        "per": analysis.per,
        "scaling": analysis.scaling,
        "ranks_param": analysis.ranks_param,
        "baseline": analysis.baseline,
        "modeler_options": options_key(analysis.options),
        "options": analysis.options,  # as given (lists stay lists), so commands on the file can reuse them
        "primary": None if primary is None else primary.as_dict(),
        "dataset": dataset_dict(analysis.dataset),
        "system": analysis.layout.get("system"),
    }
    columns = [
        "model_type",
        "name",
        "kind",
        "category",
        "metric",
        "formula",
        "growth",
        "smape_pct",
        "reason",
        "model_json",
    ]
    return {
        "models": pd.DataFrame(rows, columns=columns),
        "models_meta": pd.DataFrame({"key": list(meta), VALUE: [json.dumps(_clean(v)) for v in meta.values()]}),
    }


def reusable_models(
    saved: dict | None, dataset, options: dict | None, system: dict | None = None
) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(application models, region models) from `saved` (Experiment.saved_models) when they were
    fitted with the same modeler `options`, `dataset` and `system` (settings.system); None when
    there are none or they differ (:func:`saved_mismatch` says how)."""
    if not saved or saved.get("models") is None or "model_json" not in saved["models"]:
        return None
    if saved_mismatch(saved, dataset, options, system):
        return None
    rows = saved["models"]
    try:
        app = rows[rows["model_type"] == "application"].rename(columns={NAME: APP_KEY})
        regions = rows[rows["model_type"] == REGION].rename(columns={NAME: REGION})
        return _frame(app, [APP_KEY]), _frame(regions, REGION_KEYS)
    except (KeyError, TypeError, ValueError):  # a damaged models table (hand edit, crash): refit instead
        return None


def saved_mismatch(saved: dict, dataset, options: dict | None, system: dict | None) -> list[str]:
    """What differs between how the saved models were fitted and how they are asked for now."""
    meta = saved.get("meta") or {}
    differs = {
        "model format (an older extradeep)": meta.get("models_version") != MODELS_VERSION,
        "modeler options": meta.get("modeler_options") != options_key(options or {}),
        "dataset sizes": meta.get("dataset") != _clean(dataset_dict(dataset)),
        "system (--system)": meta.get("system") != _clean(system or None),
    }
    return [what for what, different in differs.items() if different]


def options_key(options: dict) -> dict:
    """Modeler options as saved (strings), so equal options compare equal after a round trip."""
    return {str(k): str(v) for k, v in sorted(options.items())}


def _frame(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    records = []
    for r in rows.to_dict("records"):
        model = None if not r["model_json"] else model_from_dict(json.loads(r["model_json"]))
        smape = r["smape_pct"]
        records.append(
            {
                **{k: r[k] for k in keys},
                "model": model,
                "formula": r["formula"] or "",
                "growth": r["growth"] or "",
                "smape": np.nan if smape is None else float(smape),
                "reason": r["reason"] or "",
            }
        )
    return pd.DataFrame(records, columns=[*keys, *MODEL_COLUMNS])


def _model_row(row) -> dict:
    model = row["model"]
    return {
        "formula": row["formula"] or "",
        "growth": row["growth"] or "",
        "smape_pct": None if model is None else _clean(float(row["smape"])),
        "reason": row["reason"] or "",
        "model_json": None if model is None else json.dumps(_clean(model.to_dict())),
    }


def effective_options(experiment, options: dict | None = None) -> dict:
    """The modeler options a command on ``experiment`` uses: its own (those its saved models were
    fitted with, and its ``min_points``), overridden by those ``options`` gives. So a file saved
    with ``--min-points 4`` keeps modeling with 4 unless a command says otherwise."""
    meta = (experiment.saved_models or {}).get("meta") or {}
    saved = meta.get("options")
    own = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()} if isinstance(saved, dict) else {}
    min_points = experiment.settings.min_points  # Experiment.set_min_points changes it
    if min_points is not None:
        own["min_points"] = int(min_points)
    return {**own, **(options or {})}


def saved_choices(experiment, dataset, params: list[str]) -> dict:
    """The scaling mode and ranks parameter the saved models were made with, where they still apply:
    the scaling mode while the dataset is the same (its default follows the dataset), the ranks
    parameter while it is modeled. Empty without saved models."""
    meta = (experiment.saved_models or {}).get("meta") or {}
    out = {}
    if meta.get("scaling") in ("strong", "weak") and meta.get("dataset") == _clean(dataset_dict(dataset)):
        out["scaling"] = meta["scaling"]
    if meta.get("ranks_param") in params:
        out["ranks_param"] = meta["ranks_param"]
    return out
