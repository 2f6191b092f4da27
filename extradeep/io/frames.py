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


def per_category(values: pd.Series, predicate) -> np.ndarray:
    """`predicate` of each value of a categorical Series, evaluated once per distinct value."""
    codes = np.asarray(values.cat.codes)
    names = values.cat.categories.tolist()  # iterating the Index itself is several times slower
    flags = np.fromiter((bool(predicate(str(c))) for c in names), dtype=bool, count=len(names))
    return np.append(flags, False)[codes]  # code -1 (missing) picks the trailing False


def categorical(codes: np.ndarray, names: np.ndarray) -> pd.Categorical:
    """Categorical from codes into `names`, merging equal names (categories must be unique).
    Hash-based and unsorted: sorting a million distinct NVTX names would dominate reading."""
    remap, uniq_names = pd.factorize(np.asarray(names, dtype=object))
    return pd.Categorical.from_codes(remap[codes], categories=uniq_names)


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
