"""What-if changes to a replay graph: parsed from short text specs, combinable, each re-replayed.

Spec grammar (one change per item; items joined with ';' form ONE scenario whose changes apply
together; a key (with its pattern) may appear once per scenario; no expression is ever evaluated):

    kernel:PATTERN=F      scale GPU kernels whose name matches PATTERN (fnmatch, case-insensitive)
    name:PATTERN=F        scale any op (CPU call or GPU activity) by name
    category:CAT=F        scale a category: computation, communication, memory, cuda_api
    comm.bandwidth=F      collectives get F times the bandwidth (their volume term / F)
    comm.latency=F        collectives' latency term x F
    comm.alpha=S          per-step latency in seconds where message sizes are unknown (default 5e-6)
    comm.algorithm=ring|tree|hierarchical   cost model used when the number of ranks changes
    ranks=P               collectives re-costed for P ranks: on the run's cluster layout (exports or
                          --system) with the alpha-beta terms of extradeep.system per link class,
                          else with the flat ring/tree models of collectives.py
    fusion=K              tensor fusion: K consecutive collectives of one name become one
    cpu=F                 CPU overhead (gaps between calls and the calls themselves) x F
    pmnf.PARAM=V          durations from the empirical PMNF models evaluated at PARAM=V
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.columns import CATEGORY, COLL, DST, IS_GPU, KIND, LAG, NAME, NODE, ROLE, SRC, START, STEP, VALUE
from extradeep.errors import InputError
from extradeep.io.categories import is_nccl_kernel
from extradeep.predictor.collectives import collective_kind, model_time, rescale_collective
from extradeep.system import ALGORITHMS as SYSTEM_ALGORITHMS
from extradeep.system import System, cost_features
from extradeep.system import collective_kind as system_kind

CATEGORIES = ("computation", "communication", "memory", "cuda_api")
DEFAULT_STEP_LATENCY = 5e-6
_ITEM = re.compile(r"^\s*(?P<key>[A-Za-z_][\w.]*)(?::(?P<target>[^=]+))?\s*=\s*(?P<value>[^=]+?)\s*$")
_SCALE_KEYS = ("kernel", "name", "category")  # the what-if spec's words (kernel:gemm*=0.5), not columns
_FACTOR_KEYS = ("comm.bandwidth", "comm.latency", "cpu")


@dataclass
class Change:
    """One parsed what-if item."""

    key: str  # kernel, name, category, comm.bandwidth, ..., pmnf
    target: str | None  # pattern, category or PMNF parameter
    value: float | str


@dataclass
class WhatIf:
    """A scenario: its label and its changes (applied together)."""

    label: str
    changes: list[Change] = field(default_factory=list)


def change_key(change: Change) -> str:
    """What a change sets: `cpu`, `kernel:*gemm*` (patterns compared case-insensitively), `pmnf.ranks`."""
    if change.key == "pmnf":
        return f"pmnf.{change.target}"
    return change.key if change.target is None else f"{change.key}:{change.target.lower()}"


def parse_what_if(text: str) -> WhatIf:
    """Parse one scenario spec such as `kernel:gemm*=0.5; comm.bandwidth=2` (InputError if invalid).

    A key given twice in one scenario is refused: `cpu=0.5; cpu=2` or a pattern repeated would
    otherwise compound (x0.5 twice) or silently let one value win."""
    items = [item.strip() for item in text.split(";") if item.strip()]
    changes = [_parse_item(item, text) for item in items]
    if not changes:
        raise InputError(None, f"what-if {text!r} is empty")
    seen = {}
    for item, change in zip(items, changes):
        key = change_key(change)
        if key in seen:
            raise InputError(
                None,
                f"what-if {text!r}: {key} is given twice ({seen[key]!r}, {item!r}); give each key once per scenario",
            )
        seen[key] = item
    return WhatIf(label=text.strip(), changes=changes)


def combine_what_ifs(scenarios: list[WhatIf]) -> WhatIf:
    """One scenario with the changes of all `scenarios`: an item repeated with the same value is
    kept once, a key given different values is an InputError (no change is applied twice)."""
    merged: dict[str, tuple[str, Change]] = {}
    for scenario in scenarios:
        for item, change in zip(_items(scenario), scenario.changes):
            key = change_key(change)
            if key in merged and merged[key][1].value != change.value:
                raise InputError(
                    None, f"cannot combine the what-ifs: {key} has two values ({merged[key][0]!r} and {item!r})"
                )
            merged.setdefault(key, (item, change))
    return WhatIf(label="; ".join(item for item, _ in merged.values()), changes=[c for _, c in merged.values()])


def _items(scenario: WhatIf) -> list[str]:
    """Item texts of a scenario parsed from its label (one per change), or rebuilt from the changes."""
    items = [item.strip() for item in scenario.label.split(";") if item.strip()]
    if len(items) == len(scenario.changes):
        return items
    return [f"{change_key(c)}={c.value}" for c in scenario.changes]


def _parse_item(item: str, text: str) -> Change:
    m = _ITEM.match(item)
    if not m:
        raise InputError(None, f"what-if item {item.strip()!r} in {text!r} is not KEY=VALUE or KIND:PATTERN=VALUE")
    key, target, raw = m["key"], m["target"], m[VALUE]
    if key.startswith("pmnf."):
        return Change("pmnf", key[5:], _number(raw, item, positive=True))
    if key in _SCALE_KEYS:
        if not target:
            raise InputError(None, f"what-if {item.strip()!r}: {key} needs a pattern, e.g. {key}:gemm*=0.5")
        if key == "category" and target.strip() not in CATEGORIES:
            raise InputError(None, f"what-if {item.strip()!r}: category must be one of {', '.join(CATEGORIES)}")
        return Change(key, target.strip(), _number(raw, item, positive=False))
    if target:
        raise InputError(None, f"what-if {item.strip()!r}: {key} takes no pattern")
    if key == "comm.algorithm":
        if raw not in SYSTEM_ALGORITHMS:
            raise InputError(None, f"what-if {item.strip()!r}: algorithm must be one of {', '.join(SYSTEM_ALGORITHMS)}")
        return Change(key, None, raw)
    if key in ("ranks", "fusion"):
        value = _number(raw, item, positive=True)
        if value != int(value) or value < (2 if key == "fusion" else 1):
            raise InputError(
                None,
                f"what-if {item.strip()!r}: {key} must be a whole number" + (" >= 2" if key == "fusion" else " >= 1"),
            )
        return Change(key, None, int(value))
    if key in _FACTOR_KEYS or key == "comm.alpha":
        return Change(key, None, _number(raw, item, positive=key != "cpu" and key != "comm.alpha"))
    raise InputError(None, f"what-if {item.strip()!r}: unknown key {key!r} (see `extradeep predict --help`)")


def _number(raw: str, item: str, positive: bool) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InputError(None, f"what-if {item.strip()!r}: {raw!r} is not a number") from None
    if not np.isfinite(value) or value < 0 or (positive and value == 0):
        raise InputError(
            None, f"what-if {item.strip()!r}: the value must be a finite number " + ("> 0" if positive else ">= 0")
        )
    return value


def name_mask(names: np.ndarray, pattern: str) -> np.ndarray:
    """Names matching a case-insensitive fnmatch pattern, evaluated once per distinct name."""
    codes, uniq = pd.factorize(pd.Series(names, dtype=object))
    hit = np.array([fnmatch.fnmatchcase(str(u).lower(), pattern.lower()) for u in uniq], dtype=bool)
    return hit[codes] if len(uniq) else np.zeros(len(names), dtype=bool)


@dataclass
class CommContext:
    """What collective re-costing needs: alpha fits per name, the measured number of ranks and,
    when known, the cluster layout (GPUs per node) and the system's links."""

    alpha: dict  # name -> fitted latency intercept (s) where sizes were known
    ranks: int
    gpus_per_node: int | None = None  # None: no layout known (every rank its own node)
    system: System | None = None  # the --system description (its links, when it has them)
    layout_source: str = "none"  # where the layout came from (extradeep.io.placement.SOURCES)


def scale_durations(
    nodes: pd.DataFrame,
    dur: np.ndarray,
    gap: np.ndarray,
    changes: list[Change],
    comm: CommContext,
    pmnf=None,
    os_wait=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Durations and gaps after the duration-type changes (everything but fusion). `os_wait`: the
    part of each gap spent in OS runtime calls, which `cpu=F` does not scale."""
    dur, gap = dur.copy(), gap.copy()
    os_wait = np.zeros(len(gap)) if os_wait is None else np.minimum(os_wait, gap)
    names = nodes[NAME].to_numpy()
    role, kind = nodes[ROLE].to_numpy(), nodes[KIND].to_numpy()
    category, is_gpu = nodes[CATEGORY].to_numpy(), nodes[IS_GPU].to_numpy()
    work = (role == "op") | (role == "sync") | (role == "wake")
    modeled = np.zeros(len(dur), dtype=bool)
    for c in changes:
        if c.key == "kernel":
            dur[work & (kind == "kernel") & name_mask(names, c.target)] *= c.value
        elif c.key == "name":
            dur[work & name_mask(names, c.target)] *= c.value
        elif c.key == "category":
            dur[work & (category == c.target)] *= c.value
        elif c.key == "cpu":
            cpu = ~is_gpu & (role != "sync")
            dur[cpu] *= c.value
            gap[cpu] = os_wait[cpu] + (gap[cpu] - os_wait[cpu]) * c.value
        elif c.key == "pmnf" and pmnf is not None:
            dur, touched = pmnf(nodes, dur, c.target, c.value)
            modeled |= touched
    comm_changes = {c.key: c.value for c in changes if c.key.startswith("comm.") or c.key == "ranks"}
    if comm_changes:
        # collectives that have an empirical model already moved to the new point: not twice
        dur = np.where(modeled, dur, _recost_collectives(nodes, dur, comm_changes, comm))
    return dur, gap


def _recost_collectives(nodes, dur, changes: dict, comm: CommContext) -> np.ndarray:
    """New pure durations of collectives (virtual nodes and unmatched NCCL kernels)."""
    role, names = nodes[ROLE].to_numpy(), nodes[NAME].to_numpy()
    single = (role == "op") & (nodes[CATEGORY].to_numpy() == "communication") & (nodes[COLL].to_numpy() < 0)
    algorithm = changes.get("comm.algorithm", "ring")
    p_to = int(changes.get("ranks", comm.ranks))
    step_latency = changes.get("comm.alpha", DEFAULT_STEP_LATENCY)
    latency, bandwidth = changes.get("comm.latency", 1.0), changes.get("comm.bandwidth", 1.0)
    flat = "ring" if algorithm == "hierarchical" else algorithm  # without nodes: a ring over all ranks
    out = dur.copy()
    for i in np.flatnonzero((role == "sync") | single):
        kind = collective_kind(str(names[i]))
        alpha = step_latency * model_time(kind, comm.ranks, 1.0, 0.0, flat)
        if "comm.alpha" not in changes:
            alpha = comm.alpha.get(names[i], alpha)
        on_layout = system_kind(str(names[i])) if comm.gpus_per_node else None
        if on_layout is not None:
            out[i] = rescale_on_layout(
                on_layout,
                dur[i],
                alpha,
                comm.ranks,
                p_to,
                algorithm,
                comm.gpus_per_node,
                comm.system,
                latency,
                bandwidth,
            )
        else:
            out[i] = rescale_collective(kind, dur[i], alpha, comm.ranks, p_to, flat, latency, bandwidth)
    return out


def rescale_on_layout(
    kind: str,
    pure: float,
    alpha: float,
    p_from: int,
    p_to: int,
    algorithm: str,
    gpus_per_node: int,
    system: System | None = None,
    latency: float = 1.0,
    bandwidth: float = 1.0,
) -> float:
    """Pure duration at p_to ranks of a collective (``kind`` as :data:`extradeep.system.COLLECTIVES`)
    measured as ``pure`` at p_from ranks on nodes of ``gpus_per_node`` GPUs, with the step and volume
    counts per link class of :func:`extradeep.system.cost_features`, so a ring that leaves the node
    pays the network. With a system's links the latencies and inverse bandwidths per class are the
    system's and the message size is what makes them add up to ``pure`` at p_from; without them
    both classes share the measured per-step latency (``alpha``: the latency part of ``pure``) and
    bandwidth: the network is unknown (the caller warns)."""
    at_from = cost_features(kind, algorithm, [p_from], 1.0, gpus_per_node)[0]
    at_to = cost_features(kind, algorithm, [p_to], 1.0, gpus_per_node)[0]
    steps_from = at_from[0] + at_from[2]
    if system is not None and system.has_links:
        a, b = system.coefficients()[[0, 2]], system.coefficients()[[1, 3]]
    else:
        a, b = np.full(2, min(alpha, pure) / steps_from if steps_from else 0.0), np.ones(2)
    lat_from, vol_from = at_from[[0, 2]] @ a, at_from[[1, 3]] @ b
    lat_to, vol_to = at_to[[0, 2]] @ a, at_to[[1, 3]] @ b
    if vol_from <= 0 or pure <= lat_from:  # latency-bound (or one rank): the latency part scales alone
        return float(pure * latency * (lat_to / lat_from if lat_from > 0 else 1.0))
    message = (pure - lat_from) / vol_from
    return float(latency * lat_to + message * vol_to / bandwidth)


def fuse_collectives(graph, k: int, alpha_of, step_of):
    """Tensor fusion: each run of k consecutive collectives of one name (within one step) becomes one.

    The fused collective starts when its last tensor is ready (the members of the last one arrive)
    and lasts the sum of the pure durations minus the saved latencies; whatever waited for an
    earlier collective of the block now waits for the fused one.
    """
    from extradeep.predictor.graph import EDGE_KINDS, OpGraph

    nodes = graph.nodes
    # GPU collectives only: tensor fusion merges NCCL calls, never MPI barriers of the host
    syncs = nodes.index[(nodes[ROLE] == "sync") & nodes[NAME].map(is_nccl_kernel)].to_numpy()
    frame = pd.DataFrame(
        {
            NODE: syncs,
            NAME: nodes[NAME].to_numpy()[syncs],
            STEP: step_of(syncs),
            START: nodes[START].to_numpy()[syncs],
        }
    )
    frame = frame.sort_values(START, kind="stable")
    frame["block"] = frame.groupby([NAME, STEP]).cumcount() // k
    dur, src = graph.dur.copy(), graph.src.copy()
    coll = graph.edge_kind == EDGE_KINDS.index("collective")
    member_sync = dict(zip(graph.src[coll].tolist(), graph.dst[coll].tolist()))
    for _, block in frame.groupby([NAME, STEP, "block"]):
        ids = block[NODE].to_numpy()
        if len(ids) < 2:
            continue
        last = ids[-1]
        dur[last] = sum(dur[i] for i in ids) - sum(min(alpha_of(i), dur[i]) for i in ids[:-1])
        dur[ids[:-1]] = 0.0
        block_set = set(ids.tolist())
        for e in np.flatnonzero(np.isin(src, ids[:-1])):
            target_sync = member_sync.get(int(graph.dst[e]))
            if target_sync not in block_set:
                src[e] = last
    edges = pd.DataFrame({SRC: src, DST: graph.dst, LAG: graph.lag, KIND: graph.edge_kind})
    edges = edges.sort_values([DST, SRC], kind="stable").drop_duplicates([SRC, DST])
    return OpGraph(
        nodes=nodes,
        src=edges[SRC].to_numpy(),
        dst=edges[DST].to_numpy(),
        lag=edges[LAG].to_numpy(),
        edge_kind=edges[KIND].to_numpy(),
        dur=dur,
        gap=graph.gap,
        release=graph.release,
        coll_offset=graph.coll_offset,
        info=dict(graph.info),
        os_wait=graph.os_wait,
    )
