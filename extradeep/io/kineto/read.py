"""The per-file stage for Kineto traces: one trace in, the same per-step sums as `read_export` out.

Built on the shared base (`extradeep.io.steps.find_steps`, `extradeep.io.sums.step_sums`), as the nsys
reader is, so the frame, its attrs, the step
conventions and the assignment rules (GPU work by the start of its launching runtime call, CPU
ranges by their own start, "between" outside steps) are the same for both formats. cpu_op ranges
become regions of kind `cpu_op` (category nvtx); user annotations kind `nvtx` (NCCL's `nccl:*`
annotations `nccl_nvtx`). A CPU-only trace gives the step rows and its CPU ranges.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.io.frames import ProfileRead, Table, concat_tables
from extradeep.io.kineto import tables as kt
from extradeep.io.kineto.load import KinetoTrace, load
from extradeep.io.kineto.placement import trace_placement
from extradeep.io.settings import ReaderSettings
from extradeep.io.steps import find_steps
from extradeep.io.sums import step_sums, user_ranges

__all__ = ["read_trace", "read_trace_once", "trace_tables"]


def read_trace(path, settings=None) -> pd.DataFrame:
    """Per-step sums of one Kineto trace: columns region, kind, category, metric, epoch, phase, step,
    value, as `extradeep.io.nsys.read.read_export`. Raises InputError naming the file when unusable."""
    return read_trace_once(path, settings).frame


def read_trace_once(path, settings=None, *, replay: bool = False) -> ProfileRead:
    """One pass over one trace (loaded and parsed once): its per-step sums and, with `replay`, the
    replay's frames (`extradeep.io.kineto.replay.replay_frames`). The placement is the trace's node
    signals (`extradeep.io.kineto.placement.trace_placement`), read from the trace already parsed."""
    settings = ReaderSettings.from_any(settings)
    trace = load(path)
    try:
        frame = step_sums(trace_tables(trace, settings))
        frames = None
        if replay:
            from extradeep.io.kineto.replay import replay_frames

            frames = replay_frames(trace, path, settings)
        return ProfileRead(frame, trace_placement(trace), frames)
    except InputError as exc:
        raise InputError(path, exc.problem) if exc.source is None else exc from None


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


def _user_ranges(nvtx: pd.DataFrame, steps, notes: list[str]) -> dict[str, Table]:
    """User annotations as kind nvtx / nccl_nvtx (as NVTX ranges in nsys), operators as kind cpu_op."""
    ranges = user_ranges(nvtx, steps, notes)
    out: dict[str, Table] = {}
    for kind, table in ranges.items():
        is_op = table["domain"].flags(lambda d: d == kt.CPU_OP_DOMAIN)
        out[kind] = table.take(~is_op)
        if is_op.any():
            ops = table.take(is_op)
            out[kt.CPU_OP_KIND] = concat_tables([out[kt.CPU_OP_KIND], ops]) if kt.CPU_OP_KIND in out else ops
    return out
