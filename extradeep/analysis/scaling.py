"""Speedup, efficiency and runtime change derived from runtime models (paper section 3.1-3.2).

Values come from evaluating the fitted runtime models at each point, never from refitting, so
every region, category and the total share one definition:

* strong scaling: speedup S = T(x1)/T(xk), efficiency E = S * r1/rk (r = ranks);
* weak scaling:   efficiency E = T(x1)/T(xk), scaled speedup S = E * rk/r1;
* runtime change % (the paper's Delta, Eq. 11) = (T(x1) - T(xk)) / (T(x1)/100).

The paper's Eq. 13 (Delta_a/Delta_t) is not used as efficiency: under perfect strong scaling it
gives x1/xk, and under perfect weak scaling it gives 0 (docs/analysis.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.errors import InputError

SCALING_MODES = ("strong", "weak")


def design(points: pd.DataFrame, params: list[str]) -> np.ndarray:
    """Model input X for ``points``: shape (n,) for one parameter, (n, m) for several."""
    X = points[params].to_numpy(dtype=float)
    return X[:, 0] if len(params) == 1 else X


def predict_table(
    models: pd.DataFrame, grid: pd.DataFrame, params: list[str], keys: list[str], level: float = 0.95
) -> pd.DataFrame:
    """Evaluate every model in ``models`` (columns ``keys`` + ``model``) at every point of ``grid``.

    Returns one row per model and point: keys, params, T (prediction), T_lo, T_hi (prediction
    interval at ``level``; never below zero: times, counts and bytes are not negative, however wide
    the uncertainty). Rows without a model are left out.
    """
    X = design(grid, params)
    frames = []
    for row in models.itertuples(index=False):
        model = row.model
        if model is None:
            continue
        frame = grid[params].reset_index(drop=True).copy()
        for key in keys:
            frame[key] = getattr(row, key)
        frame["T"] = np.asarray(model.predict(X), dtype=float).reshape(-1)
        lo, hi = model.interval(X, level=level)
        frame["T_lo"] = np.maximum(np.asarray(lo, dtype=float).reshape(-1), 0.0)
        frame["T_hi"] = np.maximum(np.asarray(hi, dtype=float).reshape(-1), 0.0)
        frames.append(frame)
    columns = [*keys, *params, "T", "T_lo", "T_hi"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def default_baseline(points: pd.DataFrame, params: list[str], ranks_param: str) -> dict:
    """The smallest modeled point: fewest ranks first, then the smallest other parameters."""
    if points.empty:
        raise InputError("baseline", "there are no modeled points to take a baseline from")
    order = [ranks_param, *[p for p in params if p != ranks_param]] if ranks_param in params else params
    first = points[params].drop_duplicates().sort_values(order).iloc[0]
    return {p: float(first[p]) for p in params}


def scaling_table(
    models: pd.DataFrame,
    grid: pd.DataFrame,
    params: list[str],
    keys: list[str],
    baseline: dict,
    mode: str = "strong",
    ranks_param: str = "ranks",
    level: float = 0.95,
    samples=None,
) -> pd.DataFrame:
    """Speedup, efficiency and runtime change of every model at every grid point vs ``baseline``.

    ``samples``: optional function of a points frame -> samples processed per epoch; speedup and
    efficiency then compare time per sample (see :func:`add_scaling_columns`)."""
    if mode not in SCALING_MODES:
        raise InputError(None, field="scaling", problem=f"must be one of {', '.join(SCALING_MODES)}, got {mode!r}")
    missing = [p for p in params if p not in baseline]
    if missing:
        raise InputError("baseline", f"gives no value for {', '.join(missing)}")
    base = pd.DataFrame([{p: float(baseline[p]) for p in params}])
    table = predict_table(models, grid, params, keys, level)
    base_T = predict_table(models, base, params, keys)[[*keys, "T"]].rename(columns={"T": "T_base"})
    table = table.merge(base_T, on=keys, how="left")
    if samples is not None and not table.empty:
        table["samples"] = np.asarray(samples(table[params]), dtype=float)
        table["samples_base"] = float(np.asarray(samples(base)).reshape(-1)[0])
    return add_scaling_columns(table, baseline, mode, ranks_param)


def add_scaling_columns(
    table: pd.DataFrame, baseline: dict, mode: str, ranks_param: str, time: str = "T", base: str = "T_base"
) -> pd.DataFrame:
    """Add speedup, efficiency and runtime_change_pct to a table holding ``time`` and ``base``.

    With columns ``samples`` and ``samples_base`` (samples processed per epoch), the ratio is one of
    time per sample, (T1/N1)/(T/N): floor() in the steps per epoch (Eq. 2) makes some epochs skip
    part of the data, which would otherwise pass for speedup (efficiency above 1 from rounding).
    Without rounding it equals T1/T under strong scaling and T1/T * rk/r1 under weak scaling, so
    in both modes speedup = that ratio and efficiency = ratio * r1/rk."""
    T = table[time].to_numpy(dtype=float)
    T1 = table[base].to_numpy(dtype=float)
    # A model that predicts a non-positive runtime has no meaningful ratio there.
    valid = (T > 0) & (T1 > 0)
    ratio = np.divide(T1, T, out=np.full_like(T, np.nan), where=valid)
    per_sample = {"samples", "samples_base"} <= set(table.columns)
    if per_sample:
        N, N1 = table["samples"].to_numpy(dtype=float), table["samples_base"].to_numpy(dtype=float)
        ratio = np.divide(ratio * N, N1, out=np.full_like(T, np.nan), where=valid & (N > 0) & (N1 > 0))
    if ranks_param in table.columns and ranks_param in baseline:
        resource = table[ranks_param].to_numpy(dtype=float) / float(baseline[ranks_param])
    else:
        resource = np.ones_like(T)
    out = table.copy()
    if per_sample or mode == "strong":
        out["speedup"] = ratio
        out["efficiency"] = ratio / resource
    else:
        out["efficiency"] = ratio
        out["speedup"] = ratio * resource
    out["runtime_change_pct"] = np.divide(T1 - T, T1 / 100.0, out=np.full_like(T, np.nan), where=T1 > 0)
    out.attrs["scaling"] = mode
    return out


def scaling_models(
    scaling: pd.DataFrame, params: list[str], keys: list[str], options: dict | None = None
) -> pd.DataFrame:
    """Models of speedup, efficiency and runtime change as functions of the parameters (Eq. 12).

    ``scaling`` is a :func:`scaling_table` evaluated at the modeled points; each derived quantity
    is fitted with the PMNF modeler like any measured metric. Returns fit_models' table with an
    extra ``derived`` column naming the quantity.
    """
    from extradeep.modeling import fit_models

    frames = []
    for quantity in ("speedup", "efficiency", "runtime_change_pct"):
        data = scaling.dropna(subset=[quantity])
        if data.empty:
            continue
        opts = dict(options or {})
        if quantity == "runtime_change_pct":
            # Delta is 0 at the baseline, so noise relative to the value is undefined there.
            opts["weighting"] = "none"
        fitted = fit_models(data, params, value=quantity, by=tuple(keys), options=opts)
        fitted.insert(0, "derived", quantity)
        frames.append(fitted)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
