"""Candidates for operator fusion and for moving copies off the compute stream, found on the replay.

A *launch-bound chain* is a run of consecutive short kernels on one GPU stream whose starts the
replay binds to their launches: the GPU waits for the host between them, so the host's dispatch
and launch work, not the kernels, set the pace (HolisticTraceAnalysis's "host wait"). Fusing such a
chain (torch.compile, a foreach or fused optimizer, a CUDA graph) keeps its GPU time and removes
the launches after the first. Chains are grouped into *sites* by the kernels they run, so that each
site can be named with the setting that fuses it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import CATEGORY, KIND, NAME, NODE, QUEUE, RANK, ROLE, START
from extradeep.predictor.graph import EDGE_KINDS, OpGraph
from extradeep.predictor.replay import ReplayResult
from extradeep.predictor.rewrite import launch_sources

SHORT_S = 20e-6  # a kernel this short (or shorter than its launch call) can be starved by the host
MIN_CHAIN = 4  # fewer kernels than this are not worth a fusion
SITE_SHARE = 0.2  # kernels making up at least this share of a chain name its site
LAUNCH_EDGE = EDGE_KINDS.index("launch")
OPTIMIZER_WORDS = ("multi_tensor", "foreach", "adam", "sgd", "optimizer", "lamb")


@dataclass
class FusionSite:
    """Launch-bound chains that run the same kernels."""

    label: str  # the kernels, most frequent first
    chains: list  # node-id arrays, stream order
    kernels: int  # kernels in all chains
    host_time: float  # launch-call and dispatch time of the later kernels of every chain (s)
    optimizer: bool  # the chains run after the step's gradients were handed to communication

    def setting(self) -> str:
        if self.optimizer:
            return (
                "optimizer: torch.optim.<YourOptimizer>(params, ..., foreach=True) or fused=True "
                "(one multi-tensor kernel instead of one launch per parameter)"
            )
        return (
            "torch.compile(model) fuses chains of small kernels; for launch-bound loops also CUDA graphs "
            "(torch.compile(model, mode='reduce-overhead'))"
        )


def launch_bound_chains(
    graph: OpGraph, result: ReplayResult, windows: pd.DataFrame, short_s: float = SHORT_S, min_chain: int = MIN_CHAIN
) -> list[np.ndarray]:
    """Chains of >= min_chain consecutive short kernels on one stream, each after the first bound
    by its launch in the replay, inside one step window (lo, hi: launch times, graph seconds)."""
    n = graph.nodes
    kern = np.flatnonzero(
        (n[KIND].to_numpy() == "kernel") & (n[ROLE].to_numpy() == "op") & (n[CATEGORY].to_numpy() != "communication")
    )
    if not len(kern):
        return []
    launcher = launch_sources(graph)
    call = launcher[kern]
    call_dur = np.where(call >= 0, graph.dur[np.maximum(call, 0)], 0.0)
    short = (graph.dur[kern] <= short_s) | (graph.dur[kern] < call_dur)
    bound = np.zeros(graph.n, dtype=bool)
    b = result.binding
    has = b >= 0
    bound[np.flatnonzero(has)] = graph.edge_kind[b[has]] == LAUNCH_EDGE
    frame = pd.DataFrame(
        {
            NODE: kern,
            RANK: n[RANK].to_numpy()[kern],
            QUEUE: n[QUEUE].to_numpy()[kern],
            START: result.start[kern],
            "short": short,
            "bound": bound[kern],
            "window": _window_of(n[START].to_numpy()[np.maximum(call, 0)], windows),
        }
    )
    frame = frame[frame["window"] >= 0].sort_values([RANK, QUEUE, START], kind="stable")
    chains = []
    for _, g in frame.groupby([RANK, QUEUE, "window"], sort=False):
        ids, ok = g[NODE].to_numpy(), g["short"].to_numpy()
        ok_next = ok & g["bound"].to_numpy()
        run = []
        for i in range(len(ids)):
            if run and ok_next[i]:
                run.append(ids[i])
                continue
            if len(run) >= min_chain:
                chains.append(np.array(run))
            run = [ids[i]] if ok[i] else []
        if len(run) >= min_chain:
            chains.append(np.array(run))
    return chains


def _window_of(t: np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    out = np.full(len(t), -1)
    for k, w in enumerate(windows.itertuples(index=False)):
        out[(t >= w.lo) & (t < w.hi)] = k
    return out


def fusion_sites(
    graph: OpGraph, chains: list[np.ndarray], windows: pd.DataFrame, handoff: dict | None = None, top: int = 3
) -> list[FusionSite]:
    """Chains grouped by their most frequent kernel names, largest host time first (at most `top`).
    `handoff`: (rank, window index) -> launch time of that step's last gradient collective, to tell
    the optimizer's chains (launched after it) from the model's."""
    if not chains:
        return []
    names = graph.nodes[NAME].astype(str).to_numpy()
    rank = graph.nodes[RANK].to_numpy()
    start = graph.nodes[START].to_numpy()
    launcher = launch_sources(graph)
    groups: dict = {}
    for chain in chains:
        counts = pd.Series(names[chain]).value_counts()
        # name a chain by the kernels that make it up (a few others at its ends do not count)
        major = counts[counts >= SITE_SHARE * len(chain)].index[:2]
        label = " + ".join(_short(x) for x in (major if len(major) else counts.index[:1]))
        later = launcher[chain[1:]]
        later = later[later >= 0]
        host = float(graph.dur[later].sum() + graph.gap[later].sum())
        t = start[max(launcher[chain[0]], 0)]
        window = int(_window_of(np.array([t]), windows)[0])
        after = handoff is not None and t > handoff.get((rank[chain[0]], window), np.inf)
        opt = after or any(w in label.lower() for w in OPTIMIZER_WORDS)
        site = groups.setdefault(label, FusionSite(label, [], 0, 0.0, opt))
        site.chains.append(chain)
        site.kernels += len(chain)
        site.host_time += host
    return sorted(groups.values(), key=lambda s: -s.host_time)[:top]


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def copies_on_compute_streams(graph: OpGraph, result: ReplayResult, windows: pd.DataFrame) -> np.ndarray:
    """Host-to-device copies inside the steps that wait in the replay for the kernel before them
    on their stream (their start is bound by the stream's order, not by their launch)."""
    n = graph.nodes
    copies = np.flatnonzero(
        (n[KIND].to_numpy() == "memcpy")
        & n[NAME].astype(str).str.contains("HtoD", regex=False).to_numpy()
        & (n[ROLE].to_numpy() == "op")
    )
    if not len(copies):
        return copies
    b = result.binding[copies]
    queued = (b >= 0) & (graph.edge_kind[np.maximum(b, 0)] == EDGE_KINDS.index("queue"))
    prev = np.where(b >= 0, graph.src[np.maximum(b, 0)], -1)
    after_kernel = (prev >= 0) & (n[KIND].to_numpy()[np.maximum(prev, 0)] == "kernel")
    inside = _window_of(n[START].to_numpy()[copies], windows) >= 0
    return copies[queued & after_kernel & inside]
