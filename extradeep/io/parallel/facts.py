"""What one profile says about the parallel layout of its run, in a form shared by both formats.

`ProfileFacts` holds, for one profiled process (rank): its rank and world size where recorded, the
communicators (process groups) it knows with their members, size and description, its kernels with
the thread that launched them and, for NCCL kernels, the collective and the communicator they ran
in, the measured steps, the names of its NVTX ranges / annotations, and its recorded memory peak.
The format readers (`facts_nsys`, `facts_kineto`) fill it; `infer` reads the layout from it and
`parts` the per-part times.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.columns import END, PHASE, START, STEP

MAIN_THREAD, AUTOGRAD_THREAD, OTHER_THREAD = "main", "autograd", "other"
KERNEL_COLUMNS = ("start", "end", "launch", "thread", "kind", "name", "stream", "collective", "comm", "bytes")
P2P = ("send", "recv", "sendrecv", "coalesced")
# collective names as PyTorch writes them (record_param_comms / kernel args) or NCCL names its
# kernels and calls -> one vocabulary
_COLLECTIVES = [
    (re.compile(r"all_?to_?all", re.I), "alltoall"),
    (re.compile(r"reduce_?scatter", re.I), "reducescatter"),
    (re.compile(r"all_?gather", re.I), "allgather"),
    (re.compile(r"all_?reduce", re.I), "allreduce"),
    (re.compile(r"broadcast", re.I), "broadcast"),
    (re.compile(r"sendrecv", re.I), "sendrecv"),
    (re.compile(r"^(nccl)?send$", re.I), "send"),
    (re.compile(r"^(nccl)?recv$", re.I), "recv"),
    (re.compile(r"coalesced", re.I), "coalesced"),
    (re.compile(r"^(nccl)?reduce$|Kernel_Reduce_", re.I), "reduce"),
]


def collective_of(name: str) -> str:
    """`ncclDevKernel_AllReduce_Sum_bf16_RING_LL` / `_reduce_scatter_base` / `ncclSend` -> allreduce /
    reducescatter / send; "" when the name names no collective."""
    text = str(name).split("(")[0]
    for pattern, kind in _COLLECTIVES:
        if pattern.search(text):
            return kind
    return ""


@dataclass
class Communicator:
    """A process group / NCCL communicator as one profile knows it."""

    key: str  # pg_name, NCCL communicator id, or "stream N" when only the NCCL stream tells it apart
    members: list[int] | None = None  # global ranks, when recorded
    size: int | None = None
    index: int | None = None  # this rank's place in it
    desc: str = ""  # pg_desc / DeviceMesh name; "" when none
    source: str = ""

    def label(self) -> str:
        what = self.desc if self.desc and self.desc != "undefined" else f"group {self.key}"
        return what + (f" ({self.size} ranks)" if self.size else "")


@dataclass
class ProfileFacts:
    """Facts of one profiled process; see the module docstring. Times in integer ns."""

    path: str
    format: str
    rank: int | None = None
    world: int | None = None
    rank_source: str = ""
    world_source: str = ""
    processes: int = 1
    gpu_name: str | None = None
    gpu_memory: int | None = None
    kernels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(KERNEL_COLUMNS)))
    steps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["step", "start", "end"]))
    markers: Counter = field(default_factory=Counter)
    comms: dict[str, Communicator] = field(default_factory=dict)
    memory: dict = field(default_factory=dict)  # allocated / reserved peak bytes and their source
    power: dict = field(default_factory=dict)  # mean GPU board power in the steps (watts, samples, source)
    notes: list[str] = field(default_factory=list)
    cache: dict = field(default_factory=dict, repr=False)  # derived tables, computed once per profile

    def has_marker(self, pattern: str) -> str | None:
        """The first marker name matching a regular expression (case-insensitive), or None."""
        rx = re.compile(pattern, re.I)
        return next((name for name in self.markers if rx.search(name)), None)


def matches(names: pd.Series, pattern) -> np.ndarray:
    """Which names match a compiled regular expression, testing each distinct name once."""
    values = names.astype(str).to_numpy()
    distinct, codes = np.unique(values, return_inverse=True)
    hits = np.array([bool(pattern.search(name)) for name in distinct], dtype=bool)
    return hits[codes] if len(values) else np.zeros(0, dtype=bool)


def whole_buffer(collective: str, nbytes, size) -> int:
    """A collective's whole buffer from a per-rank message size: an all-gather's output or a
    reduce-scatter's input is the per-rank size times the group size."""
    if collective in ("allgather", "reducescatter") and size and size > 0:
        return int(nbytes) * int(size)
    return int(nbytes)


def thread_roles(launch_tid: pd.Series, main_tid) -> pd.Series:
    """main for the thread that holds the step marks, autograd for another thread that launches
    kernels (PyTorch's autograd engine runs the backward pass on its own thread per device)."""
    out = pd.Series(OTHER_THREAD, index=launch_tid.index, dtype=object)
    out[launch_tid == main_tid] = MAIN_THREAD
    others = launch_tid[(launch_tid != main_tid) & launch_tid.notna()]
    if len(others):
        busiest = others.value_counts().index[0]
        out[launch_tid == busiest] = AUTOGRAD_THREAD
    return out


def step_windows(step_table) -> pd.DataFrame:
    """The kept (measured) training steps of a `find_steps` result: step, start, end (ns)."""
    kept = step_table.steps
    kept = kept[kept[PHASE] == "train"]
    return pd.DataFrame({STEP: range(len(kept)), START: kept[START].to_numpy(), END: kept[END].to_numpy()})
