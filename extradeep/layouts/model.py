"""The layout model: the step composed from parts (:mod:`extradeep.layouts.parts`), calibrated on
measured step times and, where profiles give them, measured parts.

Scikit-learn style: configure in the constructor, :meth:`LayoutModel.fit` on observations,
:meth:`LayoutModel.predict` for any layouts (with 95% intervals), fitted attributes end in ``_``.

Calibration is one robust least-squares problem (:func:`scipy.optimize.least_squares`, soft-L1
loss) over the log of each coefficient: residuals are the log ratio of predicted to measured step
time per observation (so the relative error is what is minimised), each workload's rows weighted
so that every workload counts the same; measured parts add residuals of (predicted - measured part)
/ measured step; and a weak pull of every coefficient towards its prior keeps the ones that no
observation moves where physics puts them. The interval comes from held-out errors: the model is
refitted without each workload (or each of five folds when there are fewer than three workloads;
a held-out layout's measured parts leave with its step), and
the half width is the 95th percentile of the held-out log errors, weighted per workload; the spread
of the refitted models' predictions widens it where they disagree. Sizing the interval (folds,
held-out errors, the half width at a layout's scale) is :mod:`extradeep.layouts.interval`'s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from extradeep.columns import (
    DP,
    FITS,
    GPUS,
    HIDDEN,
    IN_BACKWARD,
    METRIC,
    PART,
    PART_STEP,
    PEAK_MEMORY,
    RECOMPUTE,
    SCHEDULE,
    STEP_TIME,
    TIME,
    TP,
    VALUE,
    WORKLOAD,
    ZERO,
)
from extradeep.errors import InputError
from extradeep.layouts.explain import coefficient_table, formula_text
from extradeep.layouts.fit_steps import as_columns, forward_differences, part_residuals
from extradeep.layouts.forms import alternatives, check_forms, choose_forms
from extradeep.layouts.hardware import Hardware, load_hardware
from extradeep.layouts.interval import (
    DOUBLING_VARIANCE,
    TRANSFER_SPREAD,
    doublings_beyond,
    folds,
    half_widths,
    held_out_errors,
    model_parameters,
    weighted_quantile,
)
from extradeep.layouts.memory import MemoryModel, fit_reasons
from extradeep.layouts.parts import (
    COEFFICIENTS,
    NAMES,
    PRIOR,
    PRIOR_FIRMNESS,
    STEP_PARTS,
    compose,
    nominal_features,
)
from extradeep.layouts.space import layout_frame
from extradeep.layouts.tables import check_part_observations
from extradeep.processes import blas_single_threaded

CATEGORICAL = (ZERO, RECOMPUTE, SCHEDULE)  # layout choices whose effect only physics knows until observed
# parts that are off (0) unless ``optional`` names them: nested selection on vTrain did not choose
# them for most left-out models (docs/performance.md)
OPTIONAL = {"layer_overhead": 0.0}
CROSSING = ("tp", "dp")  # collectives whose crossing of nodes predictions flag when no observation's did
SUPPORT_SHARE = 0.05  # a coefficient is calibrated when it moves a step by >= 5% in >= 3 observations


class LayoutModel:
    """Step time of a GPT-like training under any parallel layout, from calibrated parts.

    Parameters: ``hardware`` (a :class:`Hardware`, a hardware file or GPU preset: the GPU and
    links the observations ran on), ``dp_overlap`` (share of the data-parallel synchronisation that
    runs under the backward pass: 0 for Megatron/DeepSpeed without gradient buckets), ``level`` of
    the intervals, ``interval`` ("cv" or None), ``balance_workloads`` (each workload weighs the same),
    ``prior_weight`` (pull towards the physical priors), ``memory`` (a :class:`MemoryModel`),
    ``workload_weights`` (workload -> relative weight of its rows, on top of the balance; e.g. less
    for small single-node runs whose regime a multi-node prediction shares only in part) and
    ``fixed`` (coefficient -> value held fixed instead of fitted, e.g. a measured NCCL latency, or 0
    to switch a part off), ``collective_algorithm`` (how collectives cross nodes: one of
    :data:`~extradeep.layouts.parts.COLLECTIVE_ALGORITHMS` or 'select', the best fit of them when an
    observed TP or DP collective crosses nodes, else hierarchical and assumed; fitted as
    ``algorithm_``, with ``algorithm_measured_`` False when assumed: the interval then spans the
    other forms), ``optional`` (names of
    :data:`OPTIONAL` parts to fit; off otherwise), ``grad_overlap`` (how ZeRO 0-1 reduce
    gradients: 'auto' (the default), as the per-part observations of profiled ZeRO 0-1 runs with
    d > 1 show it (reductions launched from the autograd thread: 'buckets'), else 'none' and
    assumed; 'none', after the backward pass; 'buckets', bucket by bucket during it; or 'select',
    the better fit, which proved unreliable; :mod:`extradeep.layouts.forms`)."""

    def __init__(
        self,
        hardware=None,
        dp_overlap: float = 0.0,
        level: float = 0.95,
        interval: str | None = "cv",
        balance_workloads: bool = True,
        prior_weight: float = 1e-4,
        memory: MemoryModel | None = None,
        cv_folds: int = 5,
        random_state: int = 0,
        workload_weights: dict | None = None,
        fixed: dict | None = None,
        collective_algorithm: str = "select",
        optional: tuple = (),
        grad_overlap: str = "auto",
    ):
        self.hardware = hardware
        self.dp_overlap = dp_overlap
        self.level = level
        self.interval = interval
        self.balance_workloads = balance_workloads
        self.prior_weight = prior_weight
        self.memory = memory
        self.cv_folds = cv_folds
        self.random_state = random_state
        self.workload_weights = workload_weights
        self.fixed = fixed
        self.collective_algorithm = collective_algorithm
        self.optional = optional
        self.grad_overlap = grad_overlap

    # ----------------------------------------------------------------- fitting
    @blas_single_threaded()
    def fit(self, observations: pd.DataFrame | None, parts: pd.DataFrame | None = None) -> LayoutModel:
        """Calibrate on measured step times (a layout frame with ``step_time``, e.g. from
        :func:`extradeep.layouts.tables.read_layout_table`) and/or per-part observations (the tidy
        frame of :func:`extradeep.layouts.tables.check_part_observations`). With neither, the
        coefficients stay at their physical priors and every part is labelled 'prior'."""
        if not 0 <= self.dp_overlap <= 1:
            raise InputError(None, f"must be between 0 and 1, got {self.dp_overlap!r}", field="dp_overlap")
        self._check_fixed()
        check_forms(self)
        self.hardware_ = load_hardware(self.hardware)
        steps, part_rows, memory_rows, shares = self._observations(observations, parts)
        calibrated = len(steps) or len(part_rows)
        self.forms_, self.forms_measured_, solved = choose_forms(self, steps, part_rows, shares)
        self.algorithm_, self.grad_overlap_ = self.forms_["algorithm"], self.forms_["grad_overlap"]
        self.algorithm_measured_ = self.forms_measured_["algorithm"]
        if solved is None and calibrated:
            solved = self._solve(steps, part_rows)[0]
        self.coef_ = pd.Series(solved if calibrated else self._start(), index=list(NAMES))
        self.memory_ = MemoryModel() if self.memory is None else self.memory
        self.memory_calibrated_ = bool(len(memory_rows))
        if len(memory_rows):
            self.memory_ = MemoryModel(**{**vars(self.memory_)}).fit(memory_rows, memory_rows[VALUE])
        self.observations_ = steps
        self.parts_observed_ = sorted(set(part_rows[PART])) if len(part_rows) else []
        self.support_ = self._support(steps, part_rows)
        self.range_ = {c: (float(steps[c].min()), float(steps[c].max())) for c in (GPUS, TP)} if len(steps) else {}
        seen = pd.concat([steps, part_rows], ignore_index=True)
        self.scale_ = (float(seen[GPUS].max()), float(model_parameters(seen).max())) if len(seen) else None
        # the narrowest GEMMs observed (hidden / t): thinner ones lean on thin_width's extrapolation
        self.narrowest_ = float((seen[HIDDEN] / seen[TP]).min()) if len(seen) else None
        self.seen_ = {c: set(seen[c]) for c in CATEGORICAL if c in seen}
        self.crossed_ = self._crossed(steps, part_rows)
        self._fit_interval(steps, part_rows)
        return self

    def _observations(self, observations, parts):
        steps = pd.DataFrame()
        if observations is not None and len(observations):
            if STEP_TIME not in observations:
                raise InputError("observations", f"no {STEP_TIME} column (seconds per step)")
            steps = layout_frame(observations, source="observations").reset_index(drop=True)
        part_rows = memory_rows = shares = pd.DataFrame()
        if parts is not None and len(parts):
            checked = check_part_observations(parts).reset_index(drop=True)
            memory_rows = checked[checked[PART] == "memory"].reset_index(drop=True)
            shares = checked[checked[METRIC] == IN_BACKWARD].reset_index(drop=True)
            timed = checked[(checked[PART] != "memory") & (checked[METRIC] == TIME)]
            part_rows = timed[timed[PART] != "step"].reset_index(drop=True)
            totals = timed[timed[PART] == "step"].rename(columns={VALUE: STEP_TIME})
            steps = pd.concat([steps, totals.drop(columns=[PART, METRIC])], ignore_index=True)
        if len(steps) and not (np.isfinite(steps[STEP_TIME]) & (steps[STEP_TIME] > 0)).all():
            raise InputError("observations", "step times must be finite and > 0 seconds")
        return steps, part_rows, memory_rows, shares

    def _crossed(self, steps: pd.DataFrame, part_rows: pd.DataFrame) -> set[str]:
        """The collectives ('tp', 'dp') whose group spanned nodes in some observation."""
        crossed = set()
        for rows in (steps, part_rows):
            if len(rows):
                spans = self._spans(rows)
                crossed |= {kind for kind in CROSSING if spans[kind].any()}
        return crossed

    def _spans(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """Per layout, whether its TP and its DP groups span nodes (ranks ordered tp, dp, pp: a
        pipeline over nodes, and its tied embeddings' reduction, leave both inside one)."""
        g = self.hardware_.system.gpus_per_node
        t, d = frame[TP].to_numpy(float), frame[DP].to_numpy(float)
        return {"tp": t > g, "dp": (d > 1) & (t * d > g)}

    def _features(self, frame: pd.DataFrame, hardware: Hardware | None = None) -> dict:
        hardware = self.hardware_ if hardware is None else hardware
        return nominal_features(frame, hardware, self.algorithm_, self.grad_overlap_ == "buckets")

    def _held(self) -> dict:
        """Coefficients held instead of fitted: ``fixed``, and the optional parts not asked for at 0."""
        off = {name: value for name, value in OPTIONAL.items() if name not in self.optional}
        return {**off, **(self.fixed or {})}

    def _check_fixed(self) -> None:
        unknown = sorted(set(self.optional) - set(OPTIONAL))
        if unknown:
            raise InputError(
                None, f"unknown optional part(s) {', '.join(unknown)}; one of {', '.join(OPTIONAL)}", field="optional"
            )
        for name, value in (self.fixed or {}).items():
            if name not in NAMES:
                raise InputError(None, f"unknown coefficient {name!r}; one of {', '.join(NAMES)}", field="fixed")
            if not (np.isfinite(value) and value >= 0):
                raise InputError(None, f"{name} must be a finite number >= 0, got {value!r}", field="fixed")

    def _start(self) -> np.ndarray:
        """The priors, with the fixed coefficients at their values."""
        start = PRIOR.copy()
        for name, value in self._held().items():
            start[NAMES.index(name)] = float(value)
        return start

    def _weights(self, steps: pd.DataFrame) -> np.ndarray:
        """Per step row: equal total weight per workload (when balanced), times ``workload_weights``;
        scaled to sum to the number of rows."""
        if not len(steps):
            return np.zeros(0)
        if WORKLOAD not in steps:
            return np.ones(len(steps))
        weights = np.ones(len(steps))
        if self.balance_workloads:
            counts = steps[WORKLOAD].map(steps[WORKLOAD].value_counts()).to_numpy(float)
            weights = 1.0 / counts
        if self.workload_weights:
            weights = weights * steps[WORKLOAD].map(self.workload_weights).fillna(1.0).to_numpy(float)
        return weights * len(steps) / weights.sum()

    def _solve(self, steps: pd.DataFrame, part_rows: pd.DataFrame, algorithm=None, grad_overlap=None):
        """(coefficients, the robust loss at them) in the given forms (default: the fitted ones)."""
        form = (algorithm or self.algorithm_, (grad_overlap or self.grad_overlap_) == "buckets")
        hardware = self.hardware_
        step_features = nominal_features(steps, hardware, *form) if len(steps) else None
        part_features = nominal_features(part_rows, hardware, *form) if len(part_rows) else None
        measured = np.log(steps[STEP_TIME].to_numpy(float)) if len(steps) else None
        root_weights = np.sqrt(self._weights(steps))
        free = np.array([name not in self._held() for name in NAMES])
        low = np.log([c.low for c in COEFFICIENTS])[free]
        high = np.log([c.high for c in COEFFICIENTS])[free]
        prior = np.log(PRIOR)[free]
        pull = np.sqrt(self.prior_weight * max(len(steps) + len(part_rows), 1))
        firmness = np.sqrt(PRIOR_FIRMNESS[free])
        full = self._start()
        residuals_of_parts = part_residuals(part_rows) if len(part_rows) else None
        step_columns, part_columns = as_columns(step_features), as_columns(part_features)

        def residual_columns(log_coefs):
            """(residuals, q) at q points (k, q) at once: a Jacobian's trial points cost about one."""
            coef = np.repeat(full[:, None], log_coefs.shape[1], axis=1)
            coef[free] = np.exp(log_coefs)
            blocks = [pull * firmness[:, None] * (log_coefs - prior[:, None])]
            if step_columns is not None:
                step = compose(step_columns, coef, self.dp_overlap)[PART_STEP]
                blocks.append(root_weights[:, None] * (np.log(step) - measured[:, None]))
            if residuals_of_parts is not None:
                blocks.append(residuals_of_parts(part_columns, coef, self.dp_overlap))
            return np.concatenate(blocks)

        start = np.clip(prior, low + 1e-9, high - 1e-9)
        solution = least_squares(
            lambda x: residual_columns(x[:, None])[:, 0],
            start,
            jac=lambda x: forward_differences(residual_columns, x, low, high),
            bounds=(low, high),
            loss="soft_l1",
            f_scale=0.05,
            x_scale=1.0,
        )
        full[free] = np.exp(solution.x)
        return full, float(solution.cost)

    def _support(self, steps: pd.DataFrame, part_rows: pd.DataFrame) -> pd.Series:
        """Per coefficient: 'parts' when measured parts pin it, 'step totals' when it moves >= 5%
        of >= 3 measured steps, 'fixed' when held at a given value, 'off' for an optional part not asked
        for, else 'prior' (physics only: an
        extrapolation)."""
        source = pd.Series("prior", index=list(NAMES))
        if len(steps):
            shares = self._elasticities(self._features(steps))
            source[(np.abs(shares) >= SUPPORT_SHARE).sum(axis=0) >= 3] = "step totals"
        moved = self._moved(steps, part_rows)
        for c in COEFFICIENTS:
            if c.part in self.parts_observed_ and moved[c.name]:
                source[c.name] = "parts"
        for name in self._held():
            source[name] = "fixed" if name in (self.fixed or {}) else "off"
        return source

    def _moved(self, steps: pd.DataFrame, part_rows: pd.DataFrame) -> pd.Series:
        """Per coefficient, whether it moves some observed layout's step at all: a measured part
        does not pin a term that none of the observed layouts has (the unfused softmax when every run
        fuses it, t = 8's links without a t = 8 run)."""
        rows = pd.concat([steps, part_rows], ignore_index=True) if len(part_rows) else steps
        if not len(rows):
            return pd.Series(False, index=list(NAMES))
        shares = self._elasticities(self._features(rows))
        return pd.Series((np.abs(shares) > 1e-6).any(axis=0), index=list(NAMES))

    def _elasticities(self, features, which=None) -> np.ndarray:
        """(n, k) d log(step) / d log(coefficient) at the fitted coefficients (``which``: their indices)."""
        which = range(len(NAMES)) if which is None else which
        base = np.log(compose(features, self.coef_.to_numpy(), self.dp_overlap)[PART_STEP])
        out = np.empty((len(base), len(which)))
        for k, j in enumerate(which):
            coef = self.coef_.to_numpy().copy()
            coef[j] *= np.exp(0.01)
            out[:, k] = (np.log(compose(features, coef, self.dp_overlap)[PART_STEP]) - base) / 0.01
        return out

    def _fit_interval(self, steps: pd.DataFrame, part_rows: pd.DataFrame) -> None:
        """Held-out log errors per workload (or fold) and the refitted coefficients (`interval`)."""
        self.fold_coefs_, self.cv_errors_ = [], pd.DataFrame(columns=[WORKLOAD, "log_error"])
        self.half_width_ = np.nan
        if self.interval is None or len(steps) < 4:
            return
        self.fold_coefs_, errors = held_out_errors(
            steps,
            part_rows,
            folds(steps, self.cv_folds, self.random_state),
            lambda rest, kept_parts: self._solve(rest, kept_parts)[0],
            lambda held, coef: compose(self._features(held), coef, self.dp_overlap)[PART_STEP],
        )
        if errors:
            self.cv_errors_ = pd.concat(errors, ignore_index=True)
            self.half_width_ = weighted_quantile(self.cv_errors_, self.level)

    # -------------------------------------------------------------- prediction
    def predict(self, layouts: pd.DataFrame, hardware=None) -> pd.DataFrame:
        """Per layout: ``step_time`` (s) with ``step_time_low``/``step_time_high`` at ``level``, the
        parts (seconds per step; they sum to step_time), peak memory per GPU and whether it fits,
        ``estimate`` (True on hardware other than the calibration's) and ``extrapolated`` (which
        coefficients the prediction leans on without calibration)."""
        self._check_fitted()
        target = self.hardware_ if hardware is None else load_hardware(hardware)
        frame = layout_frame(layouts, source="layouts")
        features = self._features(frame, target)
        parts = compose(features, self.coef_.to_numpy(), self.dp_overlap)
        out = pd.DataFrame({STEP_TIME: parts[PART_STEP], **{p: parts[p] for p in STEP_PARTS}}, index=frame.index)
        estimate = _differs(target, self.hardware_)
        low, high = self._bounds(features, frame, parts[PART_STEP], estimate, target)
        out[STEP_TIME + "_low"], out[STEP_TIME + "_high"] = low, high
        memory = self.memory_.parts(frame)
        out[PEAK_MEMORY] = memory["peak"].to_numpy()
        out[FITS], out["reason"] = fit_reasons(out[PEAK_MEMORY], target.gpu.memory)
        out["estimate"] = estimate
        out["extrapolated"] = self._extrapolated(frame, features)
        return out

    def _bounds(self, features, frame: pd.DataFrame, step, estimate: bool, target: Hardware):
        gpus = frame[GPUS].to_numpy(float)
        beyond = doublings_beyond(self.scale_, frame)
        width = half_widths(self.cv_errors_, gpus, self.level) * np.sqrt(1 + DOUBLING_VARIANCE * beyond)
        if estimate:
            width = np.hypot(width, TRANSFER_SPREAD * 1.96)
        low, high = step * np.exp(-width), step * np.exp(width)
        for coef in self.fold_coefs_:
            other = compose(features, coef, self.dp_overlap)[PART_STEP]
            low, high = np.minimum(low, other), np.maximum(high, other)
        for form in alternatives(self):  # a form nothing observed could tell: the interval spans the others
            alt = nominal_features(frame, target, form["algorithm"], form["grad_overlap"] == "buckets")
            other = compose(alt, self.coef_.to_numpy(), self.dp_overlap)
            low, high = np.minimum(low, other[PART_STEP]), np.maximum(high, other[PART_STEP])
        return low, high

    def _extrapolated(self, frame: pd.DataFrame, features) -> np.ndarray:
        """Per layout, the uncalibrated coefficients that move its step by >= 5%, 'gpus' beyond the
        largest calibrated count, 'h/t=128' for GEMMs narrower than any observed, 'dp across nodes'
        ('tp ...') where its data- (tensor-) parallel collectives cross nodes and no observation's
        did, 'algorithm assumed' where they cross nodes and the observed ones could not tell how
        collectives cross (one group shape across nodes), and each ZeRO stage, recomputation or
        schedule that no observation used (comma-separated; empty when everything is backed by data)."""
        prior = [j for j, name in enumerate(NAMES) if self.support_[name] == "prior"]
        pieces = []
        if prior:
            shares = self._elasticities(features, prior)
            pieces += [np.where(np.abs(shares[:, k]) >= SUPPORT_SHARE, NAMES[j], "") for k, j in enumerate(prior)]
        if self.range_:
            pieces.append(np.where(frame[GPUS].to_numpy() > self.range_[GPUS][1], "gpus", ""))
        if self.narrowest_ is not None:
            width = frame[HIDDEN].to_numpy(float) / frame[TP].to_numpy(float)
            pieces.append(np.where(width < self.narrowest_, [f"h/t={w:g}" for w in width], ""))
        spans = self._spans(frame)
        flagged = np.zeros(len(frame), bool)
        for kind in CROSSING:  # no observed collective of this kind crossed nodes: the network's share is physics
            if kind not in self.crossed_:
                pieces.append(np.where(spans[kind], f"{kind} across nodes", ""))
                flagged |= spans[kind]
        if not self.algorithm_measured_:  # collectives crossed nodes one way only: how they cross is assumed
            crossing = np.logical_or.reduce([spans[kind] for kind in CROSSING])
            pieces.append(np.where(crossing & ~flagged, "algorithm assumed", ""))
        for column, seen in self.seen_.items():
            unseen = ~frame[column].isin(seen).to_numpy()
            pieces.append(np.where(unseen, column + "=" + frame[column].astype(str).to_numpy(object), ""))
        if not pieces:
            return np.full(len(frame), "", dtype=object)
        return np.array([",".join(p for p in row if p) for row in zip(*pieces)], dtype=object)

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise InputError(None, "the layout model is not fitted; call fit() first", field="model")

    # ------------------------------------------------------------ explanations
    def formula(self, digits: int = 3) -> str:
        """The composed step formula with the fitted coefficients, one part per line."""
        self._check_fitted()
        return formula_text(self, digits)

    def part_status(self) -> pd.DataFrame:
        """One row per coefficient: its value, prior, the part it belongs to, what calibrated it
        ('parts', 'step totals', 'fixed', 'off' or 'prior': physics only, extrapolated) and what it means."""
        self._check_fitted()
        return coefficient_table(self)


def _differs(target: Hardware, calibrated: Hardware) -> bool:
    return target.gpu != calibrated.gpu or target.system.to_dict() != calibrated.system.to_dict()
