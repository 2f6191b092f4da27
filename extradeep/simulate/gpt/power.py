"""The board power a simulated GPU draws, and its samples as Nsight Systems records GPU metrics.

A GPU draws ``idle_power`` with nothing running, ``busy_power`` while a compute kernel runs, and
in between while only NCCL kernels run (they keep a few SMs and the links busy): idle plus
COMM_ACTIVITY of the difference. Power is the mean of that activity over a window. The samples go
into the ``GPU_METRICS`` / ``TARGET_INFO_GPU_METRICS`` tables of NVIDIA's SQLite schema reference,
one integer watt value per sampling period (no collected export in ../shared has these tables, so the
layout follows the reference, not a copy of a real file).
"""

from __future__ import annotations

import numpy as np

from extradeep.columns import END, START
from extradeep.simulate.gpt.config import GPU

COMM_ACTIVITY = 0.35  # share of the busy-idle difference an NCCL kernel alone draws
SAMPLE_PERIOD_NS = 1_000_000.0  # 1 kHz, the order of `nsys --gpu-metrics-frequency` defaults
POWER_METRIC = "Power [W]"
METRICS_DDL = {
    "TARGET_INFO_GPU_METRICS": """CREATE TABLE TARGET_INFO_GPU_METRICS (
    typeId                      INTEGER   NOT NULL,                    -- REFERENCES GENERIC_EVENT_TYPES(typeId)
    sourceId                    INTEGER   NOT NULL,                    -- REFERENCES GENERIC_EVENT_SOURCES(sourceId)
    typeName                    TEXT      NOT NULL,                    -- Name of event type.
    metricId                    INTEGER   NOT NULL,                    -- Id of metric in event; not assumed to be stable.
    metricName                  TEXT      NOT NULL                     -- Definitive name of metric.
)""",
    "GPU_METRICS": """CREATE TABLE GPU_METRICS (
    typeId                      INTEGER   NOT NULL,                    -- REFERENCES TARGET_INFO_GPU_METRICS(typeId)
    timestamp                   INTEGER,                               -- Event timestamp (ns).
    metricId                    INTEGER   NOT NULL,                    -- REFERENCES TARGET_INFO_GPU_METRICS(metricId)
    value                       INTEGER   NOT NULL                     -- Counter data value
)""",
}


def activity_steps(gpu_rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(edges, level): the activity (0, COMM_ACTIVITY or 1) between consecutive edges (ns)."""
    edges = sorted({r[START] for r in gpu_rows} | {r[END] for r in gpu_rows})
    if len(edges) < 2:
        return np.asarray(edges, float), np.zeros(max(len(edges) - 1, 0))
    edges = np.asarray(edges, float)
    lo = np.searchsorted(edges, np.asarray([r[START] for r in gpu_rows], float))
    hi = np.searchsorted(edges, np.asarray([r[END] for r in gpu_rows], float))
    is_comm = np.asarray([bool(r["comm"]) for r in gpu_rows])
    compute, comm = _running(lo[~is_comm], hi[~is_comm], len(edges)), _running(lo[is_comm], hi[is_comm], len(edges))
    return edges, np.where(compute > 0, 1.0, np.where(comm > 0, COMM_ACTIVITY, 0.0))


def _running(lo: np.ndarray, hi: np.ndarray, n_edges: int) -> np.ndarray:
    """How many of the intervals [edges[lo], edges[hi]) cover each of the n_edges - 1 gaps between
    edges: +1 where one starts, -1 where it ends, summed up (a slice += 1 per row took seconds)."""
    delta = np.bincount(lo, minlength=n_edges) - np.bincount(hi, minlength=n_edges)
    return np.cumsum(delta)[:-1]


def mean_activity(edges: np.ndarray, level: np.ndarray, lo: float, hi: float) -> float:
    """The time-weighted mean activity over [lo, hi]."""
    if hi <= lo or len(edges) < 2:
        return 0.0
    clipped = np.clip(edges, lo, hi)
    return float(np.sum(np.diff(clipped) * level) / (hi - lo))


def mean_power(gpu: GPU, gpu_rows: list[dict], lo: float, hi: float) -> float:
    """Watts the GPU draws on average over [lo, hi] (ns)."""
    edges, level = activity_steps(gpu_rows)
    return gpu.idle_power + (gpu.busy_power - gpu.idle_power) * mean_activity(edges, level, lo, hi)


def power_samples(gpu: GPU, gpu_rows: list[dict], lo: float, hi: float, period: float = SAMPLE_PERIOD_NS):
    """(timestamps at each period's end, whole watts over the period) from lo to hi."""
    edges, level = activity_steps(gpu_rows)
    stamps = np.arange(lo + period, hi + period / 2, period)
    activity = np.array([mean_activity(edges, level, t - period, t) for t in stamps])
    return stamps, np.rint(gpu.idle_power + (gpu.busy_power - gpu.idle_power) * activity).astype(int)
