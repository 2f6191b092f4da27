"""Causal scheduling of a multi-rank run as a graph of operations, solved by longest path.

Every CPU call and GPU operation is a node with a duration and dependencies (another node's end plus
a lag: the launch latency between a runtime call and its kernel, the wake-up after a synchronize).
Nodes on one queue (a rank's CPU thread or one CUDA stream) run in the order they were issued. A
collective or a point-to-point transfer is a *join* node: it depends on the arrival of every
participating kernel and lasts the pure transfer time; each participant's kernel ends when all the
joins it takes part in have ended. So a kernel that arrives early spins until its peers arrive, as
NCCL kernels do, and pipeline bubbles and overlap emerge from the dependencies alone. The same rules
as :mod:`extradeep.simulate.engine` (launch latency, stream order, events, collectives end at the
slowest arrival plus the pure time), for ranks that do different things at the same time.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from extradeep.columns import WAIT
from extradeep.errors import InputError


class Graph:
    """Nodes with durations (ns) and dependencies; `solve` gives every node's start and end."""

    def __init__(self):
        self.dur: list[float] = []
        self.deps: list[list] = []  # [(source node, lag ns), ...]
        self.part: list[int] = []  # index into `parts` (what the node's time counts as)
        self.parts: list[str] = []
        self._part_ids: dict[str, int] = {}
        self.tail: dict = {}  # queue key -> node whose end frees the queue
        self.joins: dict = {}  # join key -> node
        self.start = self.end = self.bind = None

    def part_id(self, name: str) -> int:
        if name not in self._part_ids:
            self._part_ids[name] = len(self.parts)
            self.parts.append(name)
        return self._part_ids[name]

    def node(self, dur: float, deps=(), part: str = "wait") -> int:
        """A node; deps are node ids or (node id, lag) pairs (None entries are skipped)."""
        self.dur.append(dur)
        self.deps.append([d if d.__class__ is tuple else (d, 0.0) for d in deps if d is not None])
        part_id = self._part_ids.get(part)
        self.part.append(self.part_id(part) if part_id is None else part_id)
        return len(self.dur) - 1

    def op(self, queue, dur: float, deps=(), part: str = "wait") -> int:
        """An operation on a queue: it starts after the queue's previous operation ends."""
        prev = self.tail.get(queue)
        node = self.node(dur, (*deps, prev) if deps else (prev,), part)
        self.tail[queue] = node
        return node

    def join(self, key, dur: float, part: str) -> int:
        """The join node of a collective or transfer (created by its first participant)."""
        node = self.joins.get(key)
        if node is None:
            node = self.joins[key] = self.node(dur, (), part)
        else:
            self.dur[node] = max(self.dur[node], float(dur))
        return node

    def comm(self, queue, joins: list[tuple], deps=(), part: str = "wait") -> tuple[int, int]:
        """A communication kernel on a queue taking part in joins [(key, pure ns, part), ...]:
        (arrival node, end node). It arrives when its queue and deps allow and ends with its joins."""
        arrive = self.node(0.0, [*deps, self.tail.get(queue)], part)
        ends = []
        for key, dur, join_part in joins:
            j = self.join(key, dur, join_part)
            self.deps[j].append((arrive, 0.0))
            ends.append(j)
        end = self.node(0.0, [arrive, *ends], part)
        self.tail[queue] = end
        return arrive, end

    def solve(self, t0: float = 0.0) -> None:
        """Longest path from t0 (Kahn's order); raises on a cycle (a deadlocked program)."""
        n = len(self.dur)
        succ: list[list] = [[] for _ in range(n)]
        indeg = [0] * n
        for i, deps in enumerate(self.deps):
            indeg[i] = len(deps)
            for src, lag in deps:
                succ[src].append((i, lag))
        start = [t0] * n
        end = [0.0] * n
        bind = [-1] * n
        dur = self.dur
        ready = deque(i for i in range(n) if indeg[i] == 0)
        done = 0
        while ready:
            i = ready.popleft()
            done += 1
            e = end[i] = start[i] + dur[i]
            for j, lag in succ[i]:
                t = e + lag  # never below t0: every time is measured from it
                if bind[j] < 0 or t > start[j]:
                    start[j], bind[j] = t, i
                indeg[j] -= 1
                if indeg[j] == 0:
                    ready.append(j)
        if done != n:
            raise InputError(None, f"simulated program deadlocks: {n - done} of {n} operations never become ready")
        self.start, self.end, self.bind = np.array(start), np.array(end), np.array(bind)

    def critical_parts(self, sink: int, since: float) -> dict[str, float]:
        """Time of the path that ends at `sink`, walked back until `since`, by part: each node's own
        duration counts as its part, a lag or gap before it as "wait". Sums to end[sink] - since."""
        out: dict[str, float] = {}
        node = sink
        while node >= 0 and self.end[node] > since:
            s, e = self.start[node], self.end[node]
            own = e - max(s, since)
            if own > 0:
                name = self.parts[self.part[node]]
                out[name] = out.get(name, 0.0) + own
            src = self.bind[node]
            below = self.end[src] if src >= 0 else since
            gap = max(s, since) - max(below, since)
            if gap > 0:
                out[WAIT] = out.get("wait", 0.0) + gap
            node = src
        return out
