"""What every profile format's summary holds alike: the most frequent ranges, the step marks found,
kernels per device.

`extradeep.io.nsys.inspect` and `extradeep.io.kineto.inspect` build their dicts with these; the
lines `extradeep inspect` prints for them are `extradeep.report.inspect_text`'s.
"""

from __future__ import annotations

import pandas as pd

from extradeep.columns import CATEGORY, EPOCH, NAME, PHASE
from extradeep.errors import InputError
from extradeep.io.frames import NVTX_RANGE_TYPES
from extradeep.io.settings import ReaderSettings
from extradeep.io.steps import find_steps


def top_ranges(nvtx: pd.DataFrame, top: int) -> list[list]:
    ranges = nvtx[nvtx["eventType"].isin(NVTX_RANGE_TYPES).to_numpy()]
    counts = ranges[NAME].value_counts().head(top)
    return [[str(name), int(n)] for name, n in counts.items() if n > 0]


def step_summary(nvtx: pd.DataFrame, settings: ReaderSettings, path) -> dict:
    try:
        table = find_steps(nvtx, settings, path)
    except InputError as exc:
        return {"found": False, "problem": exc.problem}
    kept = table.steps
    return {
        "found": True,
        "convention": table.convention,
        "epochs": len(set(kept[EPOCH]) | set(table.warmup[EPOCH])),
        "measured_epochs": int(kept[EPOCH].nunique()),
        "train_steps": int((kept[PHASE] == "train").sum()),
        "val_steps": int((kept[PHASE] == "val").sum()),
        "warmup_steps": len(table.warmup),
        "warnings": list(table.warnings),
    }


def kernels_by_device(kernels: pd.DataFrame) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    if kernels.empty:
        return out
    grouped = kernels.groupby(["deviceId", CATEGORY], observed=True).size()
    for (device, category), n in grouped.items():
        out.setdefault(str(int(device)), {})[str(category)] = int(n)
    return out
