"""The format-neutral part of the frames a replay builds its dependency graph from.

Each format's reader (`extradeep.io.nsys.replay`, `extradeep.io.kineto.replay`) turns one file into
raw frames keyed by process id; the steps of each process come from the shared step finder here, so
both formats mark steps the same way as the per-step sums do.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import END, NAME, PID, QUEUE, START
from extradeep.errors import InputError
from extradeep.io.frames import NULL_INT, NVTX_RANGE_TYPES
from extradeep.io.steps import find_steps

# what every reader's raw frames hold (`extradeep.predictor.trace.load_trace` assembles them)
FRAME_KEYS = ("gpu", "runtime", "syncs", "records", "steps", "ranges", "notes", "os_calls", "mpi", "pids", "placement")


def process_steps(
    nv: pd.DataFrame, path, pids, runtime: pd.DataFrame, settings=None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Kept NVTX steps per process (`extradeep.io.steps`), with the thread that marked them, and
    the other NVTX ranges (framework ops, for the T1-T3 overheads).

    An export without step marks gives no steps: the replay then compares whole-trace spans.
    """
    parts, others, notes = [], [], []
    for pid in pids:
        mine = nv[nv[PID] == pid].reset_index(drop=True)
        is_range = mine["eventType"].isin(NVTX_RANGE_TYPES).to_numpy() & (mine[END] != NULL_INT).to_numpy()
        try:
            table = find_steps(mine, settings, source=path)
        except InputError as exc:
            table = None
            if not exc.problem.startswith(("no step marks", "no NVTX ranges")):
                notes.append(f"{path} (pid {pid}): step marks not used ({exc.problem})")
        used = np.zeros(len(mine), dtype=bool)
        if table is not None:
            used[table.mark_rows] = True
        op = mine[is_range & ~used]
        others.append(
            pd.DataFrame(
                {
                    PID: pid,
                    QUEUE: "cpu/t" + op["tid"].astype(str),
                    NAME: op[NAME].astype(str),
                    START: op[START],
                    END: op[END],
                }
            )
        )
        if table is None:
            continue
        rows = mine.iloc[table.mark_rows]
        tid_at = dict(zip(rows[START], rows["tid"]))
        main = main_thread(runtime[runtime[PID] == pid], pid)
        st = pd.concat([table.steps.assign(warmup=False), table.warmup.assign(warmup=True)], ignore_index=True)
        st = st.assign(pid=pid)
        st[QUEUE] = ["cpu/t" + str(tid_at.get(t, main)) for t in st[START]]
        parts.append(st)
    cols = ["pid", "warmup", "epoch", "phase", "step", "start", "end", "queue"]
    steps = pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
    return steps, pd.concat(others, ignore_index=True), notes


def main_thread(runtime: pd.DataFrame, pid: int) -> int:
    return int(runtime["tid"].value_counts().idxmax()) if len(runtime) else int(pid)


def frames_of(gpu, runtime, syncs, records, steps, ranges, notes, os_calls, mpi, pids, placement) -> dict:
    """The replay's frames of one file as every reader returns them (`FRAME_KEYS`), the GPU and
    runtime calls' correlation ids named `corr`."""
    return {
        "gpu": gpu.rename(columns={"correlationId": "corr"}),
        "runtime": runtime.rename(columns={"correlationId": "corr"}),
        "syncs": syncs,
        "records": records,
        "steps": steps,
        "ranges": ranges,
        "notes": notes,
        "os_calls": os_calls,
        "mpi": mpi,
        "pids": pids,
        "placement": placement,
    }
