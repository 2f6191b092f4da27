"""PMNF building blocks: exponent sets, term evaluation, formula and growth notation.

A *factor* is one parameter's ``x^i * log2(x)^j`` with exponents ``(i, j)``; a *term* is a tuple with
one factor per parameter (``(0, 0)`` where the term does not involve that parameter).
"""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np

Factor = tuple[Fraction, Fraction]
Term = tuple[Factor, ...]

DEFAULT_I = tuple(
    Fraction(s)
    for s in (
        "0",
        "1/4",
        "1/3",
        "1/2",
        "2/3",
        "3/4",
        "4/5",
        "1",
        "5/4",
        "4/3",
        "3/2",
        "5/3",
        "7/4",
        "2",
        "9/4",
        "7/3",
        "5/2",
        "8/3",
        "11/4",
        "3",
    )
)
DEFAULT_J = (Fraction(0), Fraction(1), Fraction(2))

# Extra-P 4.2.5 default building blocks (extrap/modelers/single_parameter/basic.py,
# create_default_building_blocks with log terms): 42 of the 59 (i, j) pairs of DEFAULT_I x DEFAULT_J.
EXTRAP_PAIRS = tuple(
    (Fraction(a, b), Fraction(j))
    for a, b, j in (
        (0, 1, 1),
        (0, 1, 2),
        (1, 4, 0),
        (1, 3, 0),
        (1, 4, 1),
        (1, 3, 1),
        (1, 4, 2),
        (1, 3, 2),
        (1, 2, 0),
        (1, 2, 1),
        (1, 2, 2),
        (2, 3, 0),
        (3, 4, 0),
        (2, 3, 1),
        (3, 4, 1),
        (4, 5, 0),
        (2, 3, 2),
        (3, 4, 2),
        (1, 1, 0),
        (1, 1, 1),
        (1, 1, 2),
        (5, 4, 0),
        (5, 4, 1),
        (4, 3, 0),
        (4, 3, 1),
        (3, 2, 0),
        (3, 2, 1),
        (3, 2, 2),
        (5, 3, 0),
        (7, 4, 0),
        (2, 1, 0),
        (2, 1, 1),
        (2, 1, 2),
        (9, 4, 0),
        (7, 3, 0),
        (5, 2, 0),
        (5, 2, 1),
        (5, 2, 2),
        (8, 3, 0),
        (11, 4, 0),
        (3, 1, 0),
        (3, 1, 1),
    )
)

# Display names used in formulas when the caller gives none (paper notation: p for ranks).
SHORT_NAMES = {"ranks": "p", "gpus": "g", "nodes": "n", "batch_size": "b", "processes": "p"}


def as_fraction(value) -> Fraction:
    """An exponent as an exact fraction (floats are snapped to small denominators)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, str):
        return Fraction(value)
    return Fraction(value).limit_denominator(1000)


def factor_pairs(exponents_i=DEFAULT_I, exponents_j=DEFAULT_J, pairs=None) -> list[Factor]:
    """The non-trivial (i, j) factors of the search space, slowest growing first.

    `pairs` None: Extra-P's default pairs when I and J are the defaults, else all of I x J.
    """
    if pairs is None:
        default = {as_fraction(i) for i in exponents_i} == set(DEFAULT_I) and {
            as_fraction(j) for j in exponents_j
        } == set(DEFAULT_J)
        pairs = "extrap" if default else "all"
    if isinstance(pairs, str) and pairs == "all":
        found = product((as_fraction(i) for i in exponents_i), (as_fraction(j) for j in exponents_j))
    elif isinstance(pairs, str) and pairs == "extrap":
        wanted_i = {as_fraction(i) for i in exponents_i}
        wanted_j = {as_fraction(j) for j in exponents_j}
        found = [(i, j) for i, j in EXTRAP_PAIRS if i in wanted_i and j in wanted_j]
    elif isinstance(pairs, str):
        raise ValueError(f"unknown pair set {pairs!r} (use 'extrap', 'all' or a list of (i, j))")
    else:
        found = ((as_fraction(i), as_fraction(j)) for i, j in pairs)
    unique = {f for f in found if f != (0, 0)}
    if any(i < 0 or j < 0 for i, j in unique):
        raise ValueError("exponents must be non-negative")
    return sorted(unique)


def factor_values(x: np.ndarray, factor: Factor) -> np.ndarray:
    """x^i * log2(x)^j for an array of parameter values (> 0; log2(1) = 0)."""
    i, j = factor
    out = np.ones_like(x, dtype=float)
    if i:
        out = out * x ** float(i)
    if j:
        out = out * np.log2(x) ** float(j)
    return out


def term_values(X: np.ndarray, term: Term) -> np.ndarray:
    """Values of a term at points X of shape (n, m)."""
    out = np.ones(X.shape[0])
    for col, factor in enumerate(term):
        if factor != (0, 0):
            out = out * factor_values(X[:, col], factor)
    return out


def design_matrix(X: np.ndarray, terms: list[Term]) -> np.ndarray:
    """(n, 1 + len(terms)) matrix: a constant column then one column per term."""
    cols = [np.ones(X.shape[0])] + [term_values(X, t) for t in terms]
    return np.column_stack(cols)


def term_growth_key(term: Term) -> tuple[float, float]:
    """Growth of one term when all parameters grow together: (total poly degree, total log degree)."""
    return (sum(i.numerator / i.denominator for i, _ in term), sum(j.numerator / j.denominator for _, j in term))


def _exp_text(e: Fraction, decimal: bool) -> str:
    if e.denominator == 1:
        return str(e.numerator)
    if decimal and e.denominator in (2, 4, 5, 8):
        return f"{float(e):g}"
    return f"({e})"


def factor_text(name: str, factor: Factor) -> str:
    """``p^(2/3) * log2(p)^2`` style text of one factor (empty for (0, 0))."""
    i, j = factor
    parts = []
    if i:
        parts.append(name if i == 1 else f"{name}^{_exp_text(i, decimal=False)}")
    if j:
        parts.append(f"log2({name})" if j == 1 else f"log2({name})^{_exp_text(j, decimal=False)}")
    return " * ".join(parts)


def growth_text(term: Term | None, names: list[str]) -> str:
    """Big-O text of a term, e.g. ``O(p^0.5 log p)``; ``O(1)`` for None."""
    if term is None:
        return "O(1)"
    parts = []
    for name, (i, j) in zip(names, term):
        if i:
            parts.append(name if i == 1 else f"{name}^{_exp_text(i, decimal=True)}")
        if j:
            parts.append(f"log {name}" if j == 1 else f"log^{_exp_text(j, decimal=True)} {name}")
    return f"O({' '.join(parts)})" if parts else "O(1)"


def display_names(params: list[str], names: dict | None = None) -> list[str]:
    """Short names for formulas: explicit map first, then SHORT_NAMES, else the parameter name."""
    names = names or {}
    return [names.get(p, SHORT_NAMES.get(p, p)) for p in params]
