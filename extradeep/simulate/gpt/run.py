"""Simulate one GPT training run (all ranks, or one rank per pipeline stage) and read its timeline.

`simulate_run` builds every rank's steps into one causal graph and solves it. Without noise, ranks
that differ only in their tensor- or data-parallel coordinate do exactly the same thing, so the
truth of a layout at 64 to 512 GPUs needs one rank per pipeline stage only (``ranks="stages"``):
their collectives over the other ranks take the pure time the topology gives, as they would with
every rank present. `RankTimeline` is one rank's records with times in ns, for the writers and the
truth alike.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from extradeep.simulate.gpt.config import GPU, GPTModel, ParallelLayout
from extradeep.simulate.gpt.costs import Costs
from extradeep.simulate.gpt.dag import Graph
from extradeep.simulate.gpt.issue import RankIssuer, Records
from extradeep.simulate.gpt.program import StepProgram
from extradeep.system import System

T0_NS = 1e9


@dataclass
class SimulatedRun:
    """A solved run: the graph, the records, and what was simulated."""

    model: GPTModel
    layout: ParallelLayout
    gpu: GPU
    system: System
    ranks: list[int]
    steps: int
    graph: Graph
    records: Records
    costs: Costs

    def timeline(self, rank: int) -> RankTimeline:
        return RankTimeline.of(self, rank)

    def records_of(self, rank: int) -> Records:
        """The records of one rank (split once for all ranks: the writers ask for every rank)."""
        if not hasattr(self, "_split"):
            split: dict[int, Records] = {r: Records() for r in self.ranks}
            for kind in ("gpu", "runtime", "ranges", "memory", "syncs", "steps"):
                for row in getattr(self.records, kind):
                    getattr(split[row[0]], kind).append(row)
            self._split = split
        return self._split[rank]


def simulate_run(
    model: GPTModel,
    layout: ParallelLayout,
    gpu: GPU,
    system: System,
    *,
    steps: int = 4,
    ranks="all",
    noise=(0.0, 0.0, 0.0),
    seed: int = 0,
    rep: int = 1,
    warmup_factor: float = 1.3,
    algorithm: str = "auto",
) -> SimulatedRun:
    """Build and solve `steps` training steps of `ranks` ("all", "stages" or a list of ranks).
    ``noise`` = lognormal sigma per kernel instance, per rank and per repetition."""
    layout.check(model)
    costs = Costs(model, gpu, layout, system, algorithm)
    if ranks == "all":
        ranks = list(range(layout.world))
    elif ranks == "stages":
        ranks = [layout.rank_of(0, 0, s) for s in range(layout.pp)]
    with _gc_paused():
        return _build(model, layout, gpu, system, costs, steps, ranks, noise, seed, rep, warmup_factor)


def _build(model, layout, gpu, system, costs, steps, ranks, noise, seed, rep, warmup_factor) -> SimulatedRun:
    sigma_instance, sigma_rank, sigma_rep = noise
    rep_factor = float(np.exp(sigma_rep * np.random.default_rng([seed, rep, 1 << 20]).standard_normal()))
    graph, records = Graph(), Records()
    issuers, programs = {}, {}
    for rank in ranks:
        rng = np.random.default_rng([seed, rep, rank])
        factor = float(np.exp(sigma_rank * rng.standard_normal())) * rep_factor
        issuers[rank] = RankIssuer(graph, records, rank, rng, sigma_instance, factor)
        programs[rank] = StepProgram(model, layout, costs, rank)
    for step in range(steps):
        for rank in ranks:
            issuers[rank].scale = warmup_factor if step == 0 else 1.0
            programs[rank].run_step(issuers[rank], step)
    graph.solve(T0_NS)
    return SimulatedRun(model, layout, gpu, system, list(ranks), steps, graph, records, costs)


@contextmanager
def _gc_paused():
    """The graph holds millions of small lists; the cyclic collector would rescan them over and over
    (measured: half the time of a 16-rank run) while none of them can form a cycle."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass
class RankTimeline:
    """One rank's records with solved times (ns), as lists of dicts ready for a writer."""

    rank: int
    gpu: list[dict]
    runtime: list[dict]
    ranges: list[dict]
    memory: list[dict]
    syncs: list[dict]
    steps: list[dict]

    @classmethod
    def of(cls, run: SimulatedRun, rank: int) -> RankTimeline:
        g, rec = run.graph, run.records_of(rank)
        start, end = g.start.tolist(), g.end.tolist()  # plain floats: indexing an array per record took seconds
        gpu = [
            {
                "stream": sid,
                "kind": kind,
                "key": key,
                "part": part,
                "start": float(start[s]),
                "end": float(end[e]),
                "corr": corr,
                "thread": slot,
                "comm": comm,
                "bytes": nbytes,
            }
            for r, sid, kind, key, part, s, e, corr, slot, comm, nbytes in rec.gpu
            if r == rank
        ]
        runtime = [
            {"thread": slot, "name": name, "start": float(end[n] - ns), "end": float(end[n]), "corr": corr}
            for r, slot, name, n, corr, ns in rec.runtime
            if r == rank
        ]
        ranges = [
            {
                "thread": slot,
                "text": text,
                "domain": domain,
                "start": float(start[s]),
                "end": float(end[e]),
                "payload": payload,
                "kind": kind,
            }
            for r, slot, text, domain, s, e, payload, kind in rec.ranges
            if r == rank
        ]
        memory = _memory(rec.memory, rank, start, end)
        syncs = [
            {
                "type": kind,
                "stream": sid,
                "start": float(start[n]),
                "end": float(end[n]),
                "corr": corr,
                "event": event,
                "record_corr": record_corr,
                "record_stream": record_stream,
            }
            for r, kind, sid, n, corr, event, record_corr, record_stream in rec.syncs
            if r == rank
        ]
        steps = [{"step": k, "start": float(start[s]), "end": float(end[e])} for r, k, s, e in rec.steps if r == rank]
        return cls(rank, gpu, runtime, ranges, memory, syncs, steps)


def _memory(records: list, rank: int, start: list, end: list) -> list[dict]:
    """Allocation events of a rank in time order with the running total (frees before allocations
    at the same instant, as a freed block is reused)."""
    rows = [
        (float(start[n] if at == "start" else end[n]), delta, label)
        for r, n, at, delta, label in records
        if r == rank and delta
    ]
    rows.sort(key=lambda x: (x[0], x[1] > 0))
    total, out = 0.0, []
    for t, delta, label in rows:
        total += delta
        out.append({"time": t, "delta": delta, "total": total, "label": label})
    return out
