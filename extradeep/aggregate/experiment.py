"""The Experiment: aggregated measurements per region, metric and configuration point, plus metadata.

Also the epoch extrapolation of paper section 2.3 (Eq. 2-4 and 6-10): a `Dataset` describes the
training and validation sets, and `Experiment.epoch_table` turns per-step medians into per-epoch values.
An Experiment is saved to one SQLite file (sqlite-utils) that plain SQL can read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.aggregate.medians import REGION_KEYS, point_counts
from extradeep.aggregate.settings import ExperimentSettings
from extradeep.columns import (  # noqa: F401 (re-exported)
    CATEGORY,
    EPOCH_CATEGORIES,
    KIND,
    METRIC,
    NAME,
    PHASE,
    REGION,
    REGION_ID,
    REP,
    TOTAL,
    TRAIN,
    VAL,
    VALUE,
)
from extradeep.errors import InputError
from extradeep.io import store

NEED_DATASET = (
    "epoch values need the dataset sizes (training and validation samples, batch size per rank); "
    "per-step values are shown instead"
)


LAST_BATCH = ("drop", "keep")


@dataclass(frozen=True)
class Dataset:
    """The training set sizes that turn per-step values into per-epoch values (paper Eq. 2-3).

    `batch_per_rank`, `gpus_param` and `model_parallel` are numbers or names of parameters (a modeled
    one, or one fixed across the experiment). With `weak_scaling`, both data sets grow with G.
    `last_batch` says what happens to a last partial batch: "drop" (paper Eq. 2, floor) or "keep"
    (ceil, like PyTorch's DataLoader/DistributedSampler with drop_last=False).
    """

    train_samples: float
    val_samples: float = 0
    batch_per_rank: float | str = 1
    gpus_param: float | str = "ranks"
    model_parallel: float | str = 1
    weak_scaling: bool = False
    last_batch: str = "drop"

    def __post_init__(self):
        _check_count(self.train_samples, "train_samples", least=0, inclusive=False)
        _check_count(self.val_samples, "val_samples", least=0, inclusive=True)
        for value, option in (
            (self.batch_per_rank, "batch_per_rank"),
            (self.gpus_param, "gpus_param"),
            (self.model_parallel, "model_parallel"),
        ):
            if not isinstance(value, str):
                _check_count(value, option, least=0, inclusive=False)
        if self.last_batch not in LAST_BATCH:
            raise InputError(
                None, field="last_batch", problem=f"must be one of {', '.join(LAST_BATCH)}, got {self.last_batch!r}"
            )

    def steps_per_epoch(self, points: pd.DataFrame, fixed: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(n_t, n_v) for each row of `points`: n = floor((D / (G/M)) / B), or ceil with last_batch "keep"."""
        gpus, batch, model = self._degrees(points, fixed)
        grow = gpus if self.weak_scaling else 1.0
        data_parallel = gpus / model
        whole = np.ceil if self.last_batch == "keep" else np.floor

        def n(samples):
            return whole((samples * grow / data_parallel) / batch).astype(np.int64)

        return n(float(self.train_samples)), n(float(self.val_samples))

    def samples_per_epoch(self, points: pd.DataFrame, fixed: dict | None = None) -> pd.DataFrame:
        """Per row of `points`: `n_t`, `samples` (training samples one epoch processes on all ranks,
        n_t * G/M * B; with "keep" the last batch counts in full, as padded samplers repeat data),
        `train_samples` (the training set, x G under weak scaling) and `skipped_share` (share of the
        set that floor() in Eq. 2 leaves out; 0 with "keep")."""
        gpus, batch, model = self._degrees(points, fixed)
        n_t, _ = self.steps_per_epoch(points, fixed)
        processed = n_t * (gpus / model) * batch
        size = float(self.train_samples) * (gpus if self.weak_scaling else 1.0)
        skipped = np.divide(size - processed, size, out=np.zeros(len(points)), where=np.full(len(points), size > 0))
        return pd.DataFrame(
            {"n_t": n_t, "samples": processed, "train_samples": size, "skipped_share": np.clip(skipped, 0.0, 1.0)},
            index=points.index,
        )

    def _degrees(self, points, fixed):
        return (
            _resolve(self.gpus_param, "G (--gpus-param)", points, fixed),
            _resolve(self.batch_per_rank, "B (--batch-size)", points, fixed),
            _resolve(self.model_parallel, "M (--model-parallel)", points, fixed),
        )


def _check_count(value, option: str, least: float, inclusive: bool) -> None:
    """One line naming the option when a size or degree is not a finite number above `least`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not np.isfinite(number) or number < least or (number == least and not inclusive):
        bound = f">= {least:g}" if inclusive else f"> {least:g}"
        shown = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)
        raise InputError(None, f"must be a number {bound}, got {shown}", field=option)


def _resolve(spec, what: str, points: pd.DataFrame, fixed: dict | None) -> np.ndarray:
    if isinstance(spec, str):
        if spec in points.columns:
            values = points[spec].to_numpy(dtype=float)
        elif fixed and spec in fixed:
            values = np.full(len(points), float(fixed[spec]))
        else:
            raise InputError(
                None, f"{what}: no parameter named {spec!r}; give a number or one of {list(points.columns)}"
            )
    else:
        values = np.full(len(points), float(spec))
    if (values <= 0).any() or np.isnan(values).any():
        raise InputError(None, f"{what} must be positive")
    return values


@dataclass
class Experiment:
    """Aggregated measurements of one application: the input of modeling, analysis and reports.

    `values` holds one row per region, kind, category, metric, phase, point and repetition (median over
    steps, then ranks, with the spread over ranks); `points` one row per point (median over
    repetitions, spread over repetitions and pooled over ranks, `modelable`). See docs/architecture.md.
    """

    params: list[str]
    values: pd.DataFrame
    points: pd.DataFrame
    provenance: pd.DataFrame
    settings: ExperimentSettings = field(default_factory=ExperimentSettings)  # a mapping is converted
    problems: list[str] = field(default_factory=list)
    # models read back from a saved file ({"models", "meta"}); analyse reuses them when they fit
    saved_models: dict | None = field(default=None, repr=False, compare=False)
    # the saved file this experiment was loaded from: its problems and notes are the earlier reading's
    saved_path: Path | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.settings = ExperimentSettings.from_any(self.settings)

    @property
    def dataset(self) -> Dataset | None:
        stored = self.settings.dataset
        return Dataset(**stored) if stored else None  # files saved before last_batch existed: "drop"

    @property
    def fixed_params(self) -> dict:
        """Parameters that have one value across the experiment (not modeled)."""
        return dict(self.settings.fixed_params)

    def set_min_points(self, min_points: int) -> None:
        """Re-mark which regions are modelable (measured at >= `min_points` points)."""
        self.settings.min_points = int(min_points)
        self.points["modelable"] = point_counts(self.points) >= int(min_points)

    def step_table(self, per_rep: bool = False) -> pd.DataFrame:
        """Per-step medians V_t (`train`) and V_v (`val`) per region/metric/point (optionally per
        repetition), plus the category sums of Eq. 6 and 8-10 as rows of kind "total"."""
        source = self.values if per_rep else self.points
        keys = [*REGION_ID, *self.params] + ([REP] if per_rep else [])
        regions = source[source[PHASE].isin([TRAIN, VAL])]
        table = pd.concat([regions, category_sums(regions, keys)], ignore_index=True)
        wide = table.pivot_table(index=keys, columns=PHASE, values=VALUE, aggfunc="first", dropna=False)
        wide = wide.reindex(columns=[TRAIN, VAL]).dropna(how="all").fillna(0.0)
        wide.columns.name = None
        wide = wide.reset_index()
        counts = wide.drop_duplicates([REGION, KIND, CATEGORY, METRIC, *self.params])
        n_points = counts.groupby([REGION, KIND, CATEGORY, METRIC]).size().rename("n_points")
        wide = wide.join(n_points, on=[REGION, KIND, CATEGORY, METRIC])
        wide["modelable"] = wide["n_points"] >= int(self.settings.min_points)
        wide.attrs["notes"] = self._phase_notes()
        return wide

    def epoch_table(self, dataset: Dataset | None = None, per_rep: bool = False) -> pd.DataFrame:
        """F = n_t * V_t + n_v * V_v per region/metric/point (Eq. 4, 6, 8-10). Region "step" gives the
        measured epoch wall time; kind "total" rows the computation/communication/memory sums."""
        dataset = dataset or self.dataset
        if dataset is None:
            raise InputError(None, NEED_DATASET, field="train_samples")
        table = self.step_table(per_rep)
        n_t, n_v = dataset.steps_per_epoch(table, self.fixed_params)
        table.insert(table.columns.get_loc("train"), "n_t", n_t)
        table.insert(table.columns.get_loc("train"), "n_v", n_v)
        table[VALUE] = n_t * table[TRAIN] + n_v * table[VAL]
        notes = list(table.attrs.get("notes", []))
        if (n_t == 0).any():
            notes.append("some points have fewer training samples per rank than one batch: n_t = 0 there")
        if dataset.val_samples and VAL not in set(self.points[PHASE]):
            notes.append("no validation steps were measured: epoch values include training only")
        table.attrs["notes"] = notes
        return table

    def _phase_notes(self) -> list[str]:
        phases = set(self.points[PHASE])
        return [] if TRAIN in phases else ["no training steps were measured"]

    def save(self, path, extra_tables: dict | None = None) -> None:
        """Write one SQLite file (overwriting an earlier extradeep experiment, never anything else);
        `extra_tables` (name -> DataFrame) are written with it, such as the fitted models."""
        tables = {
            "measurements": self.points,
            "measurements_by_rep": self.values,
            "regions": region_table(self.points),
            "parameters": self.parameter_table(),
            "provenance": self.provenance,
            **(extra_tables or {}),
        }
        store.write_experiment(
            path, {"params": json.dumps(self.params)}, tables, self.settings.to_dict(), self.problems
        )

    @classmethod
    def load(cls, path) -> Experiment:
        saved = store.read_saved(path)
        points = saved.tables["measurements"]
        points["modelable"] = points["modelable"].astype(bool)
        experiment = cls(
            json.loads(saved.meta["params"]),
            saved.tables["measurements_by_rep"],
            points,
            saved.tables["provenance"],
            saved.settings,
            saved.problems,
        )
        experiment.saved_models = saved.models
        experiment.saved_path = Path(path)
        try:
            experiment.dataset  # noqa: B018 - built here so that a bad stored dataset fails on load
        except (TypeError, ValueError, InputError) as exc:
            raise InputError(path, f"{store.DAMAGED}: setting 'dataset' is unusable ({exc})") from None
        return experiment

    def parameter_table(self) -> pd.DataFrame:
        rows = [
            {"name": p, "modeled": True, "values": json.dumps(sorted(self.points[p].unique().tolist()))}
            for p in self.params
        ]
        rows += [{"name": k, "modeled": False, "values": json.dumps([v])} for k, v in self.fixed_params.items()]
        return pd.DataFrame(rows, columns=[NAME, "modeled", "values"])


def category_sums(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sum of the per-region medians per category (Eq. 8-10) and of all three (Eq. 6), per phase.

    Only computation, communication and memory are summed, so CPU-side ranges are not counted twice."""
    group = [k for k in keys if k not in (REGION, KIND, CATEGORY)] + [PHASE]
    cats = frame[frame[CATEGORY].isin(EPOCH_CATEGORIES)]
    per_cat = cats.groupby(group + [CATEGORY], dropna=False)[VALUE].sum().reset_index()
    per_cat[REGION] = per_cat[CATEGORY]
    total = cats.groupby(group, dropna=False)[VALUE].sum().reset_index()
    total[REGION] = total[CATEGORY] = TOTAL
    out = pd.concat([per_cat, total], ignore_index=True)
    out[KIND] = TOTAL
    return out


def region_table(points: pd.DataFrame) -> pd.DataFrame:
    """One row per region/metric/phase: at how many points it was measured and whether it is modelable."""
    keys = list(REGION_KEYS)
    return (
        points.groupby(keys, dropna=False).agg(n_points=(VALUE, "size"), modelable=("modelable", "first")).reset_index()
    )


def dataset_dict(dataset: Dataset | None) -> dict | None:
    return asdict(dataset) if dataset else None
