"""Step time as computation + exposed communication, so predictions can see overlap run out.

Data-parallel training hides the gradient all-reduce behind the backward pass. While the
communication C is shorter than that overlap window, the measured step time S barely grows; once C
outgrows the window, every extra millisecond of C is exposed. A PMNF fitted to S over a range in
which C is hidden cannot extrapolate that change. So the measured step is split into parts that
extrapolate well (docs/analysis.md, "Time per step as a composition"):

    S = B + C - O,   B = idle + computation + memory (the step without communication),
                     O = computation + communication + memory - GPU busy (time with two or more
                         streams busy: the hidden part of the work).

B gets a PMNF model, C one per collective plus the wait for the slowest rank
(:mod:`extradeep.analysis.communication`). The overlap O cannot be modeled from its past alone (it
saturates), so candidate step models compete by leave-one-out error on the measured points:

* ``direct``: a PMNF of S (the paper's approach);
* ``proportional``: O = f * C, the hidden share f of communication stays as measured;
* ``saturated``: O = min(f * C, O_max), the overlap window is full at the largest measured overlap;
* ``replayed`` (when ingest replayed a run): O = f_ref * C * r(k), f_ref the hidden share at the
  traced point and r the exposure curve of its trace (:mod:`extradeep.predictor.exposure`):
  replaying it with the collectives k times longer shows how the hidden share falls once the
  overlap window fills. k is the pure communication relative to the traced point, over B relative
  to it (the window scales with the computation).

``replayed`` (when a curve was measured, else ``proportional``) predicts unless another candidate's
leave-one-out error is clearly lower (:func:`_choose`). The interval of ``replayed`` adds B's and C's
own intervals and its leave-one-out error. The interval of the other rules is the direct fit's
relative band around the prediction, widened to reach all rules: inside the measured range they
agree, beyond it the interval says how far apart the "overlap keeps pace" and "overlap is
exhausted" regimes are, which the measured points cannot decide. Used for one parameter (the
overlap window depends on the other parameters otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from extradeep.analysis.communication import (
    as_vector,
    communication_sum,
    load_comm_model,
    pure_long,
)
from extradeep.columns import COMMUNICATION, COMPUTATION, MEMORY, PART, PART_IDLE, PHASE, REP, VALUE
from extradeep.modeling.batched import smape


@dataclass
class Exposure:
    """The exposure curve of one traced run at parameter value ``x_ref``: the share of the pure
    communication the step hides (``hidden``) when it is ``k`` times as long as traced, and the
    hidden share of the measured communication there (``share``, set by the fit)."""

    x_ref: float
    k: np.ndarray
    hidden: np.ndarray
    share: float = float("nan")

    def relative(self, k) -> np.ndarray:
        """hidden(k) / hidden(1): how the hidden share changes from the traced point. Beyond the
        largest k the window is full, so the hidden amount (k * hidden) stays as it was there."""
        k = np.maximum(as_vector(k), 0.0)
        last = self.k[-1]
        inside = np.interp(np.minimum(k, last), self.k, self.hidden)
        share = np.where(k > last, self.hidden[-1] * last / np.where(k > last, k, 1.0), inside)
        at_one = float(np.interp(1.0, self.k, self.hidden))
        return share / at_one if at_one > 0 else np.ones_like(k)

    def to_dict(self) -> dict:
        return {
            "x_ref": float(self.x_ref),
            "k": [float(v) for v in self.k],
            "hidden": [float(v) for v in self.hidden],
            "share": float(self.share),
        }

    @classmethod
    def from_dict(cls, data: dict | None) -> Exposure | None:
        if not data:
            return None
        return cls(
            float(data["x_ref"]),
            np.asarray(data["k"], float),
            np.asarray(data["hidden"], float),
            float(data.get("share", np.nan)),
        )

    @classmethod
    def from_experiment(cls, experiment, upto: float = np.inf) -> Exposure | None:
        """The curve an Experiment keeps (``settings.exposure``, written by ingest) of its largest
        point up to ``upto``, for a model of its one parameter; None without one. A curve of a point
        the experiment does not model (held out for evaluation) is never used."""
        params = experiment.params
        if len(params) != 1:
            return None
        modeled = set(experiment.points[params[0]].astype(float))
        usable = [
            c
            for c in experiment.settings.exposure or ()
            if params[0] in c.get("point", {})
            and float(c["point"][params[0]]) <= upto
            and float(c["point"][params[0]]) in modeled
        ]
        if not usable:
            return None
        data = max(usable, key=lambda c: float(c["point"][params[0]]))
        return cls.from_dict({**data, "x_ref": data["point"][params[0]]})


@dataclass
class StepComposition:
    """Step-time model B(x) + C(x) - O(x) with the overlap rule chosen by leave-one-out error.

    Same interface as :class:`extradeep.modeling.Model` (predict, interval, formula, growth).
    ``cv_smapes`` holds each candidate's leave-one-out SMAPE (%), ``choice`` the one that predicts."""

    direct: object
    base: object
    comm: object
    share: float  # f: hidden share of communication at the measured points
    window: float  # O_max: the largest measured overlap (s per step)
    choice: str
    cv_smapes: dict = field(default_factory=dict)
    smape: float = float("nan")
    exposure: Exposure | None = None
    idle: object | None = None  # PMNF of the idle part of B: what B holds besides the work that can hide C

    def candidates(self, X) -> dict[str, np.ndarray]:
        b, c = as_vector(self.base.predict(X)), as_vector(self.comm.predict(X))
        return {"direct": as_vector(self.direct.predict(X)), **self._composed(X, b, c)}

    def _composed(self, X, b, c) -> dict[str, np.ndarray]:
        c = np.maximum(c, 0.0)
        cap = self.hiding_room(X, b, c)
        hidden = self.share * c
        out = {
            "proportional": b + c - np.minimum(hidden, cap),
            "saturated": b + c - np.minimum(np.minimum(hidden, self.window), cap),
        }
        if self.exposure is not None:
            share = self.exposure.share if np.isfinite(self.exposure.share) else self.share
            relative = self.exposure.relative(self._growth_since_trace(X, b))
            out["replayed"] = b + c - np.minimum(share * c * relative, cap)
        return out

    def hiding_room(self, X, b, c) -> np.ndarray:
        """The most communication a step can hide: no more than there is (C), and no more than the
        computation and memory work it runs beside (B minus idle). Every rule stays within it, so the
        step is never shorter than its communication plus idle, nor than B: no part exceeds it."""
        b = np.maximum(as_vector(b), 0.0)
        idle = 0.0 if self.idle is None else np.clip(as_vector(self.idle.predict(X)), 0.0, b)
        return np.minimum(np.maximum(as_vector(c), 0.0), b - idle)

    def _growth_since_trace(self, X, b) -> np.ndarray:
        """k: pure communication relative to the traced point, over B relative to it."""
        ref = np.array([self.exposure.x_ref])
        wait = getattr(self.comm, "wait", 0.0)
        pure, pure_ref = as_vector(self.comm.predict(X)) - wait, as_vector(self.comm.predict(ref)) - wait
        b_ref = as_vector(self.base.predict(ref))
        if pure_ref[0] <= 0 or b_ref[0] <= 0:
            return np.ones_like(b)
        return (np.maximum(pure, 0.0) / pure_ref) / np.maximum(b / b_ref, 1e-12)

    def predict(self, X):
        value = self.candidates(X)[self.choice]
        return float(value[0]) if np.ndim(X) == 0 else value

    def interval(self, X, level: float = 0.95):
        lo, hi = self._parts_band(X, level) if self.choice == "replayed" else self._rules_band(X, level)
        return (float(lo[0]), float(hi[0])) if np.ndim(X) == 0 else (lo, hi)

    def _rules_band(self, X, level: float) -> tuple[np.ndarray, np.ndarray]:
        """The direct fit's relative band (noise, exponent choice) around the prediction, widened to
        reach every candidate, also with the communication at the ends of its own interval beyond
        the measured range: there the rules show regimes the points cannot tell apart."""
        pred = self.candidates(X)
        d_lo, d_hi = (as_vector(v) for v in self.direct.interval(X, level=level))
        chosen = pred[self.choice]
        scale = np.divide(chosen, pred["direct"], out=np.ones_like(chosen), where=pred["direct"] > 0)
        b = as_vector(self.base.predict(X))
        ends = [self._composed(X, b, c) for c in self._comm_reach(X, level)]
        values = np.stack([*pred.values(), *(v for end in ends for v in end.values())])
        return np.minimum(d_lo * scale, values.min(axis=0)), np.maximum(d_hi * scale, values.max(axis=0))

    def _parts_band(self, X, level: float) -> tuple[np.ndarray, np.ndarray]:
        """The replayed rule at the ends of B's and C's own intervals, plus the rule's own
        leave-one-out error (all added, not pooled: their errors may share a cause, and the steps
        of more ranks wait for the slowest of more, which no part's model sees). The traced window
        decides between the overlap regimes, so the rival rules do not widen it; the direct fit of
        S, blind to that window, does not either."""
        b = as_vector(self.base.predict(X))
        b_lo, b_hi = (as_vector(v) for v in self.base.interval(X, level=level))
        c = as_vector(self.comm.predict(X))
        c_lo, c_hi = (as_vector(v) for v in self.comm.interval(X, level=level))
        chosen, *ends = (self._composed(X, b, end)["replayed"] for end in (c, c_lo, c_hi))
        ends = np.stack(ends)
        rule = chosen * np.nan_to_num(self.cv_smape, nan=0.0) / 100
        return (
            np.minimum(ends.min(axis=0), chosen) - (b - b_lo) - rule,
            np.maximum(ends.max(axis=0), chosen) + (b_hi - b) + rule,
        )

    def _comm_reach(self, X, level: float) -> tuple[np.ndarray, np.ndarray]:
        """C scaled by how much its relative interval has grown since the largest measured point:
        1 inside the measured range, so the band there stays that of the measured step time."""

        def relative(x):
            c = as_vector(self.comm.predict(x))
            lo, hi = (as_vector(v) for v in self.comm.interval(x, level=level))
            safe = np.where(c > 0, c, 1.0)
            return np.where(c > 0, lo / safe, 1.0), np.where(c > 0, hi / safe, 1.0)

        reach = np.array([float(np.max(self.comm.points))])
        edge_lo, edge_hi = relative(reach)
        at_lo, at_hi = relative(X)
        c = as_vector(self.comm.predict(X))
        beyond = as_vector(X) > reach[0]
        grow_hi = np.where(beyond, np.maximum(at_hi / edge_hi, 1.0), 1.0)
        grow_lo = np.where(beyond, np.clip(at_lo / np.where(edge_lo > 0, edge_lo, 1.0), 0.0, 1.0), 1.0)
        return c * grow_lo, c * grow_hi

    def formula(self, names: dict | None = None, digits: int = 4) -> str:
        """The chosen rule with B and C written out; C - min(f C, W) is shown as max((1-f) C, C - W)."""
        if self.choice == "direct":
            return self.direct.formula(names, digits)
        base, comm = self.base.formula(names, digits), self.comm.formula(names, digits)
        if self.choice == "proportional":
            return f"{base} + {1 - self.share:.3g} * ({comm})"
        if self.choice == "replayed":
            return (
                f"{base} + C - {self.exposure.share:.3g} * C * r(k), C = {comm}, r replayed at {self.exposure.x_ref:g}"
            )
        return f"{base} + max({1 - self.share:.3g} * C, C - {self.window:.{digits}g}), C = {comm}"

    def __str__(self) -> str:
        return self.formula()

    def growth(self, names: dict | None = None) -> str:
        lead = self.direct if self.choice == "direct" else max((self.base, self.comm), key=lambda m: m.growth_key())
        return lead.growth(names)

    def growth_key(self):
        lead = self.direct if self.choice == "direct" else max((self.base, self.comm), key=lambda m: m.growth_key())
        return lead.growth_key()

    @property
    def cv_smape(self) -> float:
        return float(self.cv_smapes.get(self.choice, np.nan))

    def to_dict(self) -> dict:
        return {
            "type": "step composition",
            "choice": self.choice,
            "share": float(self.share),
            "window": float(self.window),
            "cv_smapes": {k: float(v) for k, v in self.cv_smapes.items()},
            "smape": float(self.smape),
            "direct": self.direct.to_dict(),
            "base": self.base.to_dict(),
            "comm": self.comm.to_dict(),
            "exposure": None if self.exposure is None else self.exposure.to_dict(),
            "idle": None if self.idle is None else self.idle.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> StepComposition:
        from extradeep.modeling import Model

        return cls(
            Model.from_dict(data["direct"]),
            Model.from_dict(data["base"]),
            load_comm_model(data["comm"]),
            float(data["share"]),
            float(data["window"]),
            data["choice"],
            dict(data["cv_smapes"]),
            float(data["smape"]),
            Exposure.from_dict(data.get("exposure")),
            None if data.get("idle") is None else Model.from_dict(data["idle"]),
        )


def step_parts(app_steps: pd.DataFrame, params: list[str], phase: str = "train") -> pd.DataFrame:
    """Per point and repetition of ``phase``: S (step), B (step without communication), C, O and I (idle)."""
    frame = app_steps[app_steps[PHASE] == phase]
    wide = frame.pivot_table(index=[*params, REP], columns="quantity", values=VALUE, aggfunc="first")
    need = ["epoch time", "idle", "computation", "communication", "memory"]
    if not set(need) <= set(wide.columns):
        return pd.DataFrame(columns=[*params, REP, "S", "B", "C", "O", "I"])
    wide = wide[need].dropna(subset=["epoch time"]).fillna(0.0)  # a part never measured is 0, a step is not
    busy = wide["epoch time"] - wide[PART_IDLE]
    out = pd.DataFrame(
        {"S": wide["epoch time"], "B": wide[PART_IDLE] + wide[COMPUTATION] + wide[MEMORY], "C": wide[COMMUNICATION]}
    )
    out["O"] = (wide[COMPUTATION] + wide[COMMUNICATION] + wide[MEMORY] - busy).clip(lower=0.0)
    out["I"] = wide[PART_IDLE]
    return out.reset_index()


def fit_step_composition(
    parts: pd.DataFrame,
    params: list[str],
    options: dict | None = None,
    pure: pd.DataFrame | None = None,
    exposure: Exposure | None = None,
    topology=None,
):
    """A :class:`StepComposition` for the step parts of one phase, or None when it does not apply
    (several parameters, no communication, fewer than 3 points or a component without a model).

    ``pure``: per collective, point and repetition the pure duration per step
    (:func:`extradeep.analysis.communication.pure_times`); with it C is the sum of per-collective
    models plus the wait for the slowest rank, otherwise one PMNF of the category sum. ``exposure``:
    the exposure curve of a traced run, which adds the ``replayed`` candidate. ``topology``
    (:class:`extradeep.analysis.communication.Topology`): collectives get alpha-beta models that know
    the node boundary."""
    points = parts[params].drop_duplicates()
    if len(params) != 1 or parts.empty or not (parts["C"] > 0).any() or len(points) < 3:
        return None
    extra = pure_long(pure if pure is not None else pd.DataFrame(), parts, params)
    full = _fit_parts(parts, params, options, folds=None, extra=extra, pure=pure, topology=topology)
    if full is None:
        return None
    n = len(points)
    folds = _fit_parts(
        parts,
        params,
        {**(options or {}), "min_points": max(2, min(n - 1, _min_points(options)))},
        folds=points[params[0]].to_numpy(float),
        extra=extra,
        pure=pure,
        topology=topology,
    )
    medians = parts.groupby(params)[["S", "C", "O"]].median()
    if exposure is not None:
        # anchored at the traced point: its measured hidden share is where the curve starts
        ref = medians.loc[exposure.x_ref] if exposure.x_ref in medians.index else None
        share_ref = float(ref["O"] / ref["C"]) if ref is not None and ref["C"] > 0 else np.nan
        exposure = replace(exposure, share=float(np.clip(share_ref, 0.0, 1.0)))
    cv = {}
    if folds is not None:
        guesses, actual = {}, []
        for x, fold in folds.items():
            rest = medians.drop(index=x)
            share, window = _overlap_rule(rest)
            trial = StepComposition(
                fold["S"], fold["B"], fold["C"], share, window, "direct", exposure=exposure, idle=fold["I"]
            )
            for name, value in trial.candidates(np.array([x])).items():
                guesses.setdefault(name, []).append(value[0])
            actual.append(medians.loc[x, "S"])
        cv = {k: float(smape(np.array(actual), np.array(v))) for k, v in guesses.items()}
    share, window = _overlap_rule(medians)
    choice = _choose(cv, _repetition_noise(parts, params))
    model = StepComposition(
        full["S"], full["B"], full["C"], share, window, choice, cv, exposure=exposure, idle=full["I"]
    )
    xs = medians.index.to_numpy(float)
    model.smape = float(smape(medians["S"].to_numpy(float), as_vector(model.predict(xs))))
    return model


def _choose(cv: dict, noise: float) -> str:
    """The candidate that predicts, by leave-one-out SMAPE (``cv``) and the repetition ``noise`` of
    that error (NaN with one repetition).

    ``replayed`` knows where the traced run's overlap window ends, which no leave-one-out test over
    the measured points can check: another rule replaces it only when it beats it by more than the
    noise and by half its error. Without a trace, ``proportional`` (the overlap keeps its measured
    share) stands unless ``direct`` (a PMNF of S) or ``saturated`` (a window full at the largest
    measured overlap) is lower by more than the noise; with one repetition the lowest error decides."""
    if not cv:
        return "direct"
    if "replayed" in cv:
        margin = max(np.nan_to_num(noise), cv["replayed"] / 2)
        better = [k for k in cv if cv[k] < cv["replayed"] - margin]
        return min(better, key=cv.get) if better else "replayed"
    if np.isnan(noise):
        return min(cv, key=cv.get)
    better = [k for k in ("direct", "saturated") if cv[k] < cv["proportional"] - noise]
    return min(better, key=cv.get) if better else "proportional"


def _repetition_noise(parts: pd.DataFrame, params: list[str]) -> float:
    """Standard error (%) of a leave-one-out SMAPE from repetition noise: the median over points of
    the repetitions' half-range of S (relative), over the square root of the number of points.
    NaN (unknown) with one repetition per point."""
    if parts.groupby(params)[REP].nunique().max() < 2:
        return float("nan")
    spread = parts.groupby(params)["S"].agg(lambda s: (s.max() - s.min()) / 2 / s.median() if s.median() > 0 else 0.0)
    return float(100 * spread.median() / np.sqrt(len(spread))) if len(spread) else 0.0


def _min_points(options: dict | None) -> int:
    from extradeep.modeling import PMNFModeler

    return int(PMNFModeler(**(options or {})).min_points)


def _overlap_rule(medians: pd.DataFrame) -> tuple[float, float]:
    """(f, O_max): median hidden share of communication and the largest measured overlap."""
    comm = medians["C"].to_numpy(float)
    share = np.median(np.divide(medians["O"], comm, out=np.zeros(len(comm)), where=comm > 0))
    return float(np.clip(share, 0.0, 1.0)), float(medians["O"].max())


def _fit_parts(
    parts: pd.DataFrame,
    params: list[str],
    options: dict | None,
    folds,
    extra: pd.DataFrame,
    pure: pd.DataFrame | None,
    topology=None,
):
    """PMNF models of S, B and C: one set (``folds`` None), or one set per left-out point
    ({point: {"S": model, ...}}) fitted in one batch. None when any model is missing. With pure
    collective durations (``extra`` rows) C is their :class:`CommunicationSum`."""
    from extradeep.modeling import fit_models

    value_vars = ["S", "B", "C", "I"] if "I" in parts.columns else ["S", "B", "C"]
    long = parts.melt(id_vars=[*params, REP], value_vars=value_vars, var_name=PART)
    if not extra.empty:
        long = pd.concat([long, extra], ignore_index=True)
    if folds is None:
        frames = [long.assign(fold=0.0)]
    else:
        frames = [long[long[params[0]] != x].assign(fold=x) for x in folds]
    fitted = fit_models(pd.concat(frames, ignore_index=True), params, by=("fold", "part"), rep="rep", options=options)
    if fitted.loc[fitted[PART].isin(["S", "B", "C"]), "model"].isna().any():
        return None
    models = {
        fold: _with_comm_sum(dict(zip(group[PART], group["model"])), parts, pure, params, topology)
        for fold, group in fitted.groupby("fold")
    }
    return models[0.0] if folds is None else models


def _with_comm_sum(models: dict, parts: pd.DataFrame, pure, params: list[str], topology=None) -> dict:
    comm = communication_sum(models, parts, pure, params, topology) if pure is not None else None
    # I (idle) may have no model (idle 0 everywhere): then the rules hide at most C, within B
    return {"S": models["S"], "B": models["B"], "C": comm if comm is not None else models["C"], "I": models.get("I")}
