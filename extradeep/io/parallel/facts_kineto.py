"""ProfileFacts of a PyTorch profiler (Kineto) trace.

Kineto records what a layout needs most directly: `distributedInfo` (rank, world size and, in newer
PyTorch, `pg_config`: every process group of the rank with its members and description) and, on
every NCCL kernel, the collective, its message size and the process group it ran in. Older traces
lack the group fields; then a kernel's collective comes from its name or from the `nccl:*`
annotation around its launch, and its stream stands for its group.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from extradeep.columns import BYTES, CORR, END, KIND, LAUNCH, NAME, RESERVED, START, STREAM, THREAD
from extradeep.errors import InputError
from extradeep.io.kineto import tables as kt
from extradeep.io.kineto.load import load
from extradeep.io.kineto.read import kineto_wording
from extradeep.io.parallel.facts import (
    Communicator,
    ProfileFacts,
    collective_of,
    matches,
    step_windows,
    thread_roles,
    whole_buffer,
)
from extradeep.io.settings import ReaderSettings
from extradeep.io.steps import find_steps

CUDA_DEVICE_TYPE = 1
# cpu_op names worth keeping as markers (the rest are aten operators)
_CPU_OP_RX = re.compile("Checkpoint|checkpoint|FSDP|DeepSpeed|Pipe|recompute")


def kineto_facts(path, settings=None, trace=None) -> ProfileFacts:
    """The facts of one Kineto trace (``trace``: the file already read, so that it is not parsed again)."""
    settings = ReaderSettings.from_any(settings)
    trace = load(path) if trace is None else trace
    facts = ProfileFacts(str(path), "kineto", rank=trace.rank, world=trace.world_size)
    facts.rank_source = "Kineto distributedInfo.rank" if trace.rank is not None else ""
    facts.world_source = "Kineto distributedInfo.world_size" if trace.world_size is not None else ""
    devices = trace.devices
    if devices:
        facts.gpu_name = str(devices[0].get("name")) if devices[0].get("name") else None
        memory = devices[0].get("totalGlobalMem")
        facts.gpu_memory = int(memory) if isinstance(memory, (int, float)) else None
    _communicators(facts, trace.distributed)
    nvtx = kt.nvtx_table(trace)
    try:
        facts.steps = step_windows(find_steps(nvtx, settings, path))
    except InputError as exc:
        facts.notes.append(f"no training steps: {kineto_wording(exc.problem)}")  # PyTorch advice, not nsys
    cpu = trace.cpu
    keep = (cpu["cat"] == "user_annotation").to_numpy() | matches(cpu[NAME], _CPU_OP_RX)
    facts.markers = Counter(cpu.loc[keep, "name"].astype(str))
    facts.kernels = _kernels(trace, nvtx)
    _memory(facts, trace.memory)
    return facts


def _communicators(facts: ProfileFacts, dist: dict) -> None:
    configs = dist.get("pg_config")
    for cfg in configs if isinstance(configs, list) else []:
        if not isinstance(cfg, dict) or cfg.get("pg_name") is None:
            continue
        ranks = cfg.get("ranks")
        members = (
            [int(r) for r in ranks] if isinstance(ranks, list) and all(isinstance(r, int) for r in ranks) else None
        )
        size = cfg.get("pg_size") if isinstance(cfg.get("pg_size"), int) else (len(members) if members else None)
        backend = str(cfg.get("backend_config", ""))
        desc = str(cfg.get("pg_desc") or "")
        if "nccl" not in backend and "cuda" in backend:  # gloo-only CPU groups carry no GPU traffic
            desc = desc or "gloo"
        index = members.index(facts.rank) if members and facts.rank in members else None
        key = str(cfg["pg_name"])
        facts.comms[key] = Communicator(key, members, size, index, desc, f"Kineto pg_config ({backend or 'backend ?'})")


def _kernels(trace, nvtx: pd.DataFrame) -> pd.DataFrame:
    gpu, runtime = trace.gpu, trace.runtime
    launch = runtime.drop_duplicates(CORR).set_index(CORR)
    start = gpu[CORR].map(launch[START])
    tid = gpu[CORR].map(launch["tid"])
    steps = nvtx[nvtx[NAME].astype(str).str.startswith("ProfilerStep")]
    main_tid = steps["tid"].iloc[0] if len(steps) else (runtime["tid"].mode().iloc[0] if len(runtime) else -1)
    names = gpu[NAME].astype(str)
    is_comm = names.str.lower().str.startswith(("nccl", "rccl"))
    collective = pd.Series(
        [
            collective_of(c) if c else (collective_of(n) if k else "")
            for c, n, k in zip(gpu["collective"], names, is_comm)
        ],
        index=gpu.index,
        dtype=object,
    )
    _from_annotations(collective, is_comm, start, trace)
    comm = pd.Series("", index=gpu.index, dtype=object)
    comm[is_comm] = [
        name if name else (f"ranks {ranks}" if ranks else f"stream {stream}")
        for name, ranks, stream in zip(
            gpu.loc[is_comm, "pg_name"], gpu.loc[is_comm, "pg_ranks"], gpu.loc[is_comm, "stream"]
        )
    ]
    nbytes = np.where(is_comm, gpu["msg_bytes"], gpu[BYTES])
    gathers = (collective == "allgather").to_numpy()  # In msg nelems is the per-rank input
    nbytes[gathers] = [whole_buffer("allgather", b, s) for b, s in zip(nbytes[gathers], gpu["group_size"][gathers])]
    return pd.DataFrame(
        {
            START: gpu[START].to_numpy(),
            END: gpu[END].to_numpy(),
            LAUNCH: start.fillna(-1).astype(np.int64).to_numpy(),
            THREAD: thread_roles(tid, main_tid).to_numpy(),
            KIND: gpu[KIND].to_numpy(),
            NAME: names.to_numpy(),
            STREAM: gpu[STREAM].to_numpy(),
            "collective": collective.to_numpy(),
            "comm": comm.to_numpy(),
            BYTES: nbytes.astype(np.int64),
        }
    )


def _from_annotations(collective: pd.Series, is_comm: pd.Series, launch: pd.Series, trace) -> None:
    """A SendRecv kernel without collective metadata inside an `nccl:all_to_all` annotation is an
    all-to-all (NCCL implements it with send/recv): take the collective from the annotation."""
    ann = trace.cpu[(trace.cpu["cat"] == "user_annotation") & trace.cpu[NAME].str.startswith("nccl:")]
    if ann.empty:
        return
    ann = ann.sort_values(START)
    starts, ends, names = ann[START].to_numpy(), ann[END].to_numpy(), ann[NAME].astype(str).to_numpy()
    for i in collective.index[is_comm & (collective.isin(["sendrecv", ""]))]:
        t = launch.get(i)
        if t is None or pd.isna(t):
            continue
        k = np.searchsorted(starts, t, side="right") - 1
        if k >= 0 and ends[k] >= t:
            kind = collective_of(names[k].removeprefix("nccl:"))
            if kind:
                collective[i] = kind


def _memory(facts: ProfileFacts, memory: pd.DataFrame) -> None:
    cuda = memory[memory["device_type"] == CUDA_DEVICE_TYPE] if len(memory) else memory
    if len(cuda):
        facts.memory = {
            "allocated": int(cuda["allocated"].max()),
            "reserved": int(cuda[RESERVED].max()) if (cuda[RESERVED] >= 0).any() else None,
            "source": f"Kineto [memory] events ({len(cuda)}): largest Total Allocated / Total Reserved",
        }
