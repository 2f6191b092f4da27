"""Application values per epoch (paper section 2.3.2) and the models that predict them.

The primary "epoch time" is the measured NVTX step wall time: median step duration x n_t plus
validation step duration x n_v. It includes GPU idle time and overlap, which sums of kernel times
miss. Beside it, the paper's breakdown (Eq. 6-10): computation, communication and memory, each the
sum of the per-region medians (GPU activity, plus MPI for communication), and "idle", the part of
the step that no GPU activity covers.

Models are fitted to the per-step values of each phase and combined with the exact step counts,
F(x) = n_t(x) * V_t(x) + n_v(x) * V_v(x) (Eq. 4 with Eq. 2-3 evaluated, not fitted): n_t falls
like 1/G under strong scaling, a shape PMNF's non-negative exponents cannot extrapolate.
Without dataset sizes, everything is per training step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from extradeep.aggregate.experiment import NEED_DATASET, TOTAL, Dataset, Experiment
from extradeep.columns import (
    BUSY_REGION,
    CATEGORY,
    EPOCH_CATEGORIES,
    KIND,
    METRIC,
    PHASE,
    REGION,
    REGION_ID,
    REP,
    STEP_REGION,
    TIME,
    TRAIN,
    VAL,
    VALUE,
)

EPOCH_TIME = "epoch time"
GPU_KINDS = ("kernel", "memcpy", "memset")
BREAKDOWN = EPOCH_CATEGORIES  # the parts of an epoch's GPU time
QUANTITIES = (EPOCH_TIME, *BREAKDOWN, "gpu total", "idle")
QUANTITY_HELP = {
    EPOCH_TIME: "measured NVTX step wall time x steps (the primary time per epoch)",
    "computation": "sum of computation kernels (Eq. 8)",
    "communication": "sum of NCCL kernels and MPI calls (Eq. 9)",
    "memory": "sum of memcpy and memset (Eq. 10)",
    "gpu total": "computation + communication + memory (paper Eq. 6)",
    "idle": "step time that no GPU activity (kernel, memcpy, memset on any stream) covers",
}
# analyses key regions across phases: the region id (aggregation keys series per phase)
REGION_KEYS = REGION_ID


def quantity_label(quantity: str, per: str) -> str:
    """How a quantity is shown: the measured step time is "step time" when values are per step."""
    return "step time" if quantity == EPOCH_TIME and per == "step" else quantity


def step_values(experiment: Experiment, metrics=("time", "visits", "bytes")) -> pd.DataFrame:
    """Per-step medians per region, metric, phase (train/val), point and repetition.

    Regions absent from a phase have value 0 there (the sum over no events)."""
    wide = experiment.step_table(per_rep=True)
    wide = wide[wide[METRIC].isin(metrics)]
    keys = [*REGION_KEYS, *experiment.params, "rep"]
    phases = [p for p in ("train", "val") if p in wide.columns]
    long = wide.melt(id_vars=keys, value_vars=phases, var_name=PHASE, value_name=VALUE)
    return long[[*REGION_KEYS, PHASE, *experiment.params, REP, VALUE]]


def application_steps(steps: pd.DataFrame, params: list[str]) -> pd.DataFrame:
    """Application quantities per step (seconds) per phase, point and repetition.

    Quantities that were not measured (e.g. no step marks) are left out rather than shown as 0."""
    time = steps[steps[METRIC] == TIME]
    keys = ["phase", *params, "rep"]
    frames = []
    step = time[(time[KIND] == STEP_REGION) & (time[REGION] == STEP_REGION)]  # kind and region "step"
    if not step.empty:
        frames.append(step[keys + [VALUE]].assign(quantity=EPOCH_TIME))
    for name, rows in time[time[KIND] == TOTAL].groupby(REGION):
        frames.append(rows[keys + [VALUE]].assign(quantity="gpu total" if name == TOTAL else name))
    if not step.empty:
        frames.append(_idle(time, step, keys))
    if not frames:
        return pd.DataFrame(columns=["quantity", *keys, VALUE])
    out = pd.concat(frames, ignore_index=True)
    return out[["quantity", *keys, VALUE]].sort_values(["quantity", *keys]).reset_index(drop=True)


def _idle(time: pd.DataFrame, step: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Step time minus the union of GPU activity in the step (region "gpu busy" of the reader).

    Only GPU work counts as busy; MPI calls are CPU time. Without the union (caches of an older
    reader), the sum of GPU activity stands in; it over-counts overlapping streams, so that idle
    time is a lower bound."""
    union = time[time[REGION] == BUSY_REGION]
    gpu = union if not union.empty else time[time[KIND].isin(GPU_KINDS) & time[CATEGORY].isin(BREAKDOWN)]
    busy = gpu.groupby(keys)[VALUE].sum().rename("busy")
    frame = step[keys + [VALUE]].join(busy, on=keys)
    frame[VALUE] = np.maximum(frame[VALUE] - frame["busy"].fillna(0.0), 0.0)
    return frame[keys + [VALUE]].assign(quantity="idle")


def per_epoch(
    steps: pd.DataFrame, keys: list[str], params: list[str], dataset: Dataset | None, fixed: dict | None = None
) -> pd.DataFrame:
    """F = n_t * V_t + n_v * V_v per key, point and repetition (Eq. 4); without a dataset, V_t."""
    wide = steps.pivot_table(index=[*keys, *params, REP], columns=PHASE, values=VALUE, aggfunc="first").reset_index()
    for phase in ("train", "val"):
        if phase not in wide.columns:
            wide[phase] = 0.0
    wide[[TRAIN, VAL]] = wide[[TRAIN, VAL]].fillna(0.0)
    if dataset is None:
        wide[VALUE] = wide[TRAIN]
    else:
        n_t, n_v = dataset.steps_per_epoch(wide, fixed)
        wide[VALUE] = n_t * wide[TRAIN] + n_v * wide[VAL]
    return wide[[*keys, *params, REP, VALUE]]


def point_summary(values: pd.DataFrame, keys: list[str], params: list[str]) -> pd.DataFrame:
    """Median over repetitions with the min/max spread, one row per key and point."""
    group = values.groupby([*keys, *params], sort=True)[VALUE]
    out = group.median().rename("value").to_frame()
    out["rep_min"] = group.min()
    out["rep_max"] = group.max()
    out["n_reps"] = group.size()
    return out.reset_index()


def dataset_notes(experiment: Experiment, dataset: Dataset | None, steps: pd.DataFrame) -> list[str]:
    if dataset is None:
        return [NEED_DATASET]
    notes = []
    if dataset.val_samples and not (steps[PHASE] == VAL).any():
        notes.append("no validation steps were measured: epoch values include training only")
    n_t, _ = dataset.steps_per_epoch(experiment.points[experiment.params].drop_duplicates(), experiment.fixed_params)
    if (n_t == 0).any():
        notes.append("some points have fewer training samples per rank than one batch: n_t = 0 there")
    return notes


SKIP_WARN = 0.03  # share of the training set an epoch may leave out (floor in n_t) before a warning


def work_samples(dataset: Dataset, points: pd.DataFrame, fixed: dict | None = None) -> np.ndarray:
    """Training samples one epoch really trains on: those processed (floor leaves some out), at
    most the data set (with last batch "keep", padding repeats samples: wasted work, not more data)."""
    counts = dataset.samples_per_epoch(points, fixed)
    return np.minimum(counts["samples"], counts["train_samples"]).to_numpy(float)


def skipped_data_note(table: pd.DataFrame, params: list[str], limit: float = SKIP_WARN) -> list[str]:
    """A warning naming the configurations whose epochs leave out more than ``limit`` of the data
    (``table`` has the params and Dataset.samples_per_epoch's columns)."""
    from extradeep.analysis.points import format_point

    bad = table[table["skipped_share"] > limit].sort_values("skipped_share", ascending=False, kind="stable")
    if bad.empty:
        return []
    shown = ", ".join(
        f"{format_point(r, params)} ({r['samples']:,.0f} of {r['train_samples']:,.0f}, "
        f"{r['skipped_share']:.1%} left out)"
        for _, r in bad.head(6).iterrows()
    )
    more = f" and {len(bad) - 6} more" if len(bad) > 6 else ""
    return [
        f"floor() in the steps per epoch (Eq. 2) makes {len(bad)} configuration(s) skip more than {limit:.0%} "
        f"of the training samples per epoch, so their epoch time looks shorter than the work it stands "
        f"for (the worst first): {shown}{more}. "
        "Speedup and efficiency compare time per sample. Pick a batch size or rank count that divides "
        "the data set; if the training keeps the last partial batch (drop_last=False), say "
        "--last-batch keep"
    ]


@dataclass
class EpochModel:
    """A per-epoch model made of per-step PMNF models and the exact step counts (Eq. 2-4).

    Same interface as :class:`extradeep.modeling.Model`; growth is that of the training-step model.
    """

    train: object | None
    val: object | None
    dataset: Dataset
    params: list[str]
    fixed: dict

    def steps(self, X) -> tuple[np.ndarray, np.ndarray]:
        points = pd.DataFrame(np.asarray(X, dtype=float).reshape(-1, len(self.params)), columns=self.params)
        return self.dataset.steps_per_epoch(points, self.fixed)

    def _parts(self, X, evaluate):
        n_t, n_v = self.steps(X)
        out = []
        for model, n in ((self.train, n_t), (self.val, n_v)):
            if model is not None:
                value = evaluate(model)
                out.append(
                    tuple(n * np.asarray(v, float).reshape(-1) for v in value)
                    if isinstance(value, tuple)
                    else n * np.asarray(value, float).reshape(-1)
                )
        return out, np.ndim(X) == 0 or (len(self.params) > 1 and np.ndim(X) == 1)

    def predict(self, X):
        parts, scalar = self._parts(X, lambda m: m.predict(X))
        total = np.sum(parts, axis=0)
        return float(total[0]) if scalar else total

    def interval(self, X, level: float = 0.95):
        # Bounds add up as if train and validation errors were fully correlated: conservative.
        parts, scalar = self._parts(X, lambda m: m.interval(X, level=level))
        lo, hi = np.sum([p[0] for p in parts], axis=0), np.sum([p[1] for p in parts], axis=0)
        return (float(lo[0]), float(hi[0])) if scalar else (lo, hi)

    @property
    def lead(self):
        return self.train if self.train is not None else self.val

    def formula(self, names: dict | None = None, digits: int = 4) -> str:
        parts = [
            f"n_{p[0]} * ({m.formula(names, digits)})"
            for p, m in (("train", self.train), ("val", self.val))
            if m is not None
        ]
        return " + ".join(parts)

    def __str__(self) -> str:
        return self.formula()

    def growth(self, names: dict | None = None) -> str:
        return f"{self.lead.growth(names)} per step"

    def growth_key(self):
        return self.lead.growth_key()

    @property
    def smape(self) -> float:
        return float(getattr(self.lead, "smape", np.nan))

    def to_dict(self) -> dict:
        return {
            "type": "epoch",
            "dataset": asdict(self.dataset),
            "params": list(self.params),
            "fixed": dict(self.fixed),
            "train": None if self.train is None else self.train.to_dict(),
            "val": None if self.val is None else self.val.to_dict(),
        }


def model_from_dict(data: dict | None):
    """A Model or EpochModel from its ``to_dict()``."""
    from extradeep.modeling import Model

    if data is None:
        return None
    if data.get("type") == "step composition":
        from extradeep.analysis.overlap import StepComposition

        return StepComposition.from_dict(data)
    if data.get("type") == "part":
        from extradeep.analysis.parts import PartModel

        return PartModel.from_dict(data)
    if data.get("type") != "epoch":
        return Model.from_dict(data)
    return EpochModel(
        model_from_dict(data["train"]),
        model_from_dict(data["val"]),
        Dataset(**data["dataset"]),
        list(data["params"]),
        dict(data["fixed"]),
    )
