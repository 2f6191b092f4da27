"""Model accuracy and predictive power (paper section 4, Table 2 and Fig. 5).

Each model is compared with the measured median at every point: at modeling points this is the
model's accuracy, at evaluation points (measured but not used for modeling) its predictive power.
percentage error = |predicted - measured| / measured x 100; summaries use the median (MPE).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.analysis.core import Analysis
from extradeep.analysis.epoch import REGION_KEYS
from extradeep.analysis.scaling import design
from extradeep.columns import CATEGORY, HI, KIND, LO, METRIC, NAME, PREDICTED, REGION, ROLE, VALUE

ERROR_COLUMNS = [
    "model_type",
    NAME,
    KIND,
    CATEGORY,
    METRIC,
    ROLE,
    VALUE,
    PREDICTED,
    LO,
    HI,
    "error_pct",
    "inside_interval",
    "spread_pct",
]


def prediction_errors(
    analysis: Analysis, app_points: pd.DataFrame, region_points: pd.DataFrame, role: str, level: float = 0.95
) -> pd.DataFrame:
    """Percentage error of every model at the measured points given (median over repetitions).

    ``role`` labels the rows ("modeling" or "evaluation"); ``spread_pct`` is the measured
    repetition spread (max - min) / median, the noise a prediction can hardly beat (NaN with
    one repetition).
    """
    params = analysis.params
    app = app_points.merge(analysis.application_models[["quantity", "model"]], on="quantity")
    app = app.assign(
        model_type="application", name=app["quantity"], kind="application", category=app["quantity"], metric="time"
    )
    reg = region_points.merge(analysis.region_models[[*REGION_KEYS, "model"]], on=REGION_KEYS)
    reg = reg.assign(model_type="region", name=reg[REGION])
    frame = pd.concat([app, reg], ignore_index=True)
    frame = frame[frame["model"].notna()].reset_index(drop=True)
    if frame.empty:
        return pd.DataFrame(columns=[*ERROR_COLUMNS[:5], *params, *ERROR_COLUMNS[5:]])
    frame[PREDICTED], frame[LO], frame[HI] = _predict_rows(frame, params, level)
    measured = frame[VALUE].to_numpy(dtype=float)
    positive = measured > 0
    frame["error_pct"] = np.divide(
        np.abs(frame[PREDICTED] - measured) * 100, measured, out=np.full(len(frame), np.nan), where=positive
    )
    frame["inside_interval"] = (frame[LO] <= measured) & (measured <= frame[HI])
    # One repetition shows no spread; NaN says "unknown" rather than a reassuring 0.
    frame["spread_pct"] = np.divide(
        (frame["rep_max"] - frame["rep_min"]) * 100,
        measured,
        out=np.full(len(frame), np.nan),
        where=positive & (frame["n_reps"] > 1),
    )
    frame[ROLE] = role
    columns = [*ERROR_COLUMNS[:5], *params, *ERROR_COLUMNS[5:]]
    return frame[columns]


def _predict_rows(frame: pd.DataFrame, params: list[str], level: float):
    predicted = np.empty(len(frame))
    lo, hi = np.empty(len(frame)), np.empty(len(frame))
    # One predict call per model, over all of its points.
    for _, idx in frame.groupby(["model_type", NAME, KIND, METRIC], sort=False).groups.items():
        rows = frame.loc[idx]
        model = rows["model"].iloc[0]
        X = design(rows, params)
        predicted[idx] = np.asarray(model.predict(X), dtype=float).reshape(-1)
        low, high = model.interval(X, level=level)
        lo[idx], hi[idx] = np.asarray(low, float).reshape(-1), np.asarray(high, float).reshape(-1)
    return predicted, lo, hi


def error_summary(errors: pd.DataFrame, params: list[str], by: str = "category") -> pd.DataFrame:
    """Median percentage error (MPE) per ``by`` ("category" or "kind", the region class), metric
    and point, like the paper's Table 2, with the number of models and the share inside the
    prediction interval."""
    data = errors.dropna(subset=["error_pct"])
    keys = ["model_type", by, "metric", "role", *params]
    grouped = data.groupby(keys, sort=True)
    out = grouped["error_pct"].median().rename("mpe_pct").to_frame()
    out["models"] = grouped.size()
    out["inside_interval_pct"] = grouped["inside_interval"].mean() * 100
    out["median_spread_pct"] = grouped["spread_pct"].median()
    return out.reset_index()
