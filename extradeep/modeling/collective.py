"""Alpha-beta models of one collective that know where a ring or tree first spans nodes.

A collective's pure time per step is linear in the latency and inverse bandwidth of each link class
once the algorithm's step and volume counts are known (:func:`extradeep.system.cost_features`):

    T(p) = a_intra n_intra(p) + b_intra v_intra(p) + a_inter n_inter(p) + b_inter v_inter(p).

The message size is the same at every point (the model's gradients), so b absorbs it: two or three
points per regime calibrate a and b by non-negative least squares, one regime at a time, and the
algorithm (ring, tree, hierarchical) is the one with the lowest leave-one-out error. When every
measured point lies inside one node, the inter-node pair comes from a system file: its latency, and
b_intra times the ratio of the intra- to the inter-node bandwidth per GPU. Without one the model
cannot know the network: ``supported_upto`` says up to how many ranks it is backed by data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from extradeep.system import ALGORITHMS, System, cost_features

INTRA, INTER = [0, 1], [2, 3]
# Without network data, how much slower than the node's links the network may be (latency, inverse
# bandwidth per GPU): NVSwitch's ~230 GB/s against 12.5 GB/s per GPU when 8 GPUs share one NIC each
# of 100 Gb/s is 18x. The upper end of an unsupported prediction's interval assumes this.
UNKNOWN_NETWORK = np.array([3.0, 20.0])


@dataclass
class CollectiveModel:
    """Pure time per step of one collective from calibrated latencies and inverse bandwidths per
    link class (``coef``: alpha_intra, beta_intra, alpha_inter, beta_inter, with the message size in
    the betas). Same interface as :class:`extradeep.modeling.Model`."""

    collective: str
    algorithm: str
    gpus_per_node: int
    coef: np.ndarray
    points: np.ndarray
    values: np.ndarray
    folds: list = field(default_factory=list)  # coefficient sets without one point each (jackknife)
    cv_smape: float = float("nan")
    smape: float = float("nan")
    inter_source: str = "measured"  # measured | system | none
    param: str = "ranks"

    def _features(self, X) -> np.ndarray:
        return cost_features(self.collective, self.algorithm, np.asarray(X, float).reshape(-1), 1.0, self.gpus_per_node)

    def predict(self, X):
        value = self._features(X) @ self.coef
        return float(value[0]) if np.ndim(X) == 0 else value

    def interval(self, X, level: float = 0.95):
        """The spread of the leave-one-out calibrations around the prediction, plus the relative
        leave-one-out error on both sides; never below zero."""
        feats = self._features(X)
        pred = feats @ self.coef
        spread = np.stack([feats @ c for c in self.folds]) if self.folds else pred[None, :]
        rel = np.nan_to_num(self.cv_smape, nan=0.0) / 100 * (2.0 if level >= 0.95 else 1.0)
        lo = np.maximum(np.minimum(spread.min(axis=0), pred) * (1 - rel), 0.0)
        hi = np.maximum(spread.max(axis=0), pred) * (1 + rel)
        if self.inter_source == "none":  # beyond the node nothing is known: allow a slow network
            slow = self.coef.copy()
            slow[INTER] = self.coef[INTRA] * UNKNOWN_NETWORK
            hi = np.maximum(hi, feats @ slow * (1 + rel))
        return (float(lo[0]), float(hi[0])) if np.ndim(X) == 0 else (lo, hi)

    @property
    def supported_upto(self) -> float:
        """Largest rank count the calibration is backed by: inf once it has inter-node data or a
        system file, else one node."""
        return np.inf if self.inter_source != "none" else float(self.gpus_per_node)

    def formula(self, names: dict | None = None, digits: int = 3) -> str:
        p = (names or {}).get(self.param, "p")
        a_i, b_i, a_e, b_e = (f"{v:.{digits}g}" for v in self.coef)
        within = f"{a_i}*n_intra({p}) + {b_i}*v_intra({p})"
        across = f"{a_e}*n_inter({p}) + {b_e}*v_inter({p})" + (
            " [system file]"
            if self.inter_source == "system"
            else " [unknown network]"
            if self.inter_source == "none"
            else ""
        )
        return f"{self.algorithm} {self.collective}, {self.gpus_per_node} GPUs/node: {within} + {across}"

    def __str__(self) -> str:
        return self.formula()

    def growth_key(self):
        if self.algorithm == "ring" and (self.coef[0] > 0 or self.coef[2] > 0):
            return (1.0, 0.0)
        return (0.0, 1.0) if self.coef[0] > 0 or self.coef[2] > 0 else (0.0, 0.0)

    def growth(self, names: dict | None = None) -> str:
        p = (names or {}).get(self.param, "p")
        return {(1.0, 0.0): f"O({p})", (0.0, 1.0): f"O(log {p})"}.get(self.growth_key(), "O(1)")

    def to_dict(self) -> dict:
        return {
            "type": "collective alpha-beta",
            "collective": self.collective,
            "algorithm": self.algorithm,
            "gpus_per_node": int(self.gpus_per_node),
            "coef": [float(v) for v in self.coef],
            "points": [float(v) for v in self.points],
            "values": [float(v) for v in self.values],
            "folds": [[float(v) for v in c] for c in self.folds],
            "cv_smape": float(self.cv_smape),
            "smape": float(self.smape),
            "inter_source": self.inter_source,
            "param": self.param,
        }

    @classmethod
    def from_dict(cls, data: dict) -> CollectiveModel:
        return cls(
            data["collective"],
            data["algorithm"],
            int(data["gpus_per_node"]),
            np.asarray(data["coef"], float),
            np.asarray(data["points"], float),
            np.asarray(data["values"], float),
            [np.asarray(c, float) for c in data.get("folds", [])],
            float(data["cv_smape"]),
            float(data["smape"]),
            data.get("inter_source", "measured"),
            data.get("param", "ranks"),
        )


def fit_collective(
    ranks,
    values,
    collective: str,
    gpus_per_node: int,
    system: System | None = None,
    algorithms=ALGORITHMS,
    param: str = "ranks",
) -> CollectiveModel | None:
    """The alpha-beta model of the best algorithm by leave-one-out error; None with fewer than 3
    points or when no algorithm fits."""
    x, y = np.asarray(ranks, float), np.asarray(values, float)
    if len(x) < 3 or not np.all(np.isfinite(y)):
        return None
    best = None
    for algorithm in algorithms:
        coef, source = _calibrate(x, y, collective, algorithm, gpus_per_node, system)
        if coef is None:
            continue
        folds, errors = [], []
        full = _regime_counts(x, collective, algorithm, gpus_per_node)
        for k in range(len(x)):
            keep = np.arange(len(x)) != k
            fold = _regime_counts(x[keep], collective, algorithm, gpus_per_node)
            # a fold that leaves a regime with one point cannot calibrate it: it tests nothing
            if any(f < 2 <= n for f, n in zip(fold, full)):
                continue
            c, _ = _calibrate(x[keep], y[keep], collective, algorithm, gpus_per_node, system)
            if c is None:
                continue
            folds.append(c)
            guess = cost_features(collective, algorithm, x[k : k + 1], 1.0, gpus_per_node) @ c
            errors.append(_smape(y[k], guess[0]))
        model = CollectiveModel(
            collective, algorithm, gpus_per_node, coef, x, y, folds, np.nan, inter_source=source, param=param
        )
        model.smape = float(np.mean([_smape(a, b) for a, b in zip(y, model.predict(x))]))
        model.cv_smape = float(np.mean(errors)) if errors else model.smape
        if best is None or model.cv_smape < best.cv_smape - 1e-9:
            best = model
    return best


def _regime_counts(x, collective, algorithm, gpus_per_node) -> tuple[int, int]:
    """Points inside one node and points spanning nodes."""
    feats = cost_features(collective, algorithm, x, 1.0, gpus_per_node)
    inter = feats[:, INTER].any(axis=1)
    return int((~inter & feats[:, INTRA].any(axis=1)).sum()), int(inter.sum())


def _calibrate(x, y, collective, algorithm, gpus_per_node, system):
    """(coef, inter source): NNLS per identifiable link class; the inter-node pair from the system
    file when no point spans nodes (None when neither). None when a class has too few points."""
    from scipy.optimize import nnls  # here, not at import: scipy.optimize costs a CLI start ~0.2 s

    feats = cost_features(collective, algorithm, x, 1.0, gpus_per_node)
    coef = np.zeros(4)
    used_intra = feats[:, INTRA].any(axis=1) & ~feats[:, INTER].any(axis=1)
    used_inter = feats[:, INTER].any(axis=1)
    if used_inter.sum() == 0:
        if used_intra.sum() < 2:
            return None, "none"
        coef[INTRA] = nnls(feats[:, INTRA], y)[0]
        if system is not None and system.has_links:
            ratio = system.intra_bandwidth / system.inter_bandwidth_per_gpu
            coef[INTER] = [system.inter_latency, coef[1] * ratio]
            return coef, "system"
        coef[INTER] = coef[INTRA]  # no network data: the intra-node pair stands in (unsupported beyond)
        return coef, "none"
    if used_intra.sum() >= 2:
        coef[INTRA] = nnls(feats[used_intra][:, INTRA], y[used_intra])[0]
    if used_inter.sum() < 2 and not (algorithm == "hierarchical" and used_inter.sum() >= 1):
        return None, "measured"
    # the inter-node points also pay the intra-node part of a hierarchical algorithm
    rest = y[used_inter] - feats[used_inter][:, INTRA] @ coef[INTRA]
    coef[INTER] = nnls(feats[used_inter][:, INTER], rest)[0]
    if used_intra.sum() < 2:
        coef[INTRA] = coef[INTER]
    return coef, "measured"


def _smape(actual, guess) -> float:
    total = abs(actual) + abs(guess)
    return 0.0 if total == 0 else float(200 * abs(actual - guess) / total)
