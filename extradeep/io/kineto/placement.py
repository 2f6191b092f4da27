"""Every node signal a PyTorch profiler (Kineto) trace carries, as one placement (extradeep.io.placement).

A trace records, at its top level, ``distributedInfo`` (``rank``, ``world_size``; newer PyTorch
also its process groups, which name no node) and ``deviceProperties``: the GPUs the process could
see, which is the node's GPUs unless ``CUDA_VISIBLE_DEVICES`` narrowed them (no UUIDs). Its GPU
events carry the device in ``args.device`` (else their ``pid``). Traces that went through Meta's
job tooling also name the machine (``host_name``, as in the HTA test trace on a V100 node); a
``hostname`` key is read the same way. There is no export host: a trace is written where it ran.
"""

from __future__ import annotations

from extradeep.io.kineto.load import KinetoTrace, load
from extradeep.io.placement import empty_placement

HOST_KEYS = ("host_name", "hostname")


def trace_placement(trace: KinetoTrace) -> dict:
    """The placement of one loaded trace (keys of :data:`extradeep.io.placement.PLACEMENT_COLUMNS`)."""
    out = empty_placement()
    for key in HOST_KEYS:
        value = trace.meta.get(key)
        if isinstance(value, str) and value.strip():
            out["host"], out["host_from"] = value.strip(), f"Kineto {key}"
            break
    out["node_gpus"] = len(trace.devices) or None
    kernels = trace.gpu["device"] if len(trace.gpu) else None
    if kernels is not None:
        counts = kernels[kernels >= 0].value_counts()
        out["device"] = int(counts.index[0]) if len(counts) else None
    out["recorded_rank"], out["world_size"] = trace.rank, trace.world_size
    return out


def read_placement(path) -> dict:
    """The placement of the trace at ``path`` (reads the whole trace; the per-file reader keeps the
    placement of the trace it loads in `ProfileRead.placement` instead)."""
    return trace_placement(load(path))
