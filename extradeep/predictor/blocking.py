"""What a blocking call or a stream wait waits for: the GPU ops behind each wake and event edge.

A blocking CUDA call (a synchronisation, a synchronous copy, or an asynchronous copy into pageable
host memory) gets a wake node that waits for the GPU ops it blocked on; a `cudaStreamWaitEvent`
makes the first op launched on its stream afterwards wait for the op its event recorded. Finding
those ops means matching the CUPTI synchronisation and event-record rows against each GPU queue's
launch order, which is its own piece of work apart from how the graph is assembled and finished
(`graph.build_graph` turns the pairs found here into its `blocking` and `event` edges). Times here
are seconds from the run's first event, as in the graph's node table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import (
    CALL_START,
    CORR,
    DST,
    END,
    EVENT_ID,
    IS_GPU,
    KIND,
    NAME,
    QUEUE,
    RANK,
    ROLE,
    SRC,
    START,
    SYNC_TYPE,
)

# CPU and GPU timestamps of one process can disagree by a few microseconds: a blocking call may
# appear to return slightly before the GPU op it waited for ends.
CLOCK_SLACK = 20e-6
BLOCKING_PREFIXES = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaCtxSynchronize",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
    "cudaThreadSynchronize",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
)  # ROCm traces
# Synchronous copies block the caller until their own GPU copy has finished.
BLOCKING_COPY_PREFIXES = (
    "cudaMemcpy_",
    "cudaMemcpy2D_",
    "cudaMemcpy3D_",
    "cudaMemset_",
    "cuMemcpyDtoH_",
    "cuMemcpyHtoD_",
    "cuMemcpy_",
)
# the same calls as Kineto names them (no nsys version suffix such as _v3020)
BLOCKING_COPY_NAMES = tuple(p.rstrip("_") for p in BLOCKING_COPY_PREFIXES) + ("hipMemcpy", "hipMemset")


def is_blocking_copy(name: str) -> bool:
    return name.startswith(BLOCKING_COPY_PREFIXES) or name in BLOCKING_COPY_NAMES


class QueueIndex:
    """Per (rank, GPU queue): node ids in launch order, to find what a sync or wait refers to."""

    def __init__(self, nodes: pd.DataFrame, launch: pd.DataFrame):
        self.launch_time = nodes[START].to_numpy().copy()
        self.launch_time[launch[DST].to_numpy()] = nodes[START].to_numpy()[launch[SRC].to_numpy()]
        self.queues: dict[tuple, np.ndarray] = {}
        gpu = nodes[nodes[IS_GPU] & (nodes[ROLE] == "op")]
        for key, grp in gpu.groupby([RANK, QUEUE], sort=False):
            idx = grp.index.to_numpy()
            self.queues[key] = idx[np.argsort(self.launch_time[idx], kind="stable")]
        self._gpu = gpu[gpu[CORR] >= 0][[RANK, CORR]]
        self._by_corr = None

    def launched_by(self, rank, corr) -> list[int]:
        """The GPU ops a call launched (same rank and correlation id)."""
        if self._by_corr is None:
            groups = self._gpu.groupby([RANK, CORR]).indices
            self._by_corr = {k: self._gpu.index[v].tolist() for k, v in groups.items()}
        return self._by_corr.get((rank, corr), [])

    def last_before(self, rank, queues, t: float) -> list[int]:
        """Per queue: the last op whose launching call started before time t."""
        out = []
        for q in queues:
            idx = self.queues.get((rank, q))
            if idx is not None:
                k = np.searchsorted(self.launch_time[idx], t, side="left") - 1
                if k >= 0:
                    out.append(int(idx[k]))
        return out

    def first_after(self, rank, queue, t: float) -> int | None:
        idx = self.queues.get((rank, queue))
        if idx is None:
            return None
        k = np.searchsorted(self.launch_time[idx], t, side="right")
        return int(idx[k]) if k < len(idx) else None

    def rank_queues(self, rank) -> list:
        return [q for (r, q) in self.queues if r == rank]


class EventIndex:
    """CUDA event records per (rank, eventId), in call order, to find what a wait refers to."""

    def __init__(self, records: pd.DataFrame):
        records = records.sort_values(CALL_START, kind="stable")
        self.call_start = records[CALL_START].to_numpy()
        self.queue = records[QUEUE].to_numpy()
        self.by_event = records.groupby([RANK, EVENT_ID]).indices if len(records) else {}

    def recorded_op(self, index: QueueIndex, rank, event_id, t: float) -> list[int]:
        """The GPU op an event marks: the last op launched on the record's stream before the record."""
        rows = self.by_event.get((rank, event_id))
        if rows is None:
            return []
        k = np.searchsorted(self.call_start[rows], t, side="right") - 1
        if k < 0:
            return []
        row = rows[k]
        return index.last_before(rank, [self.queue[row]], self.call_start[row])


def _waited_ops(events: EventIndex, index: QueueIndex, call: pd.Series, sync, own_copy=False) -> list[int]:
    """GPU ops a blocking call waits for: from its SYNCHRONIZATION row, its own copy (a synchronous
    copy, or one that finished before the call returned), else every stream of the rank."""
    rank, t = call[RANK], call[START]
    if sync is not None and sync[SYNC_TYPE] == 3:
        return index.last_before(rank, [sync[QUEUE]], t)
    if sync is not None and sync[SYNC_TYPE] == 1:
        recorded = events.recorded_op(index, rank, sync[EVENT_ID], t)
        if recorded:
            return recorded  # else no record rows: fall back to every stream, pruned by the caller
    if own_copy or is_blocking_copy(call[NAME]):
        return index.launched_by(rank, call[CORR])
    return index.last_before(rank, index.rank_queues(rank), t)


def add_wakes(nodes: pd.DataFrame, syncs: pd.DataFrame, events: EventIndex, index: QueueIndex):
    """Each blocking call gets a wake node that waits for the GPU ops it blocks on: the node table
    with the wakes appended, and the (src, dst) pairs of their blocking edges.

    Waited ops that ended after the call returned cannot have been waited for; they are dropped,
    which also protects against wrong guesses when the SYNCHRONIZATION table is absent.
    """
    syncs = syncs[syncs[SYNC_TYPE].isin([1, 3, 4])]
    by_corr = {(s.rank, s.corr): s for s in syncs.itertuples(index=False)}
    cpu = nodes[(~nodes[IS_GPU]) & (nodes[KIND] == "runtime")]
    blocking = (
        (cpu[NAME].str.startswith(BLOCKING_PREFIXES + BLOCKING_COPY_PREFIXES) | cpu[NAME].isin(BLOCKING_COPY_NAMES))
        .to_numpy()
        .copy()
    )
    # a sync row marks a blocking call, except for polls such as cudaEventQuery / cudaStreamQuery
    polls = cpu[NAME].str.contains("Query", regex=False).to_numpy()
    blocking |= np.array([k in by_corr for k in zip(cpu[RANK], cpu[CORR])], dtype=bool) & ~polls
    waited_copy = _copy_returned_after_copy(nodes, cpu)
    blocking |= waited_copy
    end = nodes[END].to_numpy()
    wakes, src, dst = [], [], []
    own_copy = dict(zip(cpu.index, waited_copy))
    for i, call in cpu[blocking].iterrows():
        sync = by_corr.get((call[RANK], call[CORR]))
        sync = None if sync is None else pd.Series(sync._asdict())
        waited = [u for u in _waited_ops(events, index, call, sync, own_copy[i]) if end[u] <= call[END] + CLOCK_SLACK]
        if waited:
            wid = len(nodes) + len(wakes)
            wakes.append(call.to_dict() | {"role": "wake", "kind": "wake", "corr": -1})
            src += [i] + waited
            dst += [wid] * (1 + len(waited))
    if wakes:
        attrs = dict(nodes.attrs)
        nodes = pd.concat([nodes, pd.DataFrame(wakes)], ignore_index=True)
        nodes.attrs.update(attrs)
    return nodes, src, dst


def _copy_returned_after_copy(nodes: pd.DataFrame, cpu: pd.DataFrame) -> np.ndarray:
    """Per CPU call: an asynchronous copy call that returned only after its GPU copy had finished.

    CUDA makes `cudaMemcpyAsync` wait for the copy when the host memory is pageable (device to
    pageable host, e.g. `.item()`, `.cpu()`, `.tolist()`): the call then lasts until the stream has
    run everything queued before the copy. Exports do not always say which memory was pageable,
    the timing does: on the real traces every copy that ended before its call returned is a
    device-to-host one (and a few tiny copies on an idle GPU, for which the wait changes nothing).
    No clock slack here: a copy ending after the return was not waited for.
    """
    copies = cpu[NAME].str.contains("memcpy", case=False, regex=False).to_numpy()
    if not copies.any():
        return np.zeros(len(cpu), dtype=bool)
    gpu = nodes[nodes[IS_GPU] & (nodes[ROLE] == "op") & (nodes[CORR] >= 0)]
    last_end = gpu.groupby([RANK, CORR])[END].max()
    key = pd.MultiIndex.from_arrays([cpu[RANK].to_numpy(), cpu[CORR].to_numpy()])
    own_end = last_end.reindex(key).to_numpy()
    with np.errstate(invalid="ignore"):
        return copies & (own_end <= cpu[END].to_numpy())


def event_waits(waits: pd.DataFrame, events: EventIndex, index: QueueIndex) -> tuple[list[int], list[int]]:
    """cudaEventRecord on stream A -> cudaStreamWaitEvent on stream B, from the CUPTI tables: the
    (src, dst) pairs of the event edges (`waits`: the stream-wait rows, `call_start` in seconds)."""
    src, dst = [], []
    if len(waits) and events.by_event:
        for w in waits.itertuples(index=False):
            before = events.recorded_op(index, w.rank, w.event_id, w.call_start)
            after = index.first_after(w.rank, w.queue, w.call_start)
            if before and after is not None and before[0] != after:
                src.append(before[0])
                dst.append(after)
    return src, dst
