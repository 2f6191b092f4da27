"""What one Kineto trace holds: rank and world size, GPUs, event counts by trace category and by
extradeep category, step marks, the most frequent CPU ranges.

`inspect_trace(path, settings)` returns a JSON-ready dict with the keys of
`extradeep.io.nsys.inspect.inspect_export` that apply (shared: `extradeep.io.inspect`) (path, size, gpus, steps, counts_by_category,
kernels_by_device, top_ranges, notes) plus format, platform, rank, world_size, backend,
schema_version, trace_categories (events per `cat` as written in the file, flows as
`flow:<cat>`), nccl_kernels and devices (deviceProperties).
"""

from __future__ import annotations

from pathlib import Path

from extradeep.columns import CATEGORY
from extradeep.errors import InputError
from extradeep.io import categories as cat
from extradeep.io.inspect import kernels_by_device, step_summary, top_ranges
from extradeep.io.kineto import tables as kt
from extradeep.io.kineto.load import load
from extradeep.io.kineto.placement import trace_placement
from extradeep.io.settings import ReaderSettings


def inspect_trace(path, settings=None, top: int = 10, trace=None) -> dict:
    """Summary of one Kineto trace as a dict; InputError (naming the file) when it cannot be read.
    ``trace``: the file already read (`load`), so that it is not parsed again."""
    settings = ReaderSettings.from_any(settings)
    trace = load(path) if trace is None else trace
    try:
        nvtx = kt.nvtx_table(trace)
        gpu = kt.gpu_tables(trace, settings.kernel_names)
        kernels = gpu["kernels"]
        nccl = int((kernels[CATEGORY].astype(str) == cat.COMMUNICATION).sum())
        info = {
            "path": str(path),
            "size": Path(path).stat().st_size,
            "format": "kineto",
            "platform": trace.platform,
            "schema_version": trace.meta.get("schemaVersion"),
            "rank": trace.rank,
            "world_size": trace.world_size,
            "backend": trace.distributed.get("backend"),
            "gpus": [{"id": _whole(d.get("id")), "name": str(d.get("name", "?"))} for d in trace.devices],
            "trace_categories": {str(k): int(v) for k, v in sorted(trace.counts.items(), key=lambda kv: str(kv[0]))},
            "counts_by_category": {
                cat.COMPUTATION: len(kernels) - nccl,
                cat.COMMUNICATION: nccl,
                cat.MEMORY: len(gpu["memcpy"]) + len(gpu["memset"]),
                cat.CUDA_API: len(trace.runtime),
                cat.NVTX: int((trace.cpu["cat"] == "user_annotation").sum()),
                kt.CPU_OP_KIND: int((trace.cpu["cat"] == "cpu_op").sum()),
            },
            "nccl_kernels": nccl,
            "kernels_by_device": kernels_by_device(kernels),
            "top_ranges": top_ranges(nvtx[(nvtx["domain"].astype(str) != kt.CPU_OP_DOMAIN).to_numpy()], top),
            "steps": _kineto_steps(nvtx, settings, path),
            "devices": trace.devices,
            "placement": trace_placement(trace),
            "notes": list(trace.notes),
        }
        return info
    except InputError as exc:
        raise InputError(path, exc.problem) if exc.source is None else exc from None


def _kineto_steps(nvtx, settings, path) -> dict:
    steps = step_summary(nvtx, settings, path)
    if not steps["found"]:  # PyTorch profiler advice, not nsys's
        from extradeep.io.kineto.read import kineto_wording

        steps["problem"] = kineto_wording(steps["problem"])
    return steps


def _whole(value):
    return int(value) if isinstance(value, (int, float)) and float(value).is_integer() else value
