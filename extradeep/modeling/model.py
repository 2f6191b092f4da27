"""A fitted PMNF performance model: evaluation, prediction intervals, formula text, serialisation."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from extradeep.modeling.terms import (
    Term,
    design_matrix,
    display_names,
    factor_text,
    growth_text,
    term_growth_key,
)


@dataclass
class Model:
    """One region's performance model ``c0 + sum_k c_k * prod_l x_l^i * log2(x_l)^j`` with its fit quality.

    `smape` (in-sample) and `cv_smape` (leave-one-out, used for selection) are percentages;
    `point_errors` is the signed percentage error of the model at each modeling point (the paper's
    model accuracy). Prediction intervals are for one new measurement (one repetition) at a point:
    a t interval from the weighted residual variance of all repetitions plus the coefficient
    uncertainty at that point (its leverage), widened by the largest disagreement of the rival
    hypotheses that fit the data about as well (the uncertainty of choosing the exponents).
    """

    params: list[str]
    terms: list[Term]
    coefficients: np.ndarray
    cov_unscaled: np.ndarray
    sigma2: float
    dof: int
    weighting: str = "relative"
    var_floor: float = 0.0
    smape: float = float("nan")
    cv_smape: float = float("nan")
    rss: float = float("nan")
    ar2: float = float("nan")
    points: np.ndarray = field(default_factory=lambda: np.empty((0, 1)))
    point_errors: np.ndarray = field(default_factory=lambda: np.empty(0))
    n_measurements: int = 0
    names: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    rivals: list[dict] = field(default_factory=list)  # {"terms", "coefficients"} that fit about as well

    # -- evaluation -------------------------------------------------------------------------
    def _points(self, X) -> tuple[np.ndarray, bool]:
        arr = np.asarray(X, dtype=float)
        m = len(self.params)
        scalar = arr.ndim == 0 or (m > 1 and arr.ndim == 1)
        if m == 1:
            arr = arr.reshape(-1, 1)
        else:
            arr = np.atleast_2d(arr)
            if arr.shape[1] != m:
                raise ValueError(f"expected points with {m} columns ({', '.join(self.params)}), got {arr.shape}")
        return arr, scalar

    def predict(self, X):
        """Model value at X: a scalar, an array (n,) for one parameter, or (n, m) points."""
        arr, scalar = self._points(X)
        out = design_matrix(arr, self.terms) @ self.coefficients
        return float(out[0]) if scalar else out

    def interval(self, X, level: float = 0.95):
        """(lo, hi) prediction interval for one new measurement at X."""
        arr, scalar = self._points(X)
        A = design_matrix(arr, self.terms)
        pred = A @ self.coefficients
        leverage = np.einsum("ij,jk,ik->i", A, self.cov_unscaled, A)
        shape = np.maximum(np.abs(pred), self.var_floor) ** 2 if self.weighting == "relative" else 1.0
        if self.dof > 0:
            from scipy.special import stdtrit  # lighter than scipy.stats for a CLI start

            half = stdtrit(self.dof, 0.5 + level / 2) * np.sqrt(self.sigma2 * (shape + leverage))
        else:
            half = np.full_like(pred, np.inf)
        if self.rivals:  # add the rivals' largest disagreement like an independent error
            others = np.stack([design_matrix(arr, r["terms"]) @ r["coefficients"] for r in self.rivals])
            half = np.hypot(half, np.abs(others - pred).max(axis=0))
        lo, hi = pred - half, pred + half
        return (float(lo[0]), float(hi[0])) if scalar else (lo, hi)

    # -- text -------------------------------------------------------------------------------
    def formula(self, names: dict | None = None, digits: int = 4) -> str:
        """Readable formula, e.g. ``158.6 + 0.58 * p^(2/3) * log2(p)^2``."""
        short = display_names(self.params, {**self.names, **(names or {})})
        parts = [] if self.coefficients[0] == 0 and self.terms else [f"{self.coefficients[0]:.{digits}g}"]
        for coef, term in zip(self.coefficients[1:], self.terms):
            factors = " * ".join(t for t in (factor_text(n, f) for n, f in zip(short, term)) if t)
            if parts:
                parts.append(f"{'-' if coef < 0 else '+'} {abs(coef):.{digits}g} * {factors}")
            else:
                parts.append(f"{coef:.{digits}g} * {factors}")
        return " ".join(parts)

    def __str__(self) -> str:
        return self.formula()

    def _lead(self) -> Term | None:
        live = [t for c, t in zip(self.coefficients[1:], self.terms) if c != 0]
        return max(live, key=term_growth_key) if live else None

    def growth(self, names: dict | None = None) -> str:
        """Big-O of the fastest-growing term, e.g. ``O(p^0.5 log p)``."""
        return growth_text(self._lead(), display_names(self.params, {**self.names, **(names or {})}))

    def growth_key(self) -> tuple[float, float]:
        """Sortable growth: (polynomial degree, log degree) of the fastest term, all parameters together."""
        lead = self._lead()
        return (0.0, 0.0) if lead is None else term_growth_key(lead)

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-ready dict; floats keep full precision, exponents are exact fractions."""
        return {
            "params": list(self.params),
            "terms": _terms_to_text(self.terms),
            "coefficients": [float(c) for c in self.coefficients],
            "cov_unscaled": np.asarray(self.cov_unscaled, float).tolist(),
            "sigma2": float(self.sigma2),
            "dof": int(self.dof),
            "weighting": self.weighting,
            "var_floor": float(self.var_floor),
            "smape": float(self.smape),
            "cv_smape": float(self.cv_smape),
            "rss": float(self.rss),
            "ar2": float(self.ar2),
            "points": np.asarray(self.points, float).tolist(),
            "point_errors": np.asarray(self.point_errors, float).tolist(),
            "n_measurements": int(self.n_measurements),
            "names": dict(self.names),
            "warnings": list(self.warnings),
            "rivals": [
                {"terms": _terms_to_text(r["terms"]), "coefficients": [float(c) for c in r["coefficients"]]}
                for r in self.rivals
            ],
        }

    @classmethod
    def from_dict(cls, data: dict) -> Model:
        kw = dict(data)
        kw["terms"] = _terms_from_text(data["terms"])
        kw["rivals"] = [
            {"terms": _terms_from_text(r["terms"]), "coefficients": np.asarray(r["coefficients"], float)}
            for r in data.get("rivals", [])
        ]
        for key in ("coefficients", "cov_unscaled", "point_errors"):
            kw[key] = np.asarray(data[key], dtype=float)
        kw["points"] = np.asarray(data["points"], dtype=float).reshape(-1, len(data["params"]))
        return cls(**kw)


def _terms_to_text(terms: list[Term]) -> list:
    return [[[str(i), str(j)] for i, j in term] for term in terms]


def _terms_from_text(data: list) -> list[Term]:
    return [tuple((Fraction(i), Fraction(j)) for i, j in term) for term in data]
