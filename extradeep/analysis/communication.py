"""Communication per step as the sum of each collective's pure duration plus the wait for the slowest rank.

A collective kernel on one rank lasts from that rank's arrival until every rank has arrived and the
transfer is done, so its measured time is the pure transfer time plus a wait for the slowest rank.
The rank that arrives last waits for nobody: the minimum over ranks (``rank_min`` of the
aggregated data) is the pure duration. Pure durations follow each collective's own law (an
all-reduce grows like p log p, an all-gather like p), while the waits are noise of the compute
before the collective. One PMNF of their category sum mixes both and extrapolates low (waits that
do not grow dilute the growth the modeler sees); so the communication of the step composition is

    C = sum over collectives k of PMNF_k(pure duration of k) + W,

with W the median measured wait per step (C - sum of pure durations), kept constant: it comes from
compute jitter, which does not grow with the collectives' size. docs/analysis.md, "Time per step as
a composition", has the figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.aggregate.settings import ExperimentSettings
from extradeep.columns import CATEGORY, METRIC, PART, PHASE, PURE, REGION, REP, VALUE
from extradeep.system import System, collective_kind, expected_max_normal

PURE_PREFIX = "pure:"  # prefix of the per-collective parts in the batched fit of the step composition


@dataclass
class CommunicationSum:
    """Communication time per step: per-collective PMNF models of the pure duration plus a constant
    wait for the slowest rank. Same interface as :class:`extradeep.modeling.Model` for the parts
    the step composition uses (predict, interval, points, formula, growth, serialisation)."""

    kernels: dict  # region -> Model (PMNF) or CollectiveModel (alpha-beta) of its pure time per step
    wait: float  # wait for the slowest rank per step that does not grow with the ranks (s)
    straggler: float = 0.0  # s per unit of E[max of p standard normals]: the wait that grows with p
    choices: dict = field(default_factory=dict)  # region -> why its model was chosen

    @property
    def points(self) -> np.ndarray:
        return np.asarray(next(iter(self.kernels.values())).points, float)

    def waits(self, X) -> np.ndarray:
        """The wait for the slowest rank: constant part plus the expected maximum of p draws."""
        extra = self.straggler * expected_max_normal(as_vector(X)) if self.straggler else 0.0
        return self.wait + extra

    def predict(self, X):
        value = sum(as_vector(m.predict(X)) for m in self.kernels.values()) + self.waits(X)
        return float(value[0]) if np.ndim(X) == 0 else value

    def interval(self, X, level: float = 0.95):
        # Each collective's band added up (their errors share the parameter, so they add, not cancel).
        bands = [tuple(as_vector(v) for v in m.interval(X, level=level)) for m in self.kernels.values()]
        lo = np.maximum(sum(b[0] for b in bands), 0.0) + self.waits(X)
        hi = sum(b[1] for b in bands) + self.waits(X)
        return (float(lo[0]), float(hi[0])) if np.ndim(X) == 0 else (lo, hi)

    @property
    def supported_upto(self) -> float:
        """Largest parameter value the collectives' calibrations are backed by (inf: no limit)."""
        return min((getattr(m, "supported_upto", np.inf) for m in self.kernels.values()), default=np.inf)

    def formula(self, names: dict | None = None, digits: int = 4) -> str:
        parts = [f"[{m.formula(names, digits)}]" for m in self.kernels.values()]
        wait = f"{self.wait:.{digits}g}" + (f" + {self.straggler:.{digits}g} * Emax(p)" if self.straggler else "")
        return " + ".join(parts + [wait])

    def _lead(self):
        return max(self.kernels.values(), key=lambda m: m.growth_key())

    def growth(self, names: dict | None = None) -> str:
        return self._lead().growth(names)

    def growth_key(self):
        return self._lead().growth_key()

    def __str__(self) -> str:
        return self.formula()

    def to_dict(self) -> dict:
        return {
            "type": "communication sum",
            "wait": float(self.wait),
            "straggler": float(self.straggler),
            "choices": dict(self.choices),
            "kernels": {name: m.to_dict() for name, m in self.kernels.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> CommunicationSum:
        return cls(
            {name: _load_part(m) for name, m in data["kernels"].items()},
            float(data["wait"]),
            float(data.get("straggler", 0.0)),
            dict(data.get("choices", {})),
        )


def _load_part(data: dict):
    from extradeep.modeling import Model
    from extradeep.modeling.collective import CollectiveModel

    return CollectiveModel.from_dict(data) if data.get("type") == "collective alpha-beta" else Model.from_dict(data)


@dataclass(frozen=True)
class Topology:
    """What the communication models know of the cluster: GPUs per node (from the exports or a
    system file), the system's links when a file gives them, and the measured rank counts."""

    gpus_per_node: int
    system: System | None
    measured: tuple

    @property
    def one_node(self) -> bool:
        return max(self.measured, default=0) <= self.gpus_per_node

    @classmethod
    def from_settings(cls, settings: ExperimentSettings, measured) -> Topology | None:
        """From an Experiment's settings (its layout and system); None when there is no
        layout with more than one GPU per node (nothing to model: every rank its own node, or
        unknown), so communication is modeled as before."""
        gpus = node_layout(settings).get("gpus_per_node")
        if gpus is None:
            return None
        return cls(gpus, System.from_dict(settings.system), tuple(sorted(float(v) for v in measured)))


def node_layout(settings: ExperimentSettings) -> dict:
    """{"gpus_per_node", "source", "system"} the answers use: GPUs per node from the profiles' most
    trusted node signal, else the system file (:func:`extradeep.io.placement.resolve_layout`),
    and the system file's description (None without one). No "gpus_per_node" when no layout with
    more than one GPU per node is known (every rank its own node, or unknown): then there are no
    node boundaries to model or to draw."""
    from extradeep.io.placement import resolve_layout

    system = settings.system or {}
    resolved = resolve_layout(settings.layout, system)
    gpus = resolved["gpus_per_node"]
    known = {"gpus_per_node": int(gpus), "source": resolved["source"]} if gpus and gpus >= 2 else {}
    return {**known, "system": system or None}


def nodes_spanned(ranks, gpus_per_node: int | None) -> np.ndarray:
    """Nodes a run of ``ranks`` ranks (one GPU each) fills on nodes of ``gpus_per_node`` GPUs; NaN
    without a layout."""
    ranks = np.asarray(ranks, float)
    return np.ceil(ranks / gpus_per_node) if gpus_per_node else np.full_like(ranks, np.nan)


def load_comm_model(data: dict):
    """A saved communication model: a :class:`CommunicationSum` or a plain PMNF model."""
    return CommunicationSum.from_dict(data) if data.get("type") == "communication sum" else _load_part(data)


def as_vector(value) -> np.ndarray:
    """A model value (scalar or array) as a flat float array."""
    return np.asarray(value, dtype=float).reshape(-1)


def pure_times(values: pd.DataFrame, params: list[str], phase: str = "train") -> pd.DataFrame:
    """Per communication region and point of ``phase``: the pure duration per step, the minimum
    over ranks and repetitions (one row per point, rep 1). Waits only ever add to a collective's
    time, so the lowest observation is the least contaminated one (a rank's per-step median still
    holds waits from steps in which it was not the last to arrive). Empty when the data keep no
    per-rank spread."""
    columns = ["region", *params, "rep", "pure"]
    if values is None or "rank_min" not in values.columns:
        return pd.DataFrame(columns=columns)
    rows = values[(values[CATEGORY] == "communication") & (values[METRIC] == "time") & (values[PHASE] == phase)].dropna(
        subset=["rank_min"]
    )
    lowest = rows.groupby([REGION, *params], as_index=False)["rank_min"].min()
    return lowest.rename(columns={"rank_min": PURE}).assign(rep=1)[columns]


def pure_long(pure: pd.DataFrame, parts: pd.DataFrame, params: list[str]) -> pd.DataFrame:
    """The pure durations as rows (part "pure:<region>") to fit beside S, B and C. Empty when a
    collective is missing at a measured point (its sum would silently drop it there)."""
    empty = pd.DataFrame(columns=[*params, REP, PART, VALUE])
    if pure.empty:
        return empty
    measured = parts[params].drop_duplicates().shape[0]
    if (pure.groupby(REGION)[params].nunique().min(axis=1) < measured).any():
        return empty
    return pure.assign(part=PURE_PREFIX + pure[REGION], value=pure[PURE])[[*params, REP, PART, VALUE]]


def communication_sum(
    models: dict, parts: pd.DataFrame, pure: pd.DataFrame, params: list[str], topology: Topology | None = None
):
    """A :class:`CommunicationSum` from the fitted ``pure:`` parts of ``models``, the wait taken
    from the points those parts were fitted on; None without pure parts or when one has no model.
    With a ``topology`` each collective's alpha-beta model competes with its PMNF
    (:func:`choose_collective_model`)."""
    kernels = {k[len(PURE_PREFIX) :]: m for k, m in models.items() if k.startswith(PURE_PREFIX)}
    if not kernels or any(m is None for m in kernels.values()):
        return None
    used = pure[pure[params[0]].isin(np.asarray(next(iter(kernels.values())).points, float).reshape(-1))]
    choices = {}
    if topology is not None and len(params) == 1:
        for region, pmnf in list(kernels.items()):
            rows = used[used[REGION] == region].sort_values(params[0])
            kernels[region], choices[region] = choose_collective_model(
                region, pmnf, rows[params[0]].to_numpy(float), rows[PURE].to_numpy(float), topology, params[0]
            )
    total = used.groupby([*params, REP])[PURE].sum()
    comm = parts.set_index([*params, REP])["C"]
    wait = (comm - total).dropna().groupby(level=params).median()
    if not len(wait):
        return CommunicationSum(kernels, 0.0, 0.0, choices)
    if topology is None:  # no layout: the constant wait as before (docs/analysis.md, Limits)
        return CommunicationSum(kernels, float(max(np.median(wait), 0.0)), 0.0, choices)
    constant, straggler, why = straggler_wait(wait.index.get_level_values(0).to_numpy(float), wait.to_numpy(float))
    choices["wait"] = why
    return CommunicationSum(kernels, constant, straggler, choices)


def choose_collective_model(region: str, pmnf, ranks: np.ndarray, pure: np.ndarray, topology: Topology, param: str):
    """(model, reason): the collective's alpha-beta model (:mod:`extradeep.modeling.collective`) or
    its PMNF, by leave-one-out SMAPE. The alpha-beta model knows the algorithm's rank dependence
    and where the ring leaves the node, which leave-one-out over the points cannot check, so the
    PMNF replaces it only when its error is lower by more than half of the alpha-beta model's and
    by more than 1 point."""
    from extradeep.modeling.collective import fit_collective

    kind = collective_kind(region)
    hybrid = (
        fit_collective(ranks, pure, kind, topology.gpus_per_node, topology.system, param=param)
        if kind is not None
        else None
    )
    if hybrid is None:
        return pmnf, "PMNF (no alpha-beta model: " + ("unknown collective" if kind is None else "too few points") + ")"
    pm, hy = float(getattr(pmnf, "cv_smape", np.nan)), hybrid.cv_smape
    if np.isfinite(pm) and pm < hy - max(hy / 2, 1.0):
        return pmnf, f"PMNF (leave-one-out {pm:.2g}% vs {hy:.2g}% for {hybrid.algorithm} alpha-beta)"
    return hybrid, (
        f"{hybrid.algorithm} alpha-beta, {topology.gpus_per_node} GPUs/node (leave-one-out {hy:.2g}% "
        f"vs {pm:.2g}% for PMNF; network from "
        + {
            "measured": "points across nodes",
            "system": "the system file",
            "none": "nowhere: unsupported beyond one node",
        }[hybrid.inter_source]
        + ")"
    )


def straggler_wait(ranks: np.ndarray, wait: np.ndarray) -> tuple[float, float, str]:
    """(constant, straggler, reason): the measured wait per step for the slowest rank as
    w0 + s * E[max of p standard normals] (the slowest of p ranks whose arrivals spread with
    standard deviation s) when that predicts the left-out points better than a constant; else the
    median (the spread does not show)."""
    from scipy.optimize import nnls  # here, not at import: scipy.optimize costs a CLI start ~0.2 s

    wait = np.maximum(wait, 0.0)
    constant = float(np.median(wait))
    if len(wait) < 3:
        return constant, 0.0, "constant (fewer than 3 points)"
    design = np.column_stack([np.ones_like(ranks), expected_max_normal(ranks)])
    err_const, err_max = [], []
    for k in range(len(wait)):
        keep = np.arange(len(wait)) != k
        err_const.append(abs(np.median(wait[keep]) - wait[k]))
        err_max.append(abs(design[k] @ nnls(design[keep], wait[keep])[0] - wait[k]))
    coef = nnls(design, wait)[0]
    if np.mean(err_max) < np.mean(err_const) and coef[1] > 0:
        return (
            float(coef[0]),
            float(coef[1]),
            (
                f"slowest of p: {coef[1]:.3g} s x E[max of p] (leave-one-out error "
                f"{np.mean(err_max):.3g} s vs {np.mean(err_const):.3g} s constant)"
            ),
        )
    return constant, 0.0, f"constant (leave-one-out error {np.mean(err_const):.3g} s vs {np.mean(err_max):.3g} s)"


def layout_notes(settings: ExperimentSettings, topology: Topology | None, comm=None) -> list[str]:
    """What the user must know about the cluster layout: where it came from, a warning when every
    measured point lies inside one node and no system file says what the network costs, and which
    model each collective got (``comm``: the fitted :class:`CommunicationSum`) and why."""
    from extradeep.analysis.layout_text import layout_text

    notes = layout_text(settings.layout, settings.system)
    if topology is not None and topology.one_node and not (topology.system and topology.system.has_links):
        notes.append(
            f"WARNING: every measured point lies inside one node ({topology.gpus_per_node} GPUs per node); "
            f"predictions beyond {topology.gpus_per_node} ranks cross the network, which these measurements "
            "cannot know: they are unsupported, and their intervals allow a network up to "
            "20x slower than the node's links. Give --system FILE (or a preset) to predict from its links"
        )
    for region, why in (getattr(comm, "choices", None) or {}).items():
        notes.append(f"communication model of {region}: {why}")
    return notes
