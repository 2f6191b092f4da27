"""PMNF modeling entry points: the scikit-learn style `PMNFModeler` and the table API `fit_models`."""

from __future__ import annotations

import warnings
from dataclasses import fields, replace

import numpy as np
import pandas as pd

from extradeep.columns import REP
from extradeep.errors import InputError
from extradeep.modeling.batched import fit_batched, smape
from extradeep.modeling.model import Model
from extradeep.modeling.search import (
    NO_FACTOR,
    PointBatch,
    SearchOptions,
    line_indices,
    search_multi_parameter,
    search_single_parameter,
    weights,
)
from extradeep.modeling.terms import DEFAULT_I, DEFAULT_J, factor_pairs, term_values

# Measured in benchmarks/bench_modeling.py (see docs/performance.md).
DEFAULT_TIE_TOLERANCE = 0.0
DEFAULT_NONNEGATIVE = "auto"
# None: Extra-P 4.2.5's 42 (i, j) pairs for the default I and J (measured more accurate than all
# 59 pairs of I x J), every pair of I x J when the caller changes I or J.
DEFAULT_PAIRS = None
DEFAULT_CRITERION = "cv+reps"
# "auto": search.SIGNIFICANCE_AUTO (stricter with repetitions than with one).
DEFAULT_SIGNIFICANCE = "auto"
RECOMMENDED_POINTS = 5  # fewer values of a parameter make a rough model (Extra-P warns too)
MAX_PARAMETERS = 4  # Extra-P's limit; four active parameters use its sums and products only (search.forms)
# Beyond these, squares in the least-squares fit overflow a double (1e308): such data is refused per region.
MAX_VALUE = 1e100
MAX_PARAMETER_VALUE = 1e30  # x^3 log2(x)^2 of the largest exponents, squared, stays finite
RESULT_COLUMNS = [
    "model",
    "formula",
    "smape",
    "cv_smape",
    "ar2",
    "rss",
    "growth",
    "growth_key",
    "n_points",
    "reason",
    "warnings",
]


class PMNFModeler:
    """Finds the PMNF hypothesis that best predicts unseen points (leave-one-out SMAPE) for one region.

    Configure the search space (`pairs`: "extrap" for Extra-P 4.2.5's default (i, j) pairs, "all"
    for every pair of the exponent sets I x J, an explicit list, or None: "extrap" for the default
    I and J, "all" otherwise; `n_terms` terms per parameter),
    then `fit(X, y)`; the fitted model is `model_`. Rows of X with equal values are repetitions of
    one measurement point.
    """

    def __init__(
        self,
        exponents_i=DEFAULT_I,
        exponents_j=DEFAULT_J,
        pairs=DEFAULT_PAIRS,
        n_terms=1,
        nonnegative=DEFAULT_NONNEGATIVE,
        min_points=5,
        weighting="relative",
        tie_tolerance=DEFAULT_TIE_TOLERANCE,
        criterion=DEFAULT_CRITERION,
        significance=DEFAULT_SIGNIFICANCE,
        min_term_contribution=0.0005,
        top_k=3,
        param_names=None,
        names=None,
    ):
        self.exponents_i = exponents_i
        self.exponents_j = exponents_j
        self.pairs = pairs
        self.n_terms = n_terms
        self.nonnegative = nonnegative
        self.min_points = min_points
        self.weighting = weighting
        self.tie_tolerance = tie_tolerance
        self.criterion = criterion
        self.significance = significance
        self.min_term_contribution = min_term_contribution
        self.top_k = top_k
        self.param_names = param_names
        self.names = names

    def search_options(self) -> SearchOptions:
        if self.n_terms not in (1, 2, 3):
            raise InputError(None, f"n_terms must be 1, 2 or 3, not {self.n_terms}")
        for name, allowed in (
            ("weighting", ("relative", "none")),
            ("criterion", ("cv", "cv+reps")),
            ("nonnegative", (True, False, "auto")),
        ):
            if getattr(self, name) not in allowed:
                raise InputError(None, f"{name} must be one of {allowed}, not {getattr(self, name)!r}")
        if self.significance != "auto" and not (
            isinstance(self.significance, (int, float)) and 0 < self.significance < 1
        ):
            raise InputError(None, f"significance must be 'auto' or a level between 0 and 1, not {self.significance!r}")
        if self.min_points < 2:
            raise InputError(None, f"min_points must be at least 2, not {self.min_points}")
        try:
            factors = factor_pairs(self.exponents_i, self.exponents_j, self.pairs)
        except (ValueError, ZeroDivisionError, TypeError) as exc:
            raise InputError(None, f"bad exponent set: {exc}") from None
        names = {f.name for f in fields(SearchOptions)} - {"factors"}
        return SearchOptions(**{k: getattr(self, k) for k in names}, factors=factors)

    def fit(self, X, y, reps=None) -> PMNFModeler:
        """Fit one model; X (n,) or (n, m) parameter values, y (n,) values. `reps`: optional labels."""
        if isinstance(X, pd.DataFrame):
            params = list(X.columns)
            X = X.to_numpy(float)
        else:
            X = np.asarray(X, dtype=float)
            X = X.reshape(-1, 1) if X.ndim == 1 else X
            params = list(self.param_names or (["p"] if X.shape[1] == 1 else [f"x{k + 1}" for k in range(X.shape[1])]))
        y = np.asarray(y, dtype=float).ravel()
        if len(y) != len(X) or len(params) != X.shape[1]:
            raise InputError(None, f"X has {len(X)} rows x {X.shape[1]} parameters but y has {len(y)} values")
        df = pd.DataFrame(X, columns=params).assign(value=y, region="", metric="")
        if reps is not None:
            df[REP] = np.asarray(reps).ravel()
            if df.duplicated(params + ["rep"]).any():
                raise InputError(None, "the same repetition appears twice at one measurement point")
        row = fit_models(df, params, options=self).iloc[0]
        if row["model"] is None:
            raise InputError(None, f"no model: {row['reason']}")
        self.model_ = row["model"]
        return self

    def predict(self, X):
        return self.model_.predict(X)


def fit_models(
    df: pd.DataFrame, params, value="value", by=("region", "metric"), rep=None, options=None
) -> pd.DataFrame:
    """One PMNF model per group of `df` (rows are measurements; equal points are repetitions).

    `rep`: the repetition column, if any (rows at the same point are repetitions either way).
    `options`: a PMNFModeler or a dict of its arguments. Returns the `by` columns plus model,
    formula, smape, cv_smape, ar2, rss, growth, growth_key, n_points, reason (why no model) and
    warnings.
    """
    params, by = list(params), [b for b in by]
    modeler = options if isinstance(options, PMNFModeler) else PMNFModeler(**(options or {}))
    opts = modeler.search_options()
    missing = [c for c in params + by + [value] + ([rep] if rep else []) if c not in df.columns]
    if missing:
        raise InputError(None, f"missing column(s): {', '.join(missing)}")
    if len(params) > MAX_PARAMETERS:
        raise InputError(None, f"at most {MAX_PARAMETERS} parameters can be modeled (as in Extra-P), got {len(params)}")
    shared = [p for p in params if p in by or p == value]
    if shared:
        raise InputError(None, f"parameter {shared[0]!r} is also a key or the value column; rename it")
    data = df[by + params + [value]].copy()
    if by:
        grouping = data.groupby(by, sort=True, dropna=False)
        groups = grouping.ngroup().to_numpy()
        keys = grouping.size().index.to_frame(index=False)
    else:
        groups, keys = np.zeros(len(data), dtype=int), pd.DataFrame(index=[0])
    rows = [{"model": None, "reason": "", "warnings": []} for _ in range(len(keys))]
    numeric = data[params + [value]].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    bad = ~np.isfinite(numeric).all(axis=1)
    for g in np.unique(groups[bad]):
        rows[g]["reason"] = "non-finite or non-numeric values (NaN/inf) are refused"
    huge = ~bad & ((np.abs(numeric[:, -1]) > MAX_VALUE) | (np.abs(numeric[:, :-1]) > MAX_PARAMETER_VALUE).any(axis=1))
    for g in np.setdiff1d(np.unique(groups[huge]), np.unique(groups[bad])):
        rows[g]["reason"] = (
            f"values beyond {MAX_VALUE:.0e} or parameter values beyond {MAX_PARAMETER_VALUE:.0e} would overflow "
            "the fit; rescale them (e.g. into larger units)"
        )
    bad |= huge
    small = (numeric[:, : len(params)] < undefined_below(opts.factors)).any(axis=1) & ~bad
    dropped = list(zip(*np.unique(groups[small], return_counts=True)))
    why = _undefined_text(opts.factors)
    for g, count in dropped:
        rows[g]["warnings"].append(f"dropped {count} measurement(s) with a parameter value {why}")
    if dropped:  # one warning for the whole table; each model keeps its own note
        warnings.warn(
            f"dropped {int(small.sum())} measurement(s) with a parameter value {why} in "
            f"{len(dropped)} group(s), e.g. {_label(keys, dropped[0][0])}",
            stacklevel=2,
        )
    keep = ~np.isin(groups, [g for g, r in enumerate(rows) if r["reason"]]) & ~small
    # internal column names: a user's parameter (x, y, count, value ...) never meets one of ours
    inner = [f"_param{k}" for k in range(len(params))]
    clean = pd.DataFrame(numeric[keep], columns=inner + ["_value"]).assign(_g=groups[keep])
    for batch, gids in _batches(clean, inner, "_value"):
        _fit_batch(batch, gids, params, opts, modeler, rows)
    for r in rows:
        if r["model"] is None and not r["reason"]:
            r["reason"] = (
                f"no measurements where every parameter is {_defined_text(opts.factors)} "
                f"(need at least {opts.min_points} points)"
            )
    return pd.concat([keys, _result_frame(rows, modeler)], axis=1)


def undefined_below(factors) -> float:
    """The smallest parameter value the terms are defined at: x^i log2(x)^j needs x > 0 (log2(1) = 0
    is fine, as in Extra-P), and x >= 1 when a log exponent is fractional (log2(x) < 0 below 1)."""
    fractional_log = any(j.denominator != 1 for _, j in factors)
    return 1.0 if fractional_log else np.nextafter(0.0, 1.0)


def _undefined_text(factors) -> str:
    return (
        "below 1 (a fractional log exponent is undefined there)"
        if undefined_below(factors) == 1.0
        else "<= 0 (x^i log2(x)^j is undefined there)"
    )


def _defined_text(factors) -> str:
    return ">= 1" if undefined_below(factors) == 1.0 else "> 0"


def _label(keys: pd.DataFrame, g: int) -> str:
    return "/".join(str(v) for v in keys.iloc[g].tolist()) if len(keys.columns) else "data"


def _batches(clean: pd.DataFrame, params, value):
    """Per-point means, counts and spread, grouped into batches of regions with identical points."""
    if clean.empty:
        return
    grouped = clean.groupby(["_g"] + params, sort=True)[value]
    agg = pd.DataFrame(
        {"y": grouped.mean(), "count": grouped.count(), "pure": grouped.var(ddof=0).fillna(0.0) * grouped.count()}
    ).reset_index()
    gid = agg["_g"].to_numpy()
    pid = agg.groupby(params, sort=True).ngroup().to_numpy()
    groups, row_of = np.unique(gid, return_inverse=True)
    present = np.zeros((len(groups), pid.max() + 1), dtype=bool)  # which points each group has
    present[row_of, pid] = True
    signatures, batch_of = np.unique(present, axis=0, return_inverse=True)
    for b in range(len(signatures)):
        members = np.flatnonzero(batch_of == b)
        part = agg[np.isin(row_of, members)]  # already sorted by group, then point
        n = int(signatures[b].sum())
        shape = (len(members), n)
        yield (
            PointBatch(
                X=part[params].to_numpy(float)[:n],
                y=part["y"].to_numpy().reshape(shape),
                count=part["count"].to_numpy(float).reshape(shape),
                pure_ss=part["pure"].to_numpy().reshape(shape),
            ),
            groups[members],
        )


def _shortage(X: np.ndarray, params, min_points: int) -> str:
    """Why these points cannot be modeled, or '' when they can."""
    for col, name in enumerate(params):
        if len(params) == 1:
            if len(X) < min_points:
                return f"only {len(X)} measurement point(s) (need at least {min_points})"
        elif line_indices(X, col, min_points) is None:
            return (
                f"fewer than {min_points} values of {name} with the other parameters fixed "
                f"(need at least {min_points} points per parameter)"
            )
    return ""


def _fit_batch(batch: PointBatch, gids, params, opts: SearchOptions, modeler: PMNFModeler, rows) -> None:
    tied = len(params) > 1 and _vary_together(batch.X)
    shown = params[:1] if tied else params  # tied parameters: their effects cannot be told apart
    reason = _shortage(batch.X[:, : len(shown)], shown, opts.min_points)
    if reason:
        for g in gids:
            rows[g]["reason"] = reason
        return
    notes = [f"{', '.join(params)} vary together at every point: modeled over {params[0]} alone"] if tied else []
    few = _shortage(batch.X[:, : len(shown)], shown, RECOMMENDED_POINTS) if opts.min_points < RECOMMENDED_POINTS else ""
    notes += [f"a rough model: {few.replace('need at least', 'want')}"] if few else []
    for g in gids:
        rows[g]["warnings"].extend(notes)
    weights(batch, opts.weighting)
    if tied:
        choices = _along_first(batch, opts)
    else:
        choices = (search_single_parameter if len(params) == 1 else search_multi_parameter)(batch, opts)
    by_width: dict[int, list[int]] = {}
    for r, ch in enumerate(choices):
        by_width.setdefault(len(ch.terms) + 1, []).append(r)
    for _p, members in by_width.items():
        idx = np.array(members)
        A = _designs(batch.X, [choices[r].terms for r in members])
        fit = fit_batched(A, batch.y[idx], batch.w[idx], want_r_inv=True)
        fit_stats = _fit_statistics(batch, idx, fit)
        # a constant that is zero up to rounding prints as 0, not as -7.7e-16
        fit.coef[:, 0] = np.where(np.abs(fit.coef[:, 0]) <= 1e-12 * fit_stats["scale"], 0.0, fit.coef[:, 0])
        X = batch.X.copy()
        for k, r in enumerate(members):
            g = gids[r]
            st = {key: val[k] for key, val in fit_stats.items()}
            rows[g]["model"] = Model(
                params=list(params),
                terms=list(choices[r].terms),
                coefficients=fit.coef[k],
                cov_unscaled=st["cov"],
                sigma2=float(st["sigma2"]),
                dof=int(st["dof"]),
                weighting=opts.weighting if st["scale"] > 0 else "none",
                var_floor=float(batch.floor[r]),
                smape=float(st["smape"]),
                cv_smape=choices[r].cv_smape,
                rss=float(st["rss"]),
                ar2=float(st["ar2"]),
                points=X,
                point_errors=st["errors"],
                n_measurements=int(st["n_meas"]),
                names=dict(modeler.names or {}),
                warnings=rows[g]["warnings"],
            )
    _fit_rivals(batch, choices, gids, rows)


def _vary_together(X: np.ndarray) -> bool:
    """Every point changes every parameter, all in one order (e.g. (1000 10) (2000 20) ...)."""
    order = np.argsort(X[:, 0], kind="stable")
    return all(len(np.unique(X[:, c])) == len(X) and (np.diff(X[order, c]) > 0).all() for c in range(X.shape[1]))


def _along_first(batch: PointBatch, opts: SearchOptions) -> list:
    """Single-parameter choices over the first parameter, as terms of all of them."""
    others = (NO_FACTOR,) * (batch.X.shape[1] - 1)
    choices = search_single_parameter(replace(batch, X=batch.X[:, :1]), opts)
    for ch in choices:
        ch.terms = [t + others for t in ch.terms]
        ch.rivals = [[t + others for t in terms] for terms in ch.rivals]
    return choices


def _designs(X: np.ndarray, term_lists: list[list]) -> np.ndarray:
    """Stacked design matrices (k, n, p) of equally long term lists; each distinct term evaluated once."""
    column_of = {(): 0}
    index = np.array([[column_of.setdefault(t, len(column_of)) for t in [(), *terms]] for terms in term_lists])
    table = np.empty((len(column_of), len(X)))
    for t, k in column_of.items():
        table[k] = term_values(X, t) if t else 1.0
    return table[index].transpose(0, 2, 1)


def _fit_rivals(batch: PointBatch, choices, gids, rows) -> None:
    """Coefficients of every region's rival hypotheses (see search.alternatives), batched by width."""
    by_width: dict[int, list[tuple[int, list]]] = {}
    for r, ch in enumerate(choices):
        for terms in ch.rivals:
            by_width.setdefault(len(terms) + 1, []).append((r, terms))
    for pairs in by_width.values():
        idx = np.array([r for r, _ in pairs])
        A = _designs(batch.X, [terms for _, terms in pairs])
        fit = fit_batched(A, batch.y[idx], batch.w[idx])
        for (r, terms), coef, valid in zip(pairs, fit.coef, fit.valid):
            if valid:
                rows[gids[r]]["model"].rivals.append({"terms": terms, "coefficients": coef})


def _fit_statistics(batch: PointBatch, idx: np.ndarray, fit) -> dict[str, np.ndarray]:
    """Quality figures of the chosen fits (rows `idx` of the batch), all regions at once."""
    y, f, w = batch.y[idx], fit.fitted, batch.w[idx]
    n, p = y.shape[1], fit.coef.shape[-1]
    n_meas = batch.count[idx].sum(axis=1)
    # Lack of fit from leave-one-out residuals: in-sample residuals of a selected model are optimistic.
    loo = np.where(np.isfinite(fit.loo_pred), fit.loo_pred, f)
    ss = np.sum(w * (y - loo) ** 2, axis=1) + np.sum(batch.pure_ss[idx] / batch.v[idx], axis=1)
    dof = n_meas - p
    rss = np.sum((y - f) ** 2, axis=1)
    tss = np.sum((y - y.mean(axis=1, keepdims=True)) ** 2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ar2 = 1.0 - (rss / (n - p)) / (tss / (n - 1)) if n > p else np.full(len(idx), np.nan)
        exact = rss <= 1e-24 * np.maximum(1.0, np.sum(y**2, axis=1))
        ar2 = np.where(tss == 0, np.where(exact, 1.0, np.nan), ar2) if n > p else ar2
        errors = np.where(y != 0, 100.0 * (f - y) / np.where(y != 0, y, 1.0), np.where(f == 0, 0.0, np.inf))
        sigma2 = np.where(dof > 0, ss / np.maximum(dof, 1), np.nan)
    return {
        "n_meas": n_meas,
        "dof": dof,
        "sigma2": sigma2,
        "rss": rss,
        "ar2": ar2,
        "errors": errors,
        "smape": smape(y, f),
        "scale": np.abs(y).max(axis=1),
        "cov": np.einsum("rij,rkj->rik", fit.r_inv, fit.r_inv),
    }


def _result_frame(rows, modeler: PMNFModeler) -> pd.DataFrame:
    out = []
    for r in rows:
        m = r["model"]
        out.append(
            {
                "model": m,
                "formula": m.formula() if m else None,
                "smape": m.smape if m else np.nan,
                "cv_smape": m.cv_smape if m else np.nan,
                "ar2": m.ar2 if m else np.nan,
                "rss": m.rss if m else np.nan,
                "growth": m.growth() if m else None,
                "growth_key": m.growth_key() if m else None,
                "n_points": len(m.points) if m else 0,
                "reason": r["reason"],
                "warnings": "; ".join(r["warnings"]),
            }
        )
    # object columns: a missing formula or growth stays None (pandas 3 would store NaN in a string column)
    table = pd.DataFrame(out, columns=RESULT_COLUMNS, dtype=object)
    return table.astype({"smape": float, "cv_smape": float, "ar2": float, "rss": float, "n_points": int})
