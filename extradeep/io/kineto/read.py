"""The per-file stage for Kineto traces: one trace in, the same per-step sums as `read_export` out.

Built on the nsys reader's own pieces (`find_steps`, `step_sums`), so the frame, its attrs, the step
conventions and the assignment rules (GPU work by the start of its launching runtime call, CPU
ranges by their own start, "between" outside steps) are the same for both formats. cpu_op ranges
become regions of kind `cpu_op` (category nvtx); user annotations kind `nvtx` (NCCL's `nccl:*`
annotations `nccl_nvtx`). A CPU-only trace gives the step rows and its CPU ranges.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.io.kineto import tables as kt
from extradeep.io.kineto.load import KinetoTrace, load
from extradeep.io.kineto.placement import trace_placement
from extradeep.io.nsys.read import step_sums, user_ranges
from extradeep.io.nsys.settings import ReaderSettings
from extradeep.io.nsys.steps import find_steps

__all__ = ["read_trace", "trace_tables"]


def read_trace(path, settings=None) -> pd.DataFrame:
    """Per-step sums of one Kineto trace: columns region, kind, category, metric, epoch, phase, step,
    value, as `extradeep.io.nsys.read.read_export`, with the trace's node signals in
    ``attrs["placement"]``. Raises InputError naming the file when unusable."""
    settings = ReaderSettings.from_any(settings)
    trace = load(path)
    try:
        frame = step_sums(trace_tables(trace, settings))
    except InputError as exc:
        raise InputError(path, exc.problem) if exc.source is None else exc from None
    frame.attrs["placement"] = trace_placement(trace)  # its node signals, without a second parse
    return frame


def trace_tables(trace: KinetoTrace, settings: ReaderSettings) -> dict:
    """The dict `step_sums` takes, from a loaded trace."""
    nvtx = kt.nvtx_table(trace)
    try:
        steps = find_steps(nvtx, settings, trace.path)
    except InputError as exc:  # the step finder's words are for nsys exports: say it for PyTorch's profiler
        raise InputError(exc.source, kineto_wording(exc.problem)) from None
    notes = list(trace.notes)
    return {
        "nvtx": nvtx,
        "steps": steps,
        "runtime": kt.runtime_table(trace),
        **kt.gpu_tables(trace, settings.kernel_names),
        "osrt": kt.empty_cpu_table(),
        "library": kt.empty_cpu_table({"library": pd.Series([], dtype=object)}),
        "mpi": kt.empty_cpu_table({"bytes": np.empty(0, np.int64)}),
        "user_ranges": _user_ranges(nvtx, steps, notes),
        "warnings": notes,
    }


NO_RANGES_ADVICE = (
    "no ProfilerStep#N or record_function ranges, so no training steps to measure; profile with "
    "torch.profiler.profile(...) and call prof.step() after each step, or wrap steps in "
    "torch.profiler.record_function('train_step') and give --train-step-pattern"
)


def kineto_wording(problem: str) -> str:
    """A step finder's message for a Kineto trace: PyTorch profiler advice, not nsys's."""
    if "nsys profile" in problem:
        return NO_RANGES_ADVICE
    return problem.replace("NVTX range", "range")


def _user_ranges(nvtx: pd.DataFrame, steps, notes: list[str]) -> dict[str, pd.DataFrame]:
    """User annotations as kind nvtx / nccl_nvtx (as NVTX ranges in nsys), operators as kind cpu_op."""
    ranges = user_ranges(nvtx, steps, notes)
    out = {}
    for kind, frame in ranges.items():
        is_op = (frame["domain"].astype(str) == kt.CPU_OP_DOMAIN).to_numpy()
        out[kind] = frame[~is_op]
        if is_op.any():
            ops = frame[is_op]
            out[kt.CPU_OP_KIND] = pd.concat([out.get(kt.CPU_OP_KIND, ops.iloc[:0]), ops])
    return out
