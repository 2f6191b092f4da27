"""Hypothesis search over many regions at once: single-parameter lines, then multi-parameter forms.

Rows of the arrays are regions (or region x line); columns are hypotheses. Selection is by
leave-one-out SMAPE; near-ties (within `tie_tolerance` of the best, relatively) go to the simplest
hypothesis (fewest terms, then slowest growth). Criterion "cv+reps" also uses the repetitions:
see `choose`. Multi-parameter models take the top single-parameter candidates of every parameter
from the lines of points (averaged over all parallel lines) and try sums and products of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations, product

import numpy as np

from extradeep.modeling.batched import chunk_rows, fit_batched, fit_one_term, fold, smape
from extradeep.modeling.terms import Factor, Term, factor_values, term_growth_key

NO_FACTOR = (Fraction(0), Fraction(0))  # a term's factor for a parameter it does not involve
# F-test levels for extra terms (with repetitions, with one), measured on sample_profiles and
# benchmarks/bench_modeling.py (docs/performance.md): 0.05 with repetitions let constant kernels
# with 1-2% scatter pass as growth; 0.01 with one repetition missed half of 20% growths at 2% noise.
SIGNIFICANCE_AUTO = (0.01, 0.05)
LACK_OF_FIT_LEVEL = 0.95  # the usual 5% test: shared scatter must be noticed, not proven


@dataclass
class SearchOptions:
    """Search-space and selection settings shared by PMNFModeler and fit_models."""

    exponents_i: tuple = ()
    exponents_j: tuple = ()
    pairs: object = None  # see terms.factor_pairs
    n_terms: int = 1
    nonnegative: object = "auto"  # True: term coefficients >= 0; "auto": terms follow the data's trend
    min_points: int = 5
    weighting: str = "relative"  # "relative": noise proportional to the value; "none": constant
    tie_tolerance: float = 0.0
    criterion: str = "cv"  # "cv": LOO SMAPE over all; "cv+reps": see `choose`
    significance: object = "auto"  # a level in (0, 1), or "auto": see SIGNIFICANCE_AUTO
    min_term_contribution: float = 0.0005
    top_k: int = 3  # single-parameter candidates per parameter for multi-parameter forms
    factors: list = field(default_factory=list)


@dataclass
class PointBatch:
    """Regions sharing the same measurement points: per-point means, weights and repetition spread."""

    X: np.ndarray  # (n, m) parameter values
    y: np.ndarray  # (R, n) mean over repetitions
    count: np.ndarray  # (R, n) repetitions per point
    pure_ss: np.ndarray  # (R, n) sum of squared deviations of repetitions from the point mean
    w: np.ndarray = None  # (R, n) least-squares weights (set by `weights`)
    v: np.ndarray = None  # (R, n) relative noise variance per repetition
    floor: np.ndarray = None  # (R,) smallest magnitude used for relative variances

    def single_rows(self, rows=slice(None)) -> np.ndarray:
        """Regions measured once at every point (no repetition spread to estimate the noise)."""
        return (self.count[rows] <= 1).all(axis=1)

    def noise(self, rows=slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """Pure-error variance per unit weight from the repetitions, and its degrees of freedom."""
        dof = (self.count[rows] - 1).sum(axis=1)
        ss = (self.pure_ss[rows] / self.v[rows]).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(dof > 0, ss / np.maximum(dof, 1), np.nan), dof


def weights(batch: PointBatch, weighting: str) -> None:
    """Set per-point weights n_k / v_k, v_k the noise variance shape (|mean|^2 when relative)."""
    if weighting == "relative":
        scale = np.abs(batch.y)
        top = scale.max(axis=1, keepdims=True)
        smallest = np.where(scale > 0, scale, np.inf).min(axis=1, keepdims=True)
        # Floors keep zeros and tiny values from taking all the weight (leverage 1 breaks LOO). The
        # last one is squared into a variance: 1e-150 keeps that a normal double (1e-300 squared
        # underflowed to 0 for subnormal data, and the weights became infinite)
        floor = np.maximum(np.maximum(1e-3 * top, np.where(np.isfinite(smallest), 0.5 * smallest, 0)), 1e-150)
        v = np.where(top > 0, np.maximum(scale, floor) ** 2, 1.0)
        batch.floor = floor[:, 0]
    elif weighting == "none":
        v = np.ones_like(batch.y)
        batch.floor = np.zeros(len(v))
    else:
        raise ValueError(f"unknown weighting {weighting!r} (use 'relative' or 'none')")
    batch.v = v
    batch.w = batch.count / v


@dataclass
class Hypotheses:
    """A list of hypotheses for one parameter: tuples of factor indices, with a simplicity rank."""

    members: list[tuple[int, ...]]
    rank: np.ndarray

    @property
    def size(self) -> np.ndarray:
        return np.array([len(m) for m in self.members])


def single_hypotheses(factors: list[Factor], n_terms: int) -> Hypotheses:
    members = [()]
    for h in range(1, n_terms + 1):
        members += list(combinations(range(len(factors)), h))
    keys = [(len(m), sorted((term_growth_key((factors[f],)) for f in m), reverse=True)) for m in members]
    order = sorted(range(len(members)), key=lambda k: keys[k])
    rank = np.empty(len(members), dtype=np.int64)
    rank[order] = np.arange(len(members))
    return Hypotheses(members, rank)


def trend_sign(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(R, m): +1 where values (R, n) grow with each parameter (X (n, m), log scale), -1 where they fall."""
    scale = np.log2(X)
    slope = (y - y.mean(axis=1, keepdims=True)) @ (scale - scale.mean(axis=0))
    return np.where(slope < 0, -1.0, 1.0)


def _sign_ok(coef: np.ndarray, sign, nonnegative) -> np.ndarray:
    """Admissible term signs: all >= 0 (True), each matching its sign in `sign` ("auto"; 0: free)."""
    terms = coef[..., 1:]
    if nonnegative == "auto":
        return (terms * sign >= 0).all(axis=-1)
    if nonnegative:
        return (terms >= 0).all(axis=-1)
    return np.ones(terms.shape[:-1], dtype=bool)


def _score(A, y, w, opts: SearchOptions, sign=None, want_press=True):
    """LOO SMAPE, weighted squares, weighted LOO squares (PRESS; NaN unless `want_press`) and
    admissibility for stacks A (H, n, p) or (R, H, n, p) against y, w (R, n).

    `sign` (R, 1, p - 1): the expected sign of each term for nonnegative="auto" (see `trend_sign`).
    """
    R = y.shape[0]
    H, n, p = A.shape[-3:]
    out_s = np.empty((R, H))
    out_ss = np.empty((R, H))
    out_press = np.full((R, H), np.nan)
    out_ok = np.empty((R, H), dtype=bool)
    for sl in chunk_rows(R, H * n * p * 4):
        Ac = A if A.ndim == 3 else A[sl]
        yc, wc = y[sl][:, None, :], w[sl][:, None, :]
        fit = fit_one_term(Ac[..., 1], yc, wc) if p == 2 else fit_batched(Ac, yc, wc)
        ok = fit.valid & fold(np.logical_and, np.isfinite(fit.loo_pred))
        if p > 1:
            # a term's largest share of the value: |c| * max |column / y| (fewer temporaries)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                reach = fold(np.maximum, np.abs(Ac[..., :, 1:]) / np.abs(yc)[..., None], -2)
                share = np.abs(fit.coef[..., 1:]) * reach
            ok &= (share >= opts.min_term_contribution).all(axis=-1)
            ok &= _sign_ok(fit.coef, None if sign is None else sign[sl], opts.nonnegative)
        out_s[sl] = smape(yc, fit.loo_pred)
        out_ss[sl] = np.einsum("...i,...i->...", wc, (yc - fit.fitted) ** 2)
        if want_press:  # only needed without repetitions (see `_simplify`)
            out_press[sl] = np.einsum("...i,...i->...", wc, (yc - np.where(ok[..., None], fit.loo_pred, yc)) ** 2)
        out_ok[sl] = ok
    return out_s, out_ss, out_press, out_ok


def choose(
    scores, ok, rank, opts: SearchOptions, size=None, wss=None, noise=None, press=None, n_coef=None, n_points=0
) -> np.ndarray:
    """Per row: the simplest admissible hypothesis whose LOO SMAPE is within the tie tolerance of the best.

    With criterion "cv+reps" only the maximum-likelihood (least weighted squares over all
    repetitions) hypothesis of each size competes on LOO SMAPE, and a hypothesis with fewer terms
    replaces the pick when its extra terms do not explain significantly more than the noise (see
    `_simplify`; `noise` = (variance, dof) per row from the repetitions, `press` (R, H) the
    weighted leave-one-out squares over `n_points` point means, `n_coef` (H,) coefficients per
    hypothesis).
    """
    rows = np.arange(ok.shape[0])
    winners = {}
    if opts.criterion == "cv+reps" and size is not None:
        keep = np.zeros_like(ok)
        for k in np.unique(size):
            of_size = ok & (size == k)[None, :]
            masked = np.where(of_size, wss, np.inf)
            best = masked.argmin(axis=1)
            winners[k] = (best, np.isfinite(masked[rows, best]))
            keep[rows, best] = winners[k][1]
        ok = ok & keep
    elif opts.criterion != "cv":
        raise ValueError(f"unknown criterion {opts.criterion!r} (use 'cv' or 'cv+reps')")
    s = np.where(ok, scores, np.inf)
    best = s.min(axis=1, keepdims=True)
    near = ok & (s <= best * (1.0 + opts.tie_tolerance) + 1e-12)
    pick = np.where(near, rank[None, :], np.iinfo(np.int64).max).argmin(axis=1)
    if winners and noise is not None:
        n_coef = size + 1 if n_coef is None else n_coef
        pick = _simplify(pick, winners, size, wss, noise, press, n_points - n_coef, n_points, opts.significance)
    return pick


def _simplify(pick, winners, size, wss, noise, press, resid_dof, n_points, significance):
    """Replace each pick by the smallest-size winner whose extra squares are within the noise.

    The noise variance is the repetitions' spread, unless the pick's residuals scatter
    significantly more than that (lack-of-fit F-test): then the points carry noise that all
    repetitions of a point share (rank-to-rank or run-to-run variation the repetitions cannot
    see) and the residual variance is the noise. With one repetition the noise is the pick's
    leave-one-out squares per point. Extra terms must then pass an F-test at `significance`
    ("auto": SIGNIFICANCE_AUTO, stricter with repetitions, where the in-sample squares of the best
    of many shapes understate the noise; leave-one-out squares already include that).
    """
    from scipy.special import fdtri  # scipy.special imports far faster than scipy.stats

    var, dof = noise
    rows = np.arange(len(pick))
    own_dof = resid_dof[pick]
    with np.errstate(divide="ignore", invalid="ignore"):
        level = 1 - np.where(dof > 0, *SIGNIFICANCE_AUTO) if significance == "auto" else 1 - significance
        lack = wss[rows, pick] / own_dof
        shared = (own_dof > 0) & (lack > var * fdtri(np.maximum(own_dof, 1), np.maximum(dof, 1), LACK_OF_FIT_LEVEL))
        sigma2 = np.where(dof > 0, np.where(shared, lack, var), press[rows, pick] / max(n_points, 1))
        df2 = np.where((dof > 0) & ~shared, dof, own_dof)
    done = np.zeros(len(pick), dtype=bool)
    for k in sorted(winners):
        cand, valid = winners[k]
        extra = size[pick] - k
        usable = valid & ~done & (extra > 0) & (df2 > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = (wss[rows, cand] - wss[rows, pick]) / np.maximum(extra, 1) / sigma2
            crit = fdtri(np.maximum(extra, 1), np.maximum(df2, 1), level)
        accept = usable & (stat < crit)
        pick = np.where(accept, cand, pick)
        done |= accept
    return pick


def alternatives(pick, ok, size, wss, noise, n_points: int, limit: int = 8) -> np.ndarray:
    """(R, limit) hypotheses of the pick's size that fit about as well (-1 pads): the pick's rivals.

    A rival's extra weighted squares are not significant at 5% against the repetitions' spread
    (or, without repetitions, the pick's residual variance). Prediction intervals widen to cover
    the rivals, so the uncertainty of choosing exponents shows where the data cannot settle it.
    """
    from scipy.special import fdtri

    rows = np.arange(len(pick))
    var, dof = noise
    own_dof = n_points - size[pick] - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        own_var = wss[rows, pick] / np.maximum(own_dof, 1)
        use_reps = (dof > 0) & (var > 0)
        sigma2 = np.where(use_reps, var, own_var)
        crit = fdtri(1, np.maximum(np.where(use_reps, dof, own_dof), 1), 0.95)
        stat = (wss - wss[rows, pick][:, None]) / sigma2[:, None]
    rival = ok & (size[None, :] == size[pick][:, None]) & (stat < crit[:, None]) & (sigma2 > 0)[:, None]
    rival[rows, pick] = False
    order = np.argsort(np.where(rival, wss, np.inf), axis=1, kind="stable")[:, :limit]
    return np.where(np.take_along_axis(rival, order, axis=1), order, -1)


def single_design(x: np.ndarray, factors: list[Factor], hyps: Hypotheses) -> dict[int, tuple]:
    """Design stacks grouped by column count: p -> (hypothesis indices, A (H, n, p))."""
    table = np.stack([factor_values(x, f) for f in factors]) if factors else np.empty((0, x.size))
    groups: dict[int, list[int]] = {}
    for idx, m in enumerate(hyps.members):
        groups.setdefault(len(m) + 1, []).append(idx)
    out = {}
    for p, idxs in groups.items():
        cols = [np.ones((len(idxs), x.size))]
        for t in range(p - 1):
            cols.append(table[[hyps.members[i][t] for i in idxs]])
        out[p] = (np.array(idxs), np.stack(cols, axis=-1))
    return out


def score_single(x, y, w, hyps: Hypotheses, opts: SearchOptions, want_press=True):
    """LOO SMAPE, weighted squares, weighted LOO squares (R, H) and admissibility of every hypothesis on rows y (R, n)."""
    H = len(hyps.members)
    scores = np.full((y.shape[0], H), np.inf)
    wss = np.full((y.shape[0], H), np.inf)
    press = np.full((y.shape[0], H), np.inf)
    ok = np.zeros((y.shape[0], H), dtype=bool)
    sign = trend_sign(x[:, None], y)[:, :, None]
    for idxs, A in single_design(x, opts.factors, hyps).values():
        scores[:, idxs], wss[:, idxs], press[:, idxs], ok[:, idxs] = _score(A, y, w, opts, sign, want_press)
    return scores, wss, press, ok


def line_indices(X: np.ndarray, col: int, min_points: int) -> np.ndarray | None:
    """Point indices (lines, n_l) of the longest lines along parameter `col` sharing one value set."""
    others = np.delete(X, col, axis=1)
    lines: dict[tuple, list[int]] = {}
    for i, key in enumerate(map(tuple, others)):
        lines.setdefault(key, []).append(i)
    by_sig: dict[tuple, list[list[int]]] = {}
    for idx in lines.values():
        idx = sorted(idx, key=lambda i: X[i, col])
        values = tuple(X[idx, col])
        if len(set(values)) == len(values) >= min_points:
            by_sig.setdefault(values, []).append(idx)
    if not by_sig:
        return None
    sig = max(by_sig, key=lambda s: (len(s), len(by_sig[s])))
    return np.array(by_sig[sig])


def line_candidates(batch: PointBatch, col: int, hyps: Hypotheses, opts: SearchOptions):
    """Chosen hypothesis (R,) and the top-k non-constant candidates (R, k) along one parameter."""
    L = line_indices(batch.X, col, opts.min_points)
    R = batch.y.shape[0]
    n_lines, n_l = L.shape
    y = batch.y[:, L].reshape(R * n_lines, n_l)
    w = batch.w[:, L].reshape(R * n_lines, n_l)
    s, wss, press, ok = score_single(batch.X[L[0], col], y, w, hyps, opts, batch.single_rows().any())
    s = s.reshape(R, n_lines, -1).mean(axis=1)
    wss = wss.reshape(R, n_lines, -1).sum(axis=1)
    press = press.reshape(R, n_lines, -1).sum(axis=1)
    ok = ok.reshape(R, n_lines, -1).mean(axis=1) >= 0.5
    chosen = choose(
        s, ok, hyps.rank, opts, hyps.size * n_lines, wss, batch.noise(), press, (hyps.size + 1) * n_lines, L.size
    )
    ranked = np.where(ok, s, np.inf)
    ranked[:, 0] = np.inf  # the constant hypothesis is never a multi-parameter factor
    ranked[np.arange(R), chosen] = -1.0
    k = min(opts.top_k, ranked.shape[1])
    top = np.argsort(ranked, axis=1, kind="stable")[:, :k]
    top_ok = np.take_along_axis(ranked, top, axis=1) < np.inf
    return chosen, top, top_ok


def forms(active: int) -> list[tuple[tuple[int, ...], ...]]:
    """Sums of products of the active parameters (Extra-P's combinations), also over subsets of them.

    Forms over subsets (and the constant, the empty form) let a parameter that the lines wrongly
    called active drop out again.
    """
    monomials = [s for r in range(1, active + 1) for s in combinations(range(active), r)]
    if active >= 4:
        # Extra-P models four parameters as their sum or their product only; so do we, over every
        # subset (27 forms, where all mixed sums of products would be 1,795)
        sums = [tuple((c,) for c in subset) for subset in monomials if len(subset) > 1]
        return [(), *((mono,) for mono in monomials), *sums]
    out = [()]
    for size in range(1, active + 1):
        for form in combinations(monomials, size):
            used = set().union(*form)
            if len(form) <= len(used):
                out.append(form)
    return out


def _monomial_sign(trend: np.ndarray, cols: list[int]) -> np.ndarray:
    """Expected sign of a product term: the parameters' common trend, 0 (free) when they disagree."""
    signs = trend[:, cols]
    return np.where((signs == signs[:, :1]).all(axis=1), signs[:, 0], 0.0)


@dataclass
class Choice:
    """The chosen hypothesis of one region: its terms and leave-one-out SMAPE."""

    terms: list[Term]
    cv_smape: float
    rivals: list[list[Term]] = field(default_factory=list)


def search_single_parameter(batch: PointBatch, opts: SearchOptions) -> list[Choice]:
    hyps = single_hypotheses(opts.factors, opts.n_terms)
    s, wss, press, ok = score_single(batch.X[:, 0], batch.y, batch.w, hyps, opts, batch.single_rows().any())
    chosen = choose(s, ok, hyps.rank, opts, hyps.size, wss, batch.noise(), press, n_points=len(batch.X))
    rivals = alternatives(chosen, ok, hyps.size, wss, batch.noise(), len(batch.X))

    def terms(h):
        return [(opts.factors[f],) for f in hyps.members[h]]

    return [Choice(terms(c), float(s[r, c]), [terms(a) for a in rivals[r] if a >= 0]) for r, c in enumerate(chosen)]


def search_multi_parameter(batch: PointBatch, opts: SearchOptions) -> list[Choice]:
    m = batch.X.shape[1]
    hyps = single_hypotheses(opts.factors, 1)
    per_param = [line_candidates(batch, col, hyps, opts) for col in range(m)]
    active = np.stack([pc[0] != 0 for pc in per_param], axis=1)  # (R, m)
    result: list[Choice | None] = [None] * batch.y.shape[0]
    for pattern in {tuple(a) for a in active}:
        rows = np.flatnonzero((active == pattern).all(axis=1))
        cols = [c for c in range(m) if pattern[c]]
        for r, choice in zip(rows, _search_forms(batch, rows, cols, per_param, opts)):
            result[r] = choice
    return result


def _search_forms(batch: PointBatch, rows, cols, per_param, opts: SearchOptions) -> list[Choice]:
    """Fit every form x candidate combination on all points for the regions `rows`."""
    y, w = batch.y[rows], batch.w[rows]
    if not cols:
        s = _score(np.ones((1, len(batch.X), 1)), y, w, opts)[0]
        return [Choice([], float(v)) for v in s[:, 0]]
    tables = [np.stack([factor_values(batch.X[:, c], f) for f in opts.factors]) for c in range(batch.X.shape[1])]
    # three or four active parameters: two candidates each keep the forms x combinations affordable
    k = per_param[cols[0]][1].shape[1] if len(cols) < 3 else min(2, per_param[cols[0]][1].shape[1])
    combos = np.array(list(product(range(k), repeat=len(cols))))  # (C, a)
    cand = [per_param[c][1][rows][:, combos[:, a]] for a, c in enumerate(cols)]  # (R, C) factor ids
    cand_ok = [per_param[c][2][rows][:, combos[:, a]] for a, c in enumerate(cols)]
    values = [tables[c][cand[a] - 1] for a, c in enumerate(cols)]  # hypothesis i>0 is factor i-1
    trend = trend_sign(batch.X, y)
    all_s, all_ss, all_press, all_ok, all_rank, all_size, labels = [], [], [], [], [], [], []
    for form in forms(len(cols)):
        used = sorted(set().union(*form)) if form else []
        # combinations that differ only in parameters the form does not use are the same hypothesis
        keep = np.unique(combos[:, used], axis=0, return_index=True)[1] if used else np.array([0])
        columns = [np.ones_like(values[0][:, keep])] + [
            np.prod([values[a][:, keep] for a in mono], axis=0) for mono in form
        ]
        A = np.stack(columns, axis=-1)  # (R, C', n, p)
        sign = (
            np.stack([_monomial_sign(trend, [cols[a] for a in mono]) for mono in form], axis=-1)
            if form
            else np.zeros((len(rows), 0))
        )
        s, ss, press, ok = _score(A, y, w, opts, sign[:, None, :], batch.single_rows(rows).any())
        all_s.append(s)
        all_ss.append(ss)
        all_press.append(press)
        all_size.append(np.full(s.shape[1], len(form)))
        all_ok.append(ok & np.all([cand_ok[a][:, keep] for a in used], axis=0) if used else ok)
        # fewer terms first, then the candidates the lines preferred, then fewer factors per term
        all_rank.append(len(form) * 10**6 + combos[keep].sum(axis=1) * 10**3 + sum(len(mono) for mono in form))
        labels += [(form, ci) for ci in keep]
    s, ok, rank = np.concatenate(all_s, 1), np.concatenate(all_ok, 1), np.concatenate(all_rank)
    size, wss, noise = np.concatenate(all_size), np.concatenate(all_ss, 1), batch.noise(rows)
    chosen = choose(s, ok, rank, opts, size, wss, noise, np.concatenate(all_press, 1), n_points=len(batch.X))
    rivals = alternatives(chosen, ok, size, wss, noise, len(batch.X), limit=4)

    all_cols = range(batch.X.shape[1])

    def terms(r, h):
        form, ci = labels[h]
        factor_of = {col: opts.factors[cand[a][r, ci] - 1] for a, col in enumerate(cols)}
        return [
            tuple(factor_of[col] if col in used else NO_FACTOR for col in all_cols)
            for used in ({cols[a] for a in mono} for mono in form)
        ]

    def key(r, h):  # hypotheses with equal keys have equal terms (cheaper than comparing Fractions)
        form, ci = labels[h]
        return form, tuple(int(cand[a][r, ci]) for a in range(len(cols)) if any(a in mono for mono in form))

    out = []
    for r, c in enumerate(chosen):
        if not ok[r].any():
            out.append(Choice([], float("nan")))
            continue
        seen = {key(r, c)}
        unique = [terms(r, a) for a in rivals[r] if a >= 0 and not (key(r, a) in seen or seen.add(key(r, a)))]
        out.append(Choice(terms(r, c), float(s[r, c]), unique))
    return out
