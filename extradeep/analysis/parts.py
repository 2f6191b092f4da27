"""The parts of the time per epoch (computation, communication, memory, idle) kept within the whole.

Each quantity is fitted on its own, so left alone the parts extrapolate past their whole: on the
sample profiles a PMNF of communication passed the epoch time at 128 ranks. Per step, by definition,

    S = idle + busy,   max(computation, communication, memory) <= busy <= gpu total,

where busy is the union of GPU activity and gpu total = computation + communication + memory (the
paper's Eq. 6). So parts that respect the whole satisfy

    idle + max(GPU parts) <= S <= idle + gpu total,

and overlap = gpu total + idle - S >= 0 is GPU time that ran beside other GPU work; the shares of
S then add up: computation + communication + memory + idle - overlap = 100%.

The parts are made to respect it in the composition, per phase:

1. With the step composition (training steps, one parameter; :mod:`extradeep.analysis.overlap`),
   communication is the composition's C, and computation, memory and idle share its B in
   proportion to their own models. Every overlap rule hides at most min(C, B - idle), so these parts
   satisfy the bounds by construction.
2. Otherwise (validation steps, several parameters, or the ``direct`` rule), each part is its own
   model. Where they fall short of S, the rest is idle: time that no GPU work explains is idle by
   definition. Where idle plus the largest GPU part exceed S, every part is scaled by
   S / (idle + largest): the part models disagree with the whole there, and :meth:`Breakdown.excess`
   says by how much, for a warning.

Per epoch, the parts are n_t x training + n_v x validation parts (Eq. 4), like the whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from extradeep.analysis.communication import as_vector
from extradeep.analysis.epoch import BREAKDOWN, EpochModel
from extradeep.columns import COMMUNICATION, COMPUTATION, MEMORY, OVERLAP, PART_IDLE

PARTS = (*BREAKDOWN, "idle")
GPU_TOTAL = "gpu total"
SCALE = "scale"  # per point: the factor the parts were scaled by to fit the whole (1: not at all)


@dataclass
class Breakdown:
    """The whole (the epoch- or step-time model) and each part's own fit; :meth:`split` gives parts
    that respect the whole. ``n_params``: how many parameters a point has."""

    whole: object | None
    raw: dict  # part -> its own fitted model (EpochModel with a dataset, else per step), or None
    n_params: int = 1
    _cache: tuple = field(default=(None, None), repr=False, compare=False)

    def split(self, X) -> dict[str, np.ndarray]:
        """Per point: every part, "gpu total", "overlap" and "scale", as arrays."""
        key = _key(X)
        if self._cache[0] != key:
            self._cache = (key, self._split(X))
        return self._cache[1]

    def _split(self, X) -> dict[str, np.ndarray]:
        phases = self._phases(X)
        n = len(as_vector(phases[0][2])) if phases else 1
        out = {name: np.zeros(n) for name in PARTS}
        scale, whole = np.ones(n), np.zeros(n)
        for model, phase, count in phases:
            if model is None and self.whole is not None:
                continue  # a phase the whole does not have (no validation steps measured) adds nothing
            raw = {name: _phase_model(self.raw.get(name), phase) for name in PARTS}
            parts, s, factor = phase_parts(model, raw, X, n)
            count = np.broadcast_to(as_vector(count), (n,))
            for name in PARTS:
                out[name] += count * parts[name]
            whole += count * s
            scale = np.where(count > 0, np.minimum(scale, factor), scale)
        out[GPU_TOTAL] = out[COMPUTATION] + out[COMMUNICATION] + out[MEMORY]
        out[OVERLAP] = (
            np.maximum(out[GPU_TOTAL] + out[PART_IDLE] - whole, 0.0) if self.whole is not None else 0.0 * whole
        )
        out[SCALE] = scale
        return out

    def _phases(self, X) -> list[tuple]:
        """(phase's whole model or None, phase name or None, its count per point) for each phase."""
        lead = self.whole if self.whole is not None else next((m for m in self.raw.values() if m is not None), None)
        if isinstance(lead, EpochModel):
            n_t, n_v = lead.steps(X)
            whole = self.whole
            return [
                (None if whole is None else whole.train, "train", n_t),
                (None if whole is None else whole.val, "val", n_v),
            ]
        return [(self.whole, None, np.ones(len(_points(X, self.n_params))))]

    def excess(self, X) -> np.ndarray:
        """How far (share of the whole) the parts' own models would have exceeded it, per point."""
        return 1.0 - self.split(X)[SCALE]

    def source(self, name: str):
        """The model a part's formula, growth and interval come from: communication is the step
        composition's C in training steps; the others are their own fits."""
        composition = _composition(self.whole)
        raw = self.raw.get(name)
        if name != "communication" or composition is None:
            return raw
        if isinstance(self.whole, EpochModel):
            return EpochModel(
                composition.comm, _phase_model(raw, "val"), self.whole.dataset, self.whole.params, self.whole.fixed
            )
        return composition.comm

    def to_dict(self) -> dict:
        return {
            "whole": None if self.whole is None else self.whole.to_dict(),
            "raw": {name: None if m is None else m.to_dict() for name, m in self.raw.items()},
            "n_params": int(self.n_params),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Breakdown:
        from extradeep.analysis.epoch import model_from_dict

        raw = {name: model_from_dict(m) for name, m in data["raw"].items()}
        return cls(model_from_dict(data["whole"]), raw, int(data.get("n_params", 1)))


def phase_parts(whole, raw: dict, X, n: int) -> tuple[dict, np.ndarray, np.ndarray]:
    """(parts, S, scale) of one phase at X: rule 1 with a step composition, else rule 2 (module doc)."""
    parts = {name: _value(raw.get(name), X, n) for name in PARTS}
    if whole is None:
        return parts, np.zeros(n), np.ones(n)
    s = np.maximum(_value(whole, X, n, clip=False), 0.0)
    composition = _composition(whole)
    if composition is not None:
        base = np.maximum(as_vector(composition.base.predict(X)), 0.0)
        rest = parts[COMPUTATION] + parts[MEMORY] + parts[PART_IDLE]
        share = np.divide(base, rest, out=np.zeros(n), where=rest > 0)
        for name in ("computation", "memory", "idle"):
            parts[name] = parts[name] * share
        parts[PART_IDLE] = np.where(rest > 0, parts[PART_IDLE], base)  # nothing else measured: B is idle
        parts[COMMUNICATION] = np.maximum(as_vector(composition.comm.predict(X)), 0.0)
    parts[PART_IDLE] = np.minimum(parts[PART_IDLE], s)
    gpu = parts[COMPUTATION] + parts[COMMUNICATION] + parts[MEMORY]
    parts[PART_IDLE] = np.maximum(parts[PART_IDLE], s - gpu)  # time no GPU work explains is idle
    largest = np.max([parts[p] for p in BREAKDOWN], axis=0)
    needed = parts[PART_IDLE] + largest
    scale = np.divide(s, needed, out=np.ones(n), where=needed > s * (1 + 1e-12))
    return {name: v * scale for name, v in parts.items()}, s, scale


@dataclass
class PartModel:
    """One part of a :class:`Breakdown` with the interface of :class:`extradeep.modeling.Model`:
    predict, interval (the relative interval of the part's own fit around its consistent value; gpu
    total adds its parts' bounds), formula, growth and serialisation. ``smape``: its error at the
    measured points."""

    name: str
    breakdown: Breakdown
    smape: float = float("nan")

    def _scalar(self, X) -> bool:
        return np.ndim(X) == 0 or (self.breakdown.n_params > 1 and np.ndim(X) == 1)

    def predict(self, X):
        value = self.breakdown.split(X)[self.name]
        return float(value[0]) if self._scalar(X) else value

    def interval(self, X, level: float = 0.95):
        names = BREAKDOWN if self.name == GPU_TOTAL else (self.name,)
        split = self.breakdown.split(X)
        lo, hi = np.zeros(len(split[SCALE])), np.zeros(len(split[SCALE]))
        for name in names:
            part_lo, part_hi = _relative_band(self.breakdown.source(name), X, split[name], level)
            lo, hi = lo + part_lo, hi + part_hi
        return (float(lo[0]), float(hi[0])) if self._scalar(X) else (lo, hi)

    def _lead(self):
        if self.name != GPU_TOTAL:
            return self.breakdown.source(self.name)
        fitted = [m for m in (self.breakdown.source(p) for p in BREAKDOWN) if m is not None]
        return max(fitted, key=lambda m: m.growth_key()) if fitted else None

    def formula(self, names: dict | None = None, digits: int = 4) -> str:
        if self.name == GPU_TOTAL:
            return " + ".join(BREAKDOWN)
        lead = self._lead()
        return "0" if lead is None else lead.formula(names, digits)

    def __str__(self) -> str:
        return self.formula()

    def growth(self, names: dict | None = None) -> str:
        lead = self._lead()
        return "O(1)" if lead is None else lead.growth(names)

    def growth_key(self):
        lead = self._lead()
        return (0.0, 0.0) if lead is None else lead.growth_key()

    def to_dict(self) -> dict:
        return {"type": "part", "name": self.name, "smape": float(self.smape), "breakdown": self.breakdown.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> PartModel:
        smape = data.get("smape")
        return cls(data["name"], Breakdown.from_dict(data["breakdown"]), float("nan") if smape is None else smape)


def part_models(whole, raw: dict, n_params: int) -> dict:
    """{part or "gpu total": PartModel} over one shared :class:`Breakdown`."""
    breakdown = Breakdown(whole, dict(raw), n_params)
    return {name: PartModel(name, breakdown) for name in (*PARTS, GPU_TOTAL)}


def _relative_band(model, X, value: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The model's interval relative to its own prediction, around ``value`` (none without a model)."""
    if model is None:
        return value, value
    own = as_vector(model.predict(X))
    lo, hi = (as_vector(v) for v in model.interval(X, level=level))
    positive = own > 0
    rel_lo = np.divide(lo, own, out=np.ones_like(own), where=positive)
    rel_hi = np.divide(hi, own, out=np.ones_like(own), where=positive)
    return np.maximum(value * rel_lo, 0.0), value * np.maximum(rel_hi, 1.0)


def _composition(model):
    """The step composition of a whole (per step, or in an epoch's training steps), if any."""
    from extradeep.analysis.overlap import StepComposition

    model = getattr(model, "train", model)
    return model if isinstance(model, StepComposition) else None


def _phase_model(model, phase: str | None):
    if model is None or phase is None or not isinstance(model, EpochModel):
        return model if phase in (None, "train") else None
    return getattr(model, phase)


def _value(model, X, n: int, clip: bool = True) -> np.ndarray:
    if model is None:
        return np.zeros(n)
    value = np.broadcast_to(as_vector(model.predict(X)), (n,)).astype(float)
    return np.maximum(value, 0.0) if clip else value


def _points(X, n_params: int) -> np.ndarray:
    return np.asarray(X, float).reshape(-1, n_params)


def _key(X) -> tuple:
    arr = np.ascontiguousarray(np.asarray(X, float))
    return (arr.shape, arr.tobytes())
