"""The shape of the tables every reader hands to the shared base, whatever the file format.

Each format's reader (`extradeep.io.nsys`, `extradeep.io.kineto`) turns its file into the same tables:
integer-nanosecond `start`/`end`, names as pandas Categoricals, `NULL_INT` where a value is unknown,
and NVTX-like CPU ranges typed by the NVTX event ids below. The step finder (`extradeep.io.steps`) and
the per-step sums (`extradeep.io.sums`) read only these, so they serve every format unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

NULL_INT = np.iinfo(np.int64).min  # an integer the file leaves NULL (or a column an older version lacks)

# NVTX event types (nsys ENUM_NSYS_EVENT_TYPE, stable across every version seen); other formats write
# their CPU ranges as push/pop ranges
NVTX_MARK = 34
NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTX_RANGE_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND)

# the NVTX table's integer columns, in order; then name, domain, category and the integer payloads
NVTX_COLUMNS = ["start", "end", "eventType", "rangeId", "globalTid", "pid", "tid", "domainId", "categoryId"]
NVTX_PAYLOADS = ("uint64Value", "int64Value")  # NCCL's ranges carry the message size in uint64Value
CPU_COLUMNS = ["start", "end", "globalTid", "pid", "tid"]  # calls on CPU threads (runtime, OS, libraries)


class Names:
    """A text column as codes into categories, like a pandas Categorical without its cost: building
    one costs more than reading a small export's table, and the readers only need the codes.

    `codes` (int64; -1 = missing) index `categories` (an object array of distinct strings)."""

    __slots__ = ("codes", "categories")

    def __init__(self, codes: np.ndarray, categories):
        self.codes = np.asarray(codes, dtype=np.int64)
        self.categories = np.asarray(categories, dtype=object)

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def of(cls, values) -> Names:
        """Names of a Categorical (or a Series of one), of Names, or of plain values (factorized)."""
        if isinstance(values, Names):
            return values
        cat = values.cat if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype) else None
        if cat is not None or isinstance(values, pd.Categorical):
            source = cat if cat is not None else values
            return cls(np.asarray(source.codes, dtype=np.int64), np.asarray(source.categories, dtype=object))
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        return cls(codes, uniques)

    def take(self, rows) -> Names:
        return Names(self.codes[rows], self.categories)

    def flags(self, predicate) -> np.ndarray:
        """`predicate` of each row's text, evaluated once per distinct text that a row uses (missing
        rows: False). The rows of a table taken from a larger one (the NVTX ranges other than the
        step marks) share its categories, often thousands of step names that none of them uses."""
        n = len(self.categories)
        if n > 64:  # a bincount costs less than calling the predicate on unused texts
            used = np.flatnonzero(np.bincount(self.codes[self.codes >= 0], minlength=n))
            flags = np.zeros(n + 1, dtype=bool)
            flags[used] = [bool(predicate(str(c))) for c in self.categories[used]]
            return flags[self.codes]
        flags = np.fromiter((bool(predicate(str(c))) for c in self.categories), dtype=bool, count=n)
        return np.append(flags, False)[self.codes]

    def used(self) -> Names:
        """Without the categories no row uses (their order kept), as `remove_unused_categories`."""
        used = np.bincount(self.codes[self.codes >= 0], minlength=len(self.categories)) > 0
        remap = np.append(np.cumsum(used) - 1, -1)
        return Names(remap[self.codes], self.categories[used])

    def values(self) -> np.ndarray:
        """The text of each row (object array; None where missing)."""
        return np.append(self.categories, None)[self.codes]

    def categorical(self) -> pd.Categorical:
        return pd.Categorical.from_codes(self.codes, categories=self.categories, validate=False)


class Table:
    """One table's columns as NumPy arrays (text columns as `Names`), all of one length: the readers'
    internal form. `frame()` gives the DataFrame the public readers return."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: dict, n: int | None = None):
        self.columns = dict(columns)
        self.n = n if n is not None else len(next(iter(self.columns.values()))) if self.columns else 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, name: str):
        return self.columns[name]

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def take(self, rows) -> Table:
        """The rows `rows` (a boolean mask or positions) of every column."""
        rows = np.asarray(rows)
        n = int(np.count_nonzero(rows)) if rows.dtype == bool else len(rows)
        return Table({name: column.take(rows) if isinstance(column, Names) else column[rows]
                      for name, column in self.columns.items()}, n)  # fmt: skip

    def with_columns(self, **columns) -> Table:
        return Table({**self.columns, **columns}, self.n)

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame (text columns as Categoricals), columns in their order."""
        frame = pd.DataFrame({k: v for k, v in self.columns.items() if not isinstance(v, Names)}, copy=False)
        if frame.shape[1] == 0:
            frame = pd.DataFrame(index=pd.RangeIndex(self.n))
        for name, column in self.columns.items():
            if isinstance(column, Names):
                frame[name] = column.categorical()
        return frame[list(self.columns)]

    @classmethod
    def of(cls, frame) -> Table:
        """A Table of a Table or of a DataFrame (categorical columns become Names)."""
        if isinstance(frame, Table):
            return frame
        columns = {}
        for name in frame.columns:
            series = frame[name]
            columns[name] = Names.of(series) if isinstance(series.dtype, pd.CategoricalDtype) else series.to_numpy()
        return cls(columns, len(frame))


def concat_names(parts: list[Names]) -> Names:
    """One Names of several, categories in order of first appearance (as pandas' union_categoricals)."""
    if len(parts) == 1:
        return parts[0]
    categories = np.concatenate([p.categories for p in parts]) if parts else np.empty(0, object)
    remap, uniq = pd.factorize(categories)
    codes, offset = [], 0
    for part in parts:
        codes.append(np.append(remap[offset : offset + len(part.categories)], -1)[part.codes])
        offset += len(part.categories)
    return Names(np.concatenate(codes) if codes else np.empty(0, np.int64), uniq)


def concat_tables(parts: list[Table]) -> Table:
    """The rows of `parts` one after the other (columns of the first part; text columns merged)."""
    if len(parts) == 1:
        return parts[0]
    columns = {}
    for name, first in parts[0].columns.items():
        pieces = [p[name] for p in parts]
        columns[name] = concat_names(pieces) if isinstance(first, Names) else np.concatenate(pieces)
    return Table(columns, sum(p.n for p in parts))


def per_category(values: pd.Series, predicate) -> np.ndarray:
    """`predicate` of each value of a categorical Series, evaluated once per distinct value."""
    codes = np.asarray(values.cat.codes)
    names = values.cat.categories.tolist()  # iterating the Index itself is several times slower
    flags = np.fromiter((bool(predicate(str(c))) for c in names), dtype=bool, count=len(names))
    return np.append(flags, False)[codes]  # code -1 (missing) picks the trailing False


def is_range(event_type: np.ndarray) -> np.ndarray:
    """Rows that are NVTX ranges (push/pop or start/end), not marks or registrations."""
    return (event_type == NVTX_PUSHPOP) | (event_type == NVTX_STARTEND)


def unique_names(codes: np.ndarray, names: np.ndarray) -> Names:
    """Names from codes into `names`, merging equal names (categories must be unique). Hash-based and
    unsorted: sorting a million distinct NVTX names would dominate reading."""
    names = np.asarray(names, dtype=object)
    if len(set(names)) == len(names):  # usually: then the codes stand as they are
        return Names(codes if len(codes) else np.empty(0, np.int64), names)
    remap, uniq_names = pd.factorize(names)
    return Names(remap[codes] if len(codes) else np.empty(0, np.int64), uniq_names)


def categorical(codes: np.ndarray, names: np.ndarray) -> pd.Categorical:
    """`unique_names` as a pandas Categorical."""
    return unique_names(codes, names).categorical()


@dataclass
class ProfileRead:
    """What one pass over one profile gives every later step, so none of them opens the file again.

    `frame`: the per-step sums (`extradeep.io.sums.step_sums`); `placement`: where the rank ran (host,
    device, GPU UUID, the node's GPUs; `extradeep.io.nsys.layout.read_placement`, None where the file
    does not say); `replay`: the frames the exposure replay builds its dependency graph from
    (`extradeep.io.read.read_replay_frames`), only when they were asked for."""

    frame: pd.DataFrame
    placement: dict
    replay: dict | None = None
