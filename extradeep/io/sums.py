"""Per-step sums of one profile's tables, whatever its format (paper section 2.2, Eq. 1).

Every reader (`extradeep.io.nsys.read`, `extradeep.io.kineto.read`) hands `step_sums` the same dict
of tables (`extradeep.io.frames`), so the rules below hold for both. Each event is assigned to (epoch, phase, step):
GPU work by the start of the CPU runtime call that launched it (joined via correlationId within a
process), so work launched in a step but finishing after it still belongs to it; CPU events by
their own start. Events outside every step but inside a measured epoch go to phase "between"
(step -1) of that epoch; events before the first or after the last measured epoch (initialisation,
warm-up, teardown) are not counted. Bucketing is vectorised with np.searchsorted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import BUSY_REGION, STEP_SUM_COLUMNS
from extradeep.io import categories as cat
from extradeep.io.frames import NULL_INT, NVTX_RANGE_TYPES, per_category
from extradeep.io.settings import READER_VERSION
from extradeep.io.steps import StepTable

OUTPUT_COLUMNS = STEP_SUM_COLUMNS
NS = 1e-9


@dataclass
class Buckets:
    """Where events go: kept steps (0..n-1) and per-epoch "between" buckets (n..), -1 = not counted."""

    step_start: np.ndarray
    step_end: np.ndarray
    window_start: np.ndarray
    window_end: np.ndarray
    epoch: np.ndarray  # per bucket
    phase: np.ndarray
    step: np.ndarray

    @classmethod
    def from_steps(cls, table: StepTable) -> Buckets:
        steps, windows = table.steps, table.windows
        return cls(
            steps["start"].to_numpy(np.int64),
            steps["end"].to_numpy(np.int64),
            windows["start"].to_numpy(np.int64),
            windows["end"].to_numpy(np.int64),
            np.concatenate([steps["epoch"].to_numpy(np.int64), windows["epoch"].to_numpy(np.int64)]),
            np.concatenate([steps["phase"].to_numpy(object), np.full(len(windows), "between", dtype=object)]),
            np.concatenate([steps["step"].to_numpy(np.int64), np.full(len(windows), -1, dtype=np.int64)]),
        )

    @property
    def size(self) -> int:
        return len(self.epoch)

    def assign(self, t: np.ndarray) -> np.ndarray:
        """Bucket of each time `t` (ns): the step containing it, else the between bucket of the epoch
        window that started last before it (gaps between windows stay with the earlier epoch)."""
        n = len(self.step_start)
        i = np.searchsorted(self.step_start, t, side="right") - 1
        in_step = (i >= 0) & (t < self.step_end[np.maximum(i, 0)])
        w = np.searchsorted(self.window_start, t, side="right") - 1
        in_window = (w >= 0) & (t < self.window_end.max(initial=np.iinfo(np.int64).min))
        return np.where(in_step, i, np.where(in_window, n + w, -1))


def step_sums(tables: dict) -> pd.DataFrame:
    """The per-step sums of one profile's tables (as `extradeep.io.nsys.read.read_tables` returns them;
    the Kineto reader builds the same dict): nvtx, steps (StepTable), runtime, kernels, memcpy, memset, osrt, library,
    mpi, warnings, and optionally user_ranges (kind -> frame of CPU ranges that are not step marks)."""
    nvtx, table, runtime, kernels = tables["nvtx"], tables["steps"], tables["runtime"], tables["kernels"]
    buckets = Buckets.from_steps(table)
    notes = list(table.warnings)
    launch = LaunchTimes(runtime)
    parts = [_step_rows(table)]
    not_counted = 0

    def add(frame, kind, category, ref, with_bytes=False):
        nonlocal not_counted
        if len(frame) == 0:
            return
        b = buckets.assign(ref)
        not_counted += int(np.count_nonzero(b < 0))
        size = frame["bytes"].to_numpy() if with_bytes else None
        parts.append(_sums(frame["name"].array, kind, category, b, buckets, _durations(frame), size))

    add(kernels, "kernel", cat.kernel_categories(kernels["name"].cat.categories), launch.of(kernels))
    gpu = [kernels]
    for kind in ("memcpy", "memset"):
        frame = tables[kind]
        add(frame, kind, cat.MEMORY, launch.of(frame), with_bytes=True)
        gpu.append(frame)
    parts.append(_busy_rows(table, gpu))
    notes += launch.notes()
    add(runtime, "cuda_api", cat.CUDA_API, runtime["start"].to_numpy())
    osrt = tables["osrt"]
    add(osrt, "os", cat.OS, osrt["start"].to_numpy())
    for library, frame in tables["library"].groupby("library", sort=True):
        add(frame, library, cat.LIBRARY, frame["start"].to_numpy())
    mpi = tables["mpi"]
    add(mpi, "mpi", cat.COMMUNICATION, mpi["start"].to_numpy(), with_bytes=True)
    user = tables["user_ranges"] if "user_ranges" in tables else user_ranges(nvtx, table, notes)
    for kind, frame in user.items():
        add(frame, kind, cat.NVTX, frame["start"].to_numpy())
    notes += tables["warnings"]
    out = pd.DataFrame({c: np.concatenate([part[c] for part in parts]) for c in OUTPUT_COLUMNS})
    out.attrs.update(
        notes=list(dict.fromkeys(notes)),  # the same note from two readers of one table, once
        convention=dict(table.convention),
        n_steps=table.steps.groupby("phase").size().to_dict(),
        not_counted=not_counted,
        reader_version=READER_VERSION,
    )
    return out


class LaunchTimes:
    """Start time of the CUDA runtime call that launched each GPU operation (same process and
    correlationId); GPU work without one keeps its own start and is reported."""

    def __init__(self, runtime: pd.DataFrame):
        key = runtime["launchKey"].to_numpy()
        valid = _has_correlation(key)
        key, start = key[valid], runtime["start"].to_numpy()[valid]
        if len(key) and not (key[1:] >= key[:-1]).all():  # usually already in correlationId order
            order = np.argsort(key, kind="stable")
            key, start = key[order], start[order]
        self.key, self.start = key, start
        self.unmatched = 0

    def of(self, gpu: pd.DataFrame) -> np.ndarray:
        key = gpu["launchKey"].to_numpy()
        own = gpu["start"].to_numpy()
        if len(self.key) == 0:
            self.unmatched += len(own)
            return own
        pos = np.minimum(np.searchsorted(self.key, key), len(self.key) - 1)
        found = (self.key[pos] == key) & _has_correlation(key)
        self.unmatched += int(np.count_nonzero(~found))
        return np.where(found, self.start[pos], own)

    def notes(self) -> list[str]:
        if not self.unmatched:
            return []
        return [
            f"{self.unmatched} GPU operations have no launching CUDA runtime call in the export; "
            "they are placed by their own start time"
        ]


def _has_correlation(launch_key: np.ndarray) -> np.ndarray:
    """correlationId 0 (or NULL) correlates nothing: such rows never join."""
    return (launch_key != NULL_INT) & ((launch_key & 0xFFFFFFFF) != 0)


def _durations(frame: pd.DataFrame) -> np.ndarray:
    end, start = frame["end"].to_numpy(), frame["start"].to_numpy()
    return np.where(end == NULL_INT, 0, end - start)


def _sums(
    names: pd.Categorical,
    kind: str,
    category,
    bucket: np.ndarray,
    buckets: Buckets,
    duration: np.ndarray,
    size: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """Sum time, visits (and bytes) per (name, bucket) of events with bucket >= 0; long format.
    `category` is one string or an array with one category per name (kernels)."""
    keep = bucket >= 0
    key = np.asarray(names.codes)[keep].astype(np.int64) * buckets.size + bucket[keep]
    uniq, inverse = _dense_keys(key, len(names.categories) * buckets.size)
    counts = np.bincount(inverse, minlength=len(uniq))
    metrics = {
        "time": np.bincount(inverse, weights=duration[keep].astype(np.float64), minlength=len(uniq)) * NS,
        "visits": counts.astype(np.float64),
    }
    if size is not None:
        valid = size[keep] != NULL_INT
        if valid.any():
            weights = np.where(valid, size[keep], 0).astype(np.float64)
            metrics["bytes"] = np.bincount(inverse, weights=weights, minlength=len(uniq))
    if len(uniq) > len(key):  # dense key space: keep the (name, bucket) pairs that occurred
        hit = counts > 0
        uniq, metrics = uniq[hit], {m: v[hit] for m, v in metrics.items()}
    name_code, b = uniq // buckets.size, uniq % buckets.size
    categories = np.asarray(names.categories, dtype=object)
    per_row = np.full(len(uniq), category, dtype=object) if isinstance(category, str) else category[name_code]
    base = {
        "region": categories[name_code],
        "kind": np.full(len(uniq), kind, dtype=object),
        "category": per_row,
        "epoch": buckets.epoch[b],
        "phase": buckets.phase[b],
        "step": buckets.step[b],
    }
    return _long(base, metrics)


def _long(base: dict[str, np.ndarray], metrics: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Columns in long format: `base` repeated once per metric, zero values left out."""
    value = np.concatenate(list(metrics.values()))
    keep = value != 0
    out = {name: np.tile(column, len(metrics))[keep] for name, column in base.items()}
    n = len(next(iter(base.values())))
    out["metric"] = np.repeat(np.array(list(metrics), dtype=object), n)[keep]
    out["value"] = value[keep]
    return out


def _dense_keys(key: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, index of each key): all n_keys when that is small (O(n) bincount), else the distinct ones."""
    if n_keys <= 4 * len(key) + 65536:
        return np.arange(n_keys), key
    return np.unique(key, return_inverse=True)


def _step_rows(table: StepTable) -> dict[str, np.ndarray]:
    """Region "step": each kept step's NVTX duration (time) and one visit."""
    steps = table.steps
    n = len(steps)
    base = {
        "region": np.full(n, "step", dtype=object),
        "kind": np.full(n, cat.STEP, dtype=object),
        "category": np.full(n, cat.STEP, dtype=object),
        "epoch": steps["epoch"].to_numpy(np.int64),
        "phase": steps["phase"].to_numpy(object),
        "step": steps["step"].to_numpy(np.int64),
    }
    time = (steps["end"].to_numpy(np.int64) - steps["start"].to_numpy(np.int64)) * NS
    return _long(base, {"time": time, "visits": np.ones(n)})


def _busy_rows(table: StepTable, gpu: list[pd.DataFrame]) -> dict[str, np.ndarray]:
    """Region "gpu busy" (kind "busy", category "step"): per step, the length of the union of all
    GPU activity intervals (kernels, memcpy, memset on any stream), clipped to the step. Unlike a
    sum of durations, overlapping streams count once, so step - busy is the time no GPU work covers."""
    steps = table.steps
    start = np.concatenate([f["start"].to_numpy(np.int64) for f in gpu])
    end = np.concatenate([f["end"].to_numpy(np.int64) for f in gpu])
    valid = (end != NULL_INT) & (end > start)
    busy = covered_time(start[valid], end[valid], steps["start"].to_numpy(np.int64), steps["end"].to_numpy(np.int64))
    base = {
        "region": np.full(len(steps), BUSY_REGION, dtype=object),
        "kind": np.full(len(steps), "busy", dtype=object),
        "category": np.full(len(steps), cat.STEP, dtype=object),
        "epoch": steps["epoch"].to_numpy(np.int64),
        "phase": steps["phase"].to_numpy(object),
        "step": steps["step"].to_numpy(np.int64),
    }
    return _long(base, {"time": busy * NS})


def covered_time(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of the union of the intervals [start, end) inside each window [lo, hi) (vectorised).

    The intervals are merged once (sorted by start, running maximum of the ends); the covered time
    before any t is then a cumulative sum plus the part of the merged interval that t falls in."""
    if len(start) == 0:
        return np.zeros(len(lo), dtype=np.float64)
    order = np.argsort(start, kind="stable")
    start, end = start[order], np.maximum.accumulate(end[order])
    # A new merged interval begins where an interval starts after every earlier one has ended.
    first = np.concatenate(([True], start[1:] > end[:-1]))
    m_start = start[first]
    m_end = end[np.concatenate((np.flatnonzero(first)[1:] - 1, [len(start) - 1]))]
    before = np.concatenate(([0], np.cumsum(m_end - m_start)[:-1])).astype(np.float64)

    def covered_before(t):
        i = np.searchsorted(m_start, t, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(t - m_start[j], 0, m_end[j] - m_start[j])
        return np.where(i >= 0, before[j] + inside, 0.0)

    return covered_before(hi) - covered_before(lo)


def user_ranges(nvtx: pd.DataFrame, table: StepTable, notes: list[str]) -> dict[str, pd.DataFrame]:
    """NVTX ranges other than the step/epoch marks and MPI ranges, split into nvtx and nccl_nvtx."""
    ranges = nvtx["eventType"].isin(NVTX_RANGE_TYPES).to_numpy().copy()
    ranges[table.mark_rows] = False
    ranges &= ~per_category(nvtx["domain"], cat.is_mpi_domain)  # counted by events.mpi
    frame = nvtx[ranges]
    open_ended = int(np.count_nonzero(frame["end"].to_numpy() == NULL_INT))
    if open_ended:
        notes.append(
            f"{open_ended} NVTX ranges have no end (still open when capture stopped); counted as visits without time"
        )
    nccl = per_category(frame["name"], lambda n: cat.is_nccl_nvtx(n, "")) | per_category(
        frame["domain"], lambda d: cat.is_nccl_nvtx("", d)
    )
    return {"nvtx": frame[~nccl], "nccl_nvtx": frame[nccl]}
