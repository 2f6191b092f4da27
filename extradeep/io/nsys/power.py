"""GPU board power from an Nsight Systems export's GPU metric samples.

`nsys profile --gpu-metrics-devices=...` writes its samples to ``GPU_METRICS`` (typeId, timestamp,
metricId, value) with the metric names in ``TARGET_INFO_GPU_METRICS`` (typeId, metricId,
metricName). A metric whose name says power (case-insensitive "power", in W unless the name says
mW) is read as board power; the mean over samples within the steps' windows is the GPU's draw
while training. No real export in ../shared carries these tables (none was profiled with GPU
metrics), so the layout follows NVIDIA's SQLite schema reference; a file without them has no
power, and callers fall back on the system file's figure.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from extradeep.columns import END, START, WATTS
from extradeep.io.nsys.schema import schema_of
from extradeep.io.sqlite import fetch_all

SAMPLES, NAMES = "GPU_METRICS", "TARGET_INFO_GPU_METRICS"
POWER_NAME = re.compile(r"power", re.I)
MILLIWATT = re.compile(r"\bmW\b|milliwatt", re.I)


def power_samples(conn) -> pd.DataFrame:
    """Columns device (typeId), timestamp (ns), watts: every power sample of the export (empty
    when it recorded none)."""
    empty = pd.DataFrame({"device": [], "timestamp": [], WATTS: []})
    sch = schema_of(conn)
    if not (sch.has(SAMPLES) and sch.has(NAMES)):
        return empty
    metrics = [
        (type_id, metric_id, 1e-3 if MILLIWATT.search(name) else 1.0)
        for type_id, metric_id, name in fetch_all(conn, f"SELECT typeId, metricId, metricName FROM {NAMES}")
        if name and POWER_NAME.search(str(name))
    ]
    frames = []
    for type_id, metric_id, scale in dict.fromkeys(metrics):
        rows = fetch_all(
            conn,
            f"SELECT timestamp, value FROM {SAMPLES} WHERE typeId = ? AND metricId = ? AND timestamp IS NOT NULL",
            (type_id, metric_id),
        )
        if rows:
            values = np.array(rows, dtype=np.float64)
            frames.append(pd.DataFrame({"device": type_id, "timestamp": values[:, 0], WATTS: values[:, 1] * scale}))
    return pd.concat(frames, ignore_index=True) if frames else empty


def mean_power(samples: pd.DataFrame, windows: pd.DataFrame) -> tuple[float, int] | None:
    """(mean watts, samples used) over the samples inside any [start, end) of ``windows`` (all
    samples when there are no windows); per device first, then the mean over devices. None when no
    sample falls inside or a value is not a finite, non-negative number of watts."""
    if samples.empty:
        return None
    t = samples["timestamp"].to_numpy(float)
    inside = np.ones(len(t), bool)
    if len(windows):
        inside = np.zeros(len(t), bool)
        for lo, hi in windows[[START, END]].to_numpy(float):
            inside |= (t >= lo) & (t < hi)
    chosen = samples[inside]
    if chosen.empty or not (np.isfinite(chosen[WATTS]) & (chosen[WATTS] >= 0)).all():
        return None
    return float(chosen.groupby("device")[WATTS].mean().mean()), int(len(chosen))
