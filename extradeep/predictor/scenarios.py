"""The what-if scenarios of `predict`: checked before any work, replayed on the run's graph, and
the notes on what a scenario's answer cannot know.

A scenario changes durations (`whatif.scale_durations`: patterns, categories, `cpu=F`, `ranks=P`
re-costing collectives on the cluster layout, `pmnf.PARAM=V` substituting fitted models) or the
graph itself (`fusion`), then replays it. This is the part of a prediction that asks "what if";
`api.predict` measures and explains the run as it was and hands each scenario here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import (
    EPOCH,
    HI,
    IS_GPU,
    KIND,
    LO,
    NAME,
    PATH,
    PHASE,
    RANK,
    REGION,
    ROLE,
    START,
    STEP,
    STEP_ID,
    WARMUP,
)
from extradeep.errors import InputError
from extradeep.predictor.collectives import collective_kind, fit_alpha_beta, model_time
from extradeep.predictor.graph import OpGraph
from extradeep.predictor.replay import ReplayResult, plan_replay, replay
from extradeep.predictor.trace import RunTrace
from extradeep.predictor.whatif import (
    DEFAULT_STEP_LATENCY,
    CommContext,
    WhatIf,
    change_key,
    fuse_collectives,
    name_mask,
    scale_durations,
)


def comm_context(colls: pd.DataFrame, trace: RunTrace, system=None) -> CommContext:
    """What `ranks=P` re-costs collectives with: the sized alpha fits, the traced ranks and the
    cluster layout (the profiles' node signals, else the system's; none with one GPU per node)."""
    from extradeep.io.placement import empty_placement, resolve_layout, run_gpus_per_node
    from extradeep.system import load_system

    described = None if system is None else load_system(system)
    files = trace.files
    # the placements the replay's frames carry (read on the file's one connection or parse)
    places = {p: trace.placements.get(p) or empty_placement() for p in files[PATH].unique()}
    gpus, source = run_gpus_per_node(files, places)
    layout = {"source": source, "gpus_per_node": gpus}
    resolved = resolve_layout(layout, None if described is None else described.to_dict())
    gpus = resolved["gpus_per_node"]
    return CommContext(
        alpha={k: v.alpha for k, v in fit_alpha_beta(colls).items() if v.sized},
        ranks=int(files[RANK].nunique()),
        gpus_per_node=gpus if gpus and gpus >= 2 else None,
        system=described,
        layout_source=resolved["source"],
    )


def layout_notes(scenarios: list[WhatIf], comm: CommContext) -> list[str]:
    """How `ranks=P` scenarios meet node boundaries, and a warning when the trace never crossed
    one that a scenario crosses and no system file gives the network's links."""
    targets = sorted({int(c.value) for w in scenarios for c in w.changes if c.key == "ranks"})
    if not targets:
        return []
    g = comm.gpus_per_node
    if g is None:
        return [
            "ranks=P: no cluster layout with more than one GPU per node is known (no node signal in the "
            "profiles, no --system), so collectives are re-costed without node boundaries"
        ]
    from extradeep.io.placement import source_name

    source = "the system file" if comm.layout_source == "system" else f"the profiles' {source_name(comm.layout_source)}"
    nodes = ", ".join(f"ranks={p}: {-(-p // g)}" for p in targets)
    notes = [
        f"ranks=P on nodes of {g} GPUs (layout from {source}); the traced run spans {-(-comm.ranks // g)} "
        f"node(s), nodes per scenario: {nodes}"
    ]
    crossing = [p for p in targets if p > g]
    if comm.ranks <= g and crossing and not (comm.system is not None and comm.system.has_links):
        notes.append(
            f"WARNING: the traced run lies inside one node, but ranks={', '.join(map(str, crossing))} "
            "crosses the network, whose cost this trace cannot know: those scenarios assume the node's "
            "links and are too fast if the network is slower. Give --system FILE (or a preset)"
        )
    return notes


# beyond this many times the measured ranks, only the collective cost model speaks for the replay
EXTRAPOLATION_FACTOR = 4


def extrapolation_warnings(scenarios: list[WhatIf], measured: int) -> list[str]:
    """One line per `ranks=P` scenario far beyond the measured run: the replay keeps every rank's
    measured compute and re-costs only the collectives, so waits for stragglers, network contention
    and memory at that scale are not in the answer."""
    out = []
    for scenario in scenarios:
        for c in scenario.changes:
            if c.key == "ranks" and float(c.value) > EXTRAPOLATION_FACTOR * measured:
                out.append(
                    f"what-if {scenario.label!r}: {float(c.value):g} ranks is {float(c.value) / measured:,.0f}x "
                    f"the {measured} rank(s) measured; only the collectives are re-costed (ring/tree model), "
                    "so stragglers, contention and memory limits at that scale are not predicted"
                )
    return out


def unmatched_patterns(scenarios: list[WhatIf], nodes: pd.DataFrame) -> list[str]:
    """One line per kernel:/name: pattern that matches no op of the run (the change would do nothing)."""
    kernels = nodes.loc[nodes[KIND] == "kernel", NAME].drop_duplicates().to_numpy()
    every = nodes[NAME].drop_duplicates().to_numpy()
    out = {}
    for scenario in scenarios:
        for c in scenario.changes:
            pool = kernels if c.key == "kernel" else every if c.key == "name" else None
            if pool is not None and change_key(c) not in out and not name_mask(pool, c.target).any():
                what = "kernel" if c.key == "kernel" else "op"
                out[change_key(c)] = (
                    f"what-if {scenario.label!r}: pattern {c.target!r} matches no {what} "
                    "of this run, so it changes nothing"
                )
    return list(out.values())


def replay_scenario(graph, plan, scenario: WhatIf, comm, models, point, trace) -> ReplayResult:
    changes = scenario.changes
    pmnf = _pmnf_substitution(models, point) if any(c.key == "pmnf" for c in changes) else None
    dur, gap = scale_durations(graph.nodes, graph.dur, graph.gap, changes, comm, pmnf, graph.os_wait)
    fusion = [c.value for c in changes if c.key == "fusion"]
    if not fusion:
        return replay(graph, plan, dur=dur, gap=gap)
    g = OpGraph(**{**graph.__dict__, "dur": dur, "gap": gap})
    step_of = _step_of_nodes(graph, trace)
    fused = fuse_collectives(g, int(fusion[-1]), lambda i: _latency_of(graph.nodes.at[i, NAME], comm), step_of)
    try:
        return replay(fused, plan_replay(fused))
    except ValueError as exc:
        raise InputError(None, f"what-if {scenario.label!r}: tensor fusion is not possible here ({exc})") from None


def _latency_of(name: str, comm: CommContext) -> float:
    """Latency part of one collective's pure time: fitted where sizes were known, else the
    default per-step latency times the ring model's latency steps at the run's ranks."""
    if name in comm.alpha:
        return comm.alpha[name]
    return DEFAULT_STEP_LATENCY * model_time(collective_kind(name), comm.ranks, 1.0, 0.0)


def _step_of_nodes(graph: OpGraph, trace: RunTrace):
    """Step window (by measured start on any rank) that each node falls into, -1 outside."""
    mk = graph.nodes[graph.nodes[ROLE] == "marker"]
    if mk.empty:
        return lambda ids: np.full(len(ids), -1)
    lo = mk[mk[NAME] == "step_start"].groupby(STEP)[START].min().rename_axis(STEP_ID)
    hi = mk[mk[NAME] == "step_end"].groupby(STEP)[START].max().rename_axis(STEP_ID)
    step_no = trace.steps.set_index(STEP_ID)[[WARMUP, EPOCH, PHASE, STEP]]
    windows = pd.DataFrame({LO: lo, HI: hi}).join(step_no)
    windows = windows.groupby([WARMUP, EPOCH, PHASE, STEP]).agg(lo=(LO, "min"), hi=(HI, "max"))
    starts = graph.nodes[START].to_numpy()

    def step_of(ids):
        t = starts[ids]
        out = np.full(len(ids), -1)
        for k, w in enumerate(windows.itertuples(index=False)):
            out[(t >= w.lo) & (t <= w.hi)] = k
        return out

    return step_of


def check_pmnf(scenarios: list[WhatIf], models, point: dict) -> None:
    """pmnf.* what-ifs need models and the run's value of the parameter: say so before any work."""
    params = {c.target for w in scenarios for c in w.changes if c.key == "pmnf"}
    if params and models is None:
        raise InputError(None, "pmnf.* what-ifs need PMNF models (--experiment FILE or models=...)")
    for param in sorted(params - set(point)):
        raise InputError(
            None, f"pmnf.{param}: the run's value of {param!r} is unknown (file names give {sorted(point)})"
        )


def _pmnf_substitution(models, point: dict):
    """Duration change from PMNF models: each GPU op (and collective) of a modeled region scaled by
    model(new point) / model(run's point). CPU calls are left alone: their modeled time includes
    waiting, which the replay derives itself."""
    table = models[models["model"].notna()].drop_duplicates(REGION).set_index(REGION)["model"]

    def substitute(nodes, dur, param, value):
        params = list(table.iloc[0].params) if len(table) and hasattr(table.iloc[0], "params") else [param]
        cur = np.array([[float(point.get(p, 0)) for p in params]])
        new = np.array([[float(value) if p == param else float(point.get(p, 0)) for p in params]])
        dur = dur.copy()
        names = nodes[NAME].to_numpy()
        gpu = nodes[IS_GPU].to_numpy() & nodes[ROLE].isin(["op", "sync"]).to_numpy()
        touched = np.zeros(len(dur), dtype=bool)
        for region, model in table.items():
            now = float(np.ravel(model.predict(cur))[0])
            hit = gpu & (names == region)
            if now > 0 and hit.any():
                dur[hit] *= max(float(np.ravel(model.predict(new))[0]), 0.0) / now
                touched |= hit
        return dur, touched

    return substitute
