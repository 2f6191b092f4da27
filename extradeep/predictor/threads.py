"""Which CPU threads of a rank run one sequential program: the main thread and PyTorch's autograd thread.

PyTorch runs the backward pass of CUDA tensors on an engine thread of its own while the thread that
called `backward()` blocks until it finishes. Seen as two independent threads, the main thread's
step holds a long gap during the backward (counted as its CPU time) and the engine thread's first
call of each backward waits since the previous step's backward. They are one sequential flow of
control, so the graph orders their calls as one queue (HolisticTraceAnalysis merges the two
threads' call stacks the same way) and the critical path owners nest the engine's operators inside
the main thread's annotation (`## backward ##`).

The engine thread is recognised by its `autograd::engine::evaluate_function` operator ranges, the
main thread by the step marks (else most runtime calls). The threads are merged only when they
take turns: their calls interleave at most a few times per step, as a blocking `backward()` makes
them do.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import IS_GPU, NAME, QUEUE, RANK, START

AUTOGRAD_PREFIX = "autograd::engine::evaluate_function"
# switches between the two threads' calls, in start order, allowed per step (or per 1000 calls
# without step marks) before they are taken for threads that really run at the same time
MAX_SWITCHES_PER_STEP = 8


def merged_threads(trace) -> dict[tuple, str]:
    """(rank, queue) of an autograd engine thread -> the queue of the main thread it continues."""
    ranges, ops = trace.ranges, trace.ops
    if ranges.empty or NAME not in ranges:
        return {}
    names = ranges[NAME].astype(str)
    engine = ranges[names.str.startswith(AUTOGRAD_PREFIX).to_numpy()]
    out = {}
    for rank, grp in engine.groupby(RANK):
        worker = grp[QUEUE].value_counts().idxmax()
        main = _main_thread(trace, ops, rank, worker)
        if main is None or main == worker:
            continue
        calls = ops[(ops[RANK] == rank) & ~ops[IS_GPU] & ops[QUEUE].isin([main, worker])]
        if _take_turns(calls, worker, _steps_of(trace, rank)):
            out[(rank, worker)] = main
    return out


def _main_thread(trace, ops: pd.DataFrame, rank, worker) -> str | None:
    steps = trace.steps
    marked = steps.loc[steps[RANK] == rank, QUEUE] if len(steps) else pd.Series([], dtype=object)
    if len(marked):
        return str(marked.value_counts().idxmax())
    calls = ops[(ops[RANK] == rank) & ~ops[IS_GPU] & (ops[QUEUE] != worker)]
    return str(calls[QUEUE].value_counts().idxmax()) if len(calls) else None


def _steps_of(trace, rank) -> int:
    steps = trace.steps
    return int((steps[RANK] == rank).sum()) if len(steps) else 0


def _take_turns(calls: pd.DataFrame, worker: str, steps: int) -> bool:
    """True when the two threads' calls alternate in a few long runs rather than interleaving."""
    if calls.empty:
        return False
    is_worker = (calls.sort_values(START, kind="stable")[QUEUE] == worker).to_numpy()
    switches = int(np.count_nonzero(is_worker[1:] != is_worker[:-1]))
    allowed = MAX_SWITCHES_PER_STEP * max(steps, len(is_worker) / 1000.0, 1.0)
    return switches <= allowed


def queue_groups(nodes: pd.DataFrame, merged: dict[tuple, str]) -> np.ndarray:
    """Per node, the queue whose order it follows: its own, or the main thread's for an engine thread."""
    queue = nodes[QUEUE].to_numpy(dtype=object).copy()
    for (rank, worker), main in merged.items():
        queue[(nodes[RANK].to_numpy() == rank) & (queue == worker)] = main
    return queue
