"""Per-step sums of one profile's tables, whatever its format (paper section 2.2, Eq. 1).

Every reader (`extradeep.io.nsys.read`, `extradeep.io.kineto.read`) hands `step_sums` the same dict
of tables (`extradeep.io.frames`: Tables or DataFrames), so the rules below hold for both. Each event is
assigned to (epoch, phase, step): GPU work by the start of the CPU runtime call that launched it (joined
via correlationId within a process), so work launched in a step but finishing after it still belongs to
it; CPU events by their own start. Events outside every step but inside a measured epoch go to phase
"between" (step -1) of that epoch; events before the first or after the last measured epoch
(initialisation, warm-up, teardown) are not counted. Bucketing is vectorised with np.searchsorted, and
the rows are built as codes and turned into text once at the end: a small export's sums cost a few
NumPy calls per table, not a DataFrame each.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import (
    BETWEEN,
    BUSY_REGION,
    BYTES,
    CATEGORY,
    EPOCH,
    KIND,
    METRIC,
    NAME,
    PHASE,
    REGION,
    STEP,
    STEP_REGION,
    STEP_SUM_COLUMNS,
    TIME,
    VALUE,
    VISITS,
)
from extradeep.io import categories as cat
from extradeep.io.frames import NULL_INT, Names, Table, is_range
from extradeep.io.settings import READER_VERSION
from extradeep.io.steps import StepTable

OUTPUT_COLUMNS = STEP_SUM_COLUMNS
NS = 1e-9
BUSY_KIND = "busy"
METRIC_NAMES = np.array([TIME, VISITS, BYTES], dtype=object)  # metric codes 0, 1, 2


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
        steps, windows = table.kept, table.window
        n = len(windows[EPOCH])
        return cls(
            steps[START],
            steps[END],
            windows[START],
            windows[END],
            np.concatenate([steps[EPOCH], windows[EPOCH]]).astype(np.int64, copy=False),
            np.concatenate([steps[PHASE], np.full(n, BETWEEN, dtype=object)]),
            np.concatenate([steps[STEP], np.full(n, -1, dtype=np.int64)]).astype(np.int64, copy=False),
        )

    @property
    def size(self) -> int:
        return len(self.epoch)

    def assign(self, t: np.ndarray) -> np.ndarray:
        """Bucket of each time `t` (ns): the step containing it, else the between bucket of the epoch
        window that started last before it (gaps between windows stay with the earlier epoch). The
        bucket only changes at a step's start or end, a window's start or the last window's end: one
        search among those boundaries finds it (`_bucket_at` gives each boundary's bucket)."""
        bounds, bucket = self._segments
        return bucket[np.searchsorted(bounds, t, side="right") - 1]

    @functools.cached_property
    def _segments(self) -> tuple[np.ndarray, np.ndarray]:
        last_end = [self.window_end.max()] if len(self.window_end) else []
        bounds = np.unique(np.concatenate([self.step_start, self.step_end, self.window_start, last_end]))
        bounds = np.concatenate([[np.iinfo(np.int64).min], bounds]).astype(np.int64)  # before all: not counted
        bucket = self._bucket_at(bounds)
        bucket[0] = -1
        return bounds, bucket

    def _bucket_at(self, t: np.ndarray) -> np.ndarray:
        n = len(self.step_start)
        i = np.searchsorted(self.step_start, t, side="right") - 1
        in_step = (i >= 0) & (t < self.step_end[np.maximum(i, 0)])
        w = np.searchsorted(self.window_start, t, side="right") - 1
        in_window = (w >= 0) & (t < (self.window_end.max() if len(self.window_end) else NULL_INT))
        return np.where(in_step, i, np.where(in_window, n + w, -1))


START, END = "start", "end"  # the integer-ns times of every table (extradeep.io.frames)


class _Rows:
    """The output rows, gathered as integer codes per part (a part: one table's sums): region names and
    the code of each row's name, kind, category (one, or one per name), metric code, bucket and value.
    `frame()` turns the codes into text once, for all parts: a text column costs per row."""

    def __init__(self, buckets: Buckets):
        self.buckets = buckets
        self.parts: list[tuple] = []

    def add(self, names, code, kind: str, category, metric: np.ndarray, bucket: np.ndarray, value: np.ndarray):
        """`names`: the region names `code` indexes; `category`: one text, or one per name. Drops zero values."""
        keep = value != 0
        if not keep.all():
            code, metric, bucket, value = code[keep], metric[keep], bucket[keep], value[keep]
        if len(value):
            self.parts.append((np.asarray(names, dtype=object), code, kind, category, metric, bucket, value))

    def frame(self) -> pd.DataFrame:
        if not self.parts:
            numbers = {EPOCH: np.int64, STEP: np.int64, VALUE: np.float64}
            return pd.DataFrame({c: np.empty(0, dtype=numbers.get(c, object)) for c in OUTPUT_COLUMNS})
        n = [len(p[6]) for p in self.parts]
        offsets = np.cumsum([0] + [len(p[0]) for p in self.parts[:-1]])
        names = np.concatenate([p[0] for p in self.parts])
        region = np.concatenate([p[1] + offset for p, offset in zip(self.parts, offsets)])
        kinds = sorted({p[2] for p in self.parts})
        kind = np.repeat([kinds.index(p[2]) for p in self.parts], n)
        categories: list[str] = []
        category = np.concatenate([_category_codes(p[3], p[1], categories) for p in self.parts])
        bucket = np.concatenate([p[5] for p in self.parts])
        phases, phase = np.unique(self.buckets.phase.astype(str), return_inverse=True)
        columns = {
            REGION: _text(names, region),
            KIND: _text(kinds, kind),
            CATEGORY: _text(categories, category),
            METRIC: _text(METRIC_NAMES, np.concatenate([p[4] for p in self.parts])),
            EPOCH: self.buckets.epoch[bucket],
            PHASE: _text(phases, phase.ravel()[bucket]),
            STEP: self.buckets.step[bucket],
            VALUE: np.concatenate([p[6] for p in self.parts]),
        }
        return pd.DataFrame({c: columns[c] for c in OUTPUT_COLUMNS}, copy=False)  # fresh arrays: no copy


def _category_codes(category, code: np.ndarray, categories: list[str]) -> np.ndarray:
    """Index into `categories` (extended as needed) of each row's category: one for all rows, or the
    category of each row's name."""
    if isinstance(category, str):
        if category not in categories:
            categories.append(category)
        return np.full(len(code), categories.index(category))
    for value in dict.fromkeys(category):
        if value not in categories:
            categories.append(value)
    per_name = np.array([categories.index(value) for value in category], dtype=np.int64)
    return per_name[code]


TEXT = pd.Series(["text"]).dtype  # what pandas makes of text: str (pandas 3) or object


def _text(values, codes: np.ndarray):
    """The text column `values[codes]` in pandas' text dtype: taken from a typed array of the few
    distinct values, so no row's text is checked again."""
    return pd.array(np.asarray(values, dtype=object), dtype=TEXT).take(codes)


def step_sums(tables: dict) -> pd.DataFrame:
    """The per-step sums of one profile's tables (as `extradeep.io.nsys.read.read_tables` returns them;
    the Kineto reader builds the same dict): nvtx, steps (StepTable), runtime, kernels, memcpy, memset,
    osrt, library ({library: table}, or one table with a `library` column), mpi, warnings, and
    optionally user_ranges (kind -> table of CPU ranges that are not step marks). Tables may be
    `extradeep.io.frames.Table`s or DataFrames."""
    step_table = tables["steps"]
    nvtx, runtime, kernels = (Table.of(tables[k]) for k in ("nvtx", "runtime", "kernels"))
    buckets = Buckets.from_steps(step_table)
    notes = list(step_table.warnings)
    launch = LaunchTimes(runtime)
    rows = _Rows(buckets)
    _step_rows(rows, step_table)

    events = []  # (table, kind, category, reference time, with bytes), in the order of the output

    def add(table: Table, kind, category, ref, with_bytes=False):
        if len(table):
            events.append((table, kind, category, ref, with_bytes))

    add(kernels, "kernel", cat.kernel_categories(kernels[NAME].categories), launch.of(kernels))
    gpu = [kernels]
    for kind in ("memcpy", "memset"):
        table = Table.of(tables[kind])
        add(table, kind, cat.MEMORY, launch.of(table), with_bytes=True)
        gpu.append(table)
    before_busy = len(events)
    notes += launch.notes()
    add(runtime, "cuda_api", cat.CUDA_API, runtime[START])
    osrt = Table.of(tables["osrt"])
    add(osrt, "os", cat.OS, osrt[START])
    for library, table in _libraries(tables["library"]):
        add(table, library, cat.LIBRARY, table[START])
    mpi = Table.of(tables["mpi"])
    add(mpi, "mpi", cat.COMMUNICATION, mpi[START], with_bytes=True)
    user = tables["user_ranges"] if "user_ranges" in tables else user_ranges(nvtx, step_table, notes)
    for kind, table in user.items():
        table = Table.of(table)
        add(table, kind, cat.NVTX, table[START])
    # one bucket search for all events (each search costs more to call than to run on a small export)
    refs = [e[3] for e in events]
    assigned = buckets.assign(np.concatenate(refs)) if refs else np.empty(0, np.int64)
    not_counted = int(np.count_nonzero(assigned < 0))
    parts = _sums_together(events, assigned, buckets) or _sums_by_table(events, assigned, buckets)
    for i, part in enumerate(parts):
        if i == before_busy:
            _busy_rows(rows, step_table, gpu)
        rows.add(*part)
    if len(parts) <= before_busy:
        _busy_rows(rows, step_table, gpu)
    notes += tables["warnings"]
    out = rows.frame()
    phases, counts = np.unique(step_table.kept[PHASE].astype(str), return_counts=True)
    out.attrs.update(
        notes=list(dict.fromkeys(notes)),  # the same note from two readers of one table, once
        convention=dict(step_table.convention),
        n_steps={str(p): int(c) for p, c in zip(phases, counts)},
        not_counted=not_counted,
        reader_version=READER_VERSION,
    )
    return out


def _libraries(library) -> list[tuple[str, Table]]:
    """(library, its calls) in library order: from a dict of tables, or one table with a `library`
    column (then the names are shared, as they come)."""
    if isinstance(library, dict):
        return [(str(k), Table.of(library[k])) for k in sorted(library) if len(library[k])]
    merged = Table.of(library)
    if not len(merged):
        return []
    which = np.asarray(merged["library"], dtype=object)
    return [(str(k), merged.take(which == k)) for k in sorted(set(which))]


class LaunchTimes:
    """Start time of the CUDA runtime call that launched each GPU operation (same process and
    correlationId); GPU work without one keeps its own start and is reported."""

    def __init__(self, runtime: Table):
        key = runtime["launchKey"]
        valid = _has_correlation(key)
        key, start = key[valid], runtime[START][valid]
        if len(key) and not (key[1:] >= key[:-1]).all():  # usually already in correlationId order
            order = np.argsort(key, kind="stable")
            key, start = key[order], start[order]
        self.key, self.start = key, start
        self.unmatched = 0

    def of(self, gpu: Table) -> np.ndarray:
        key = gpu["launchKey"]
        own = gpu[START]
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


def _durations(table: Table) -> np.ndarray:
    end, start = table[END], table[START]
    return np.where(end == NULL_INT, 0, end - start)


def _sums_by_table(events: list[tuple], assigned: np.ndarray, buckets: Buckets) -> list[tuple]:
    """`_sums` of each event table (its share of `assigned`, the bucket of every event)."""
    bounds = np.cumsum([len(e[3]) for e in events])[:-1]
    parts = []
    for (table, kind, category, _, with_bytes), b in zip(events, np.split(assigned, bounds)):
        size = table[BYTES] if with_bytes else None
        parts.append(_sums(table[NAME], kind, category, b, buckets, _durations(table), size))
    return parts


def _sums(
    names: Names,
    kind: str,
    category,
    bucket: np.ndarray,
    buckets: Buckets,
    duration: np.ndarray,
    size: np.ndarray | None,
) -> tuple:
    """Sum time, visits (and bytes) per (name, bucket) of events with bucket >= 0: the arguments of
    `_Rows.add`. `category` is one string or an array with one category per name (kernels)."""
    keep = bucket >= 0
    key = names.codes[keep] * buckets.size + bucket[keep]
    uniq, inverse = _dense_keys(key, len(names.categories) * buckets.size)
    counts = np.bincount(inverse, minlength=len(uniq))
    metrics = [
        np.bincount(inverse, weights=duration[keep].astype(np.float64), minlength=len(uniq)) * NS,
        counts.astype(np.float64),
    ]
    if size is not None:
        valid = size[keep] != NULL_INT
        if valid.any():
            weights = np.where(valid, size[keep], 0).astype(np.float64)
            metrics.append(np.bincount(inverse, weights=weights, minlength=len(uniq)))
    if len(uniq) > len(key):  # dense key space: keep the (name, bucket) pairs that occurred
        hit = counts > 0
        uniq, metrics = uniq[hit], [m[hit] for m in metrics]
    return _part(names, kind, category, uniq, buckets.size, metrics)


def _part(names: Names, kind: str, category, keys: np.ndarray, n_buckets: int, metrics: list) -> tuple:
    """The `_Rows.add` arguments of one table's sums: per key (name code x buckets + bucket) and metric."""
    m = len(metrics)
    codes, bucket = np.tile(keys // n_buckets, m), np.tile(keys % n_buckets, m)
    return names.categories, codes, kind, category, np.repeat(np.arange(m), len(keys)), bucket, np.concatenate(metrics)


def _sums_together(events: list[tuple], assigned: np.ndarray, buckets: Buckets) -> list[tuple] | None:
    """`_sums_by_table` in one pass over every table, when all (name, bucket) pairs of all tables
    fit one dense count (a small export: a few NumPy calls for all tables instead of a dozen each);
    None otherwise. The same sums, in the same order."""
    sizes = np.array([len(e[0][NAME].categories) for e in events], dtype=np.int64)
    n_buckets = buckets.size
    n_keys = int(sizes.sum()) * n_buckets
    if not events or n_keys > 4 * len(assigned) + 65536:
        return None
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    code = np.concatenate([e[0][NAME].codes + offset for e, offset in zip(events, offsets)])
    keep = assigned >= 0
    key = code[keep] * n_buckets + assigned[keep]
    counts = np.bincount(key, minlength=n_keys)
    duration = np.concatenate([_durations(e[0]) for e in events])[keep].astype(np.float64)
    time = np.bincount(key, weights=duration, minlength=n_keys) * NS
    size = np.concatenate([e[0][BYTES] if e[4] else np.full(len(e[0]), NULL_INT, np.int64) for e in events])
    valid = (size != NULL_INT) & keep
    weights = np.where(valid, size, 0)[keep].astype(np.float64)
    data_bytes = np.bincount(key, weights=weights, minlength=n_keys) if valid.any() else None
    table_of_row = np.repeat(np.arange(len(events)), [len(e[0]) for e in events])
    with_bytes = np.bincount(table_of_row[valid], minlength=len(events)) > 0
    parts = []
    for i, (table, kind, category, _, _) in enumerate(events):
        lo, hi = offsets[i] * n_buckets, (offsets[i] + sizes[i]) * n_buckets
        hit = np.flatnonzero(counts[lo:hi])
        metrics = [time[lo:hi][hit], counts[lo:hi][hit].astype(np.float64)]
        if with_bytes[i]:
            metrics.append(data_bytes[lo:hi][hit])
        parts.append(_part(table[NAME], kind, category, hit, n_buckets, metrics))
    return parts


def _dense_keys(key: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, index of each key): all n_keys when that is small (O(n) bincount), else the distinct ones."""
    if n_keys <= 4 * len(key) + 65536:
        return np.arange(n_keys), key
    return np.unique(key, return_inverse=True)


def _step_rows(rows: _Rows, table: StepTable) -> None:
    """Region "step": each kept step's NVTX duration (time) and one visit."""
    steps = table.kept
    n = len(steps[START])
    time = (steps[END] - steps[START]) * NS
    bucket = np.arange(n)
    region = np.zeros(2 * n, np.int64)
    rows.add(
        [STEP_REGION],
        region,
        cat.STEP,
        cat.STEP,
        np.repeat([0, 1], n),
        np.tile(bucket, 2),
        np.concatenate([time, np.ones(n)]),
    )


def _busy_rows(rows: _Rows, table: StepTable, gpu: list[Table]) -> None:
    """Region "gpu busy" (kind "busy", category "step"): per step, the length of the union of all
    GPU activity intervals (kernels, memcpy, memset on any stream), clipped to the step. Unlike a
    sum of durations, overlapping streams count once, so step - busy is the time no GPU work covers."""
    steps = table.kept
    start = np.concatenate([t[START].astype(np.int64, copy=False) for t in gpu])
    end = np.concatenate([t[END].astype(np.int64, copy=False) for t in gpu])
    valid = (end != NULL_INT) & (end > start)
    busy = covered_time(start[valid], end[valid], steps[START], steps[END])
    n = len(steps[START])
    rows.add([BUSY_REGION], np.zeros(n, np.int64), BUSY_KIND, cat.STEP, np.zeros(n, np.int64), np.arange(n), busy * NS)


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
        inside = np.minimum(np.maximum(t - m_start[j], 0), m_end[j] - m_start[j])
        return np.where(i >= 0, before[j] + inside, 0.0)

    return covered_before(hi) - covered_before(lo)


def user_ranges(nvtx, table: StepTable, notes: list[str]) -> dict[str, Table]:
    """NVTX ranges other than the step/epoch marks and MPI ranges, split into nvtx and nccl_nvtx
    (`nvtx`: a Table or DataFrame whose rows are in position order)."""
    nvtx = Table.of(nvtx)
    ranges = is_range(nvtx["eventType"])
    ranges[table.mark_rows] = False
    ranges &= ~nvtx["domain"].flags(cat.is_mpi_domain)  # counted by events.mpi
    picked = nvtx.take(ranges)
    open_ended = int(np.count_nonzero(picked[END] == NULL_INT))
    if open_ended:
        notes.append(
            f"{open_ended} NVTX ranges have no end (still open when capture stopped); counted as visits without time"
        )
    nccl = picked[NAME].flags(lambda n: cat.is_nccl_nvtx(n, "")) | picked["domain"].flags(
        lambda d: cat.is_nccl_nvtx("", d)
    )
    return {"nvtx": picked.take(~nccl), "nccl_nvtx": picked.take(nccl)}
