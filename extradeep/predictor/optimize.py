"""From what-if to what-to-do: search the replay of one run for the settings that shorten its step.

dPRO's optimizer (paper section 5) searches the replayed global dataflow graph for operator fusion,
tensor fusion, tensor partitioning and memory optimisations. Here, on the graph of
`extradeep.predictor`:

- **bucket layouts** (tensor fusion and partitioning): contiguous groups of gradients in ready
  order. The exact dynamic programme of `buckets.best_layout` over the chain model (a bucket starts
  when its last gradient is ready and the stream is free) and the layouts DDP's `bucket_cap_mb` can
  produce are ranked; the best few are wired into the graph (`rewrite.rewrite_buckets`) and
  replayed with the calibrated collective model (`calibrate`);
- **kernel fusion**: launch-bound chains of short kernels (`fusion`), fused on the replay;
- **streams**: host-to-device copies that wait for compute, moved to a side stream;
- **memory**: with a memory budget short of the peak, activation recomputation and gradient
  accumulation, and every other strategy is refused.

`StrategySearch(...).fit(run)` keeps everything (`strategies_`, `verdict_`, `breakdowns_`, ...);
`optimize(run, ...)` returns the table of strategies, best first, with the verdict in `attrs`.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from extradeep import columns as C
from extradeep.errors import InputError
from extradeep.predictor.critical_path import CLASSES
from extradeep.predictor.memory import GB, MemoryBudget, load_description, memory_budget
from extradeep.predictor.replay import replay
from extradeep.predictor.search import (
    Baseline,
    Outcome,
    baseline,
    bucket_problem,
    evaluate_layout,
    fusion_outcomes,
    layout_candidates,
    reference_step,
    step_time,
    stream_outcomes,
)

MIN_GAIN = 0.01  # a strategy is proposed when it saves at least this share of the step
RECOMPUTE_SHARES = (0.25, 0.5, 0.75, 1.0)
ACCUMULATION_STEPS = (2, 4, 8, 16)
FORWARD_SHARE = 1 / 3  # without a model, the forward is a third of a step's compute (backward twice it)


class StrategySearch:
    """The strategy search on the replay of one run.

    min_gain: smallest share of the measured step a strategy must save to be proposed;
    verify: bucket layouts replayed in full after the chain model ranked them;
    kinds: which families to search (buckets, fusion, stream; memory is searched when the
    budget is short); memory: a model description (dict or TOML path, see
    `extradeep.predictor.memory`); gpu_memory_gb: the GPU's capacity where the profile lacks it;
    select/settings: which run of a folder, and its step marks (as for `predict`).
    """

    def __init__(
        self,
        min_gain: float = MIN_GAIN,
        verify: int = 4,
        kinds=("buckets", "fusion", "stream"),
        memory=None,
        gpu_memory_gb: float | None = None,
        select: dict | None = None,
        settings=None,
    ):
        unknown = set(kinds) - {"buckets", "fusion", "stream"}
        if unknown:
            raise InputError(None, f"unknown strategy kind(s) {', '.join(sorted(unknown))} (buckets, fusion, stream)")
        if not 0 <= min_gain < 1:
            raise InputError(None, f"min_gain must be in [0, 1), not {min_gain}", field="min_gain")
        if verify < 1:
            raise InputError(None, f"verify must be >= 1, not {verify}", field="verify")
        if gpu_memory_gb is not None and not gpu_memory_gb > 0:
            raise InputError(None, f"gpu_memory_gb must be > 0, not {gpu_memory_gb}", field="gpu_memory")
        load_description(memory)  # a bad description is refused before any profile is read
        self.min_gain, self.verify, self.kinds = float(min_gain), int(verify), tuple(kinds)
        self.memory, self.gpu_memory_gb = memory, gpu_memory_gb
        self.select, self.settings = select, settings

    def fit(self, run, progress=None) -> StrategySearch:
        """Replay `run` (a folder, files or a RunTrace) and search it. `progress`: True (lines on
        stderr) or a callable report(done, total, message)."""
        report = _reporter(progress)
        b = baseline(run, self.select, self.settings, report)
        paths = list(b.trace.files[C.PATH]) if len(b.trace.files) else []
        self.memory_ = memory_budget(paths, self.memory, self.gpu_memory_gb)
        outcomes, reasons, notes = self._search(b, report)
        self.baseline_ = b
        self.measured_step_ = b.measured
        self.breakdowns_ = _breakdowns(b, outcomes)
        self.strategies_ = _table(b, outcomes, self.memory_, self.min_gain)
        self.notes_ = list(dict.fromkeys(b.notes + notes + _memory_notes(self.memory_)))
        self.verdict_ = _verdict(b, self.strategies_, reasons, self.memory_, self.min_gain)
        report(1, 1, "done")
        return self

    def _search(self, b: Baseline, report) -> tuple[list[Outcome], list[str], list[str]]:
        outcomes, reasons, notes = [], [], []
        if "buckets" in self.kinds:
            outcomes += self._buckets(b, report, reasons, notes)
        if "fusion" in self.kinds:
            report(0, 0, "looking for launch-bound kernel chains")
            found = fusion_outcomes(b)
            outcomes += found
            if not found:
                reasons.append("no launch-bound chain of short kernels on the critical path")
        if "stream" in self.kinds:
            outcomes += stream_outcomes(b)
        if self.memory_.short:
            report(0, 0, "memory is short: recomputation and gradient accumulation")
            outcomes += memory_outcomes(b, self.memory_)
        return outcomes, reasons, notes

    def _buckets(self, b: Baseline, report, reasons: list, notes: list) -> list[Outcome]:
        """Bucket layouts, when communication is on the critical path (dPRO's guide: nothing else
        can be saved by them)."""
        exposed = b.breakdown.get("communication", 0.0)
        if exposed < self.min_gain * b.measured:
            reasons.append(
                f"communication is {100 * exposed / max(b.measured, 1e-12):.1f} % of the critical path, so no bucket "
                f"layout can save {100 * self.min_gain:g} %"
            )
            return []
        report(0, 0, "finding the gradients and their collectives")
        problem = bucket_problem(b)
        if problem is None:
            reasons.append("no gradient all-reduce or reduce-scatter in the training steps, so no buckets to change")
            return []
        sync, cost = problem.sync, problem.cost
        notes += sync.notes + [
            f"gradient collectives ({sync.name}): {sync.n_units} {sync.source}; collective model {cost.source}: "
            f"{1e6 * cost.alpha:.3g} us + "
            + (f"{cost.beta * 1e9:.3g} ns/byte" if sync.sized else "the volume time")
            + f" (spread {100 * cost.rel_sd:.1f} %)"
        ]
        if b.trace.files[C.RANK].nunique() == 1:
            notes.append(
                "one rank of a larger run: its collective times include waiting for the other ranks, so the "
                "collective model is loose"
            )
        measured, candidates = layout_candidates(problem, self.verify)
        report(0, len(candidates) + 1, "replaying the measured layout with the collective model")
        reference = reference_step(b, problem, measured)
        out = []
        for k, cand in enumerate(candidates):
            report(k + 1, len(candidates) + 1, f"replaying {cand.label}")
            out.append(evaluate_layout(b, problem, cand, reference))
        return out


def optimize(run, progress=None, **kwargs) -> pd.DataFrame:
    """The strategies for one run, best first (columns `extradeep.columns.STRATEGY_COLUMNS`); the
    one-line verdict is in `.attrs["verdict"]`, notes in `.attrs["notes"]`. Keyword arguments are
    `StrategySearch`'s."""
    search = StrategySearch(**kwargs).fit(run, progress=progress)
    table = search.strategies_.copy()
    table.attrs.update(verdict=search.verdict_, notes=search.notes_, measured_step=search.measured_step_)
    return table


def memory_outcomes(b: Baseline, budget: MemoryBudget) -> list[Outcome]:
    """Recomputation and gradient accumulation at the least that fits (both replayed)."""
    n = b.graph.nodes
    compute = (n[C.KIND].to_numpy() == "kernel") & (n[C.CATEGORY].to_numpy() == "computation")
    out = []
    for f in RECOMPUTE_SHARES:
        if budget.fits(0.0, 1.0 - f) or f == RECOMPUTE_SHARES[-1]:
            dur = b.graph.dur.copy()
            dur[compute] *= 1.0 + f * FORWARD_SHARE
            step, steps = step_time(b, b.graph, replay(b.graph, b.plan, dur=dur))
            out.append(
                Outcome(
                    "memory",
                    f"recompute {100 * f:.0f} % of the activations",
                    "torch.utils.checkpoint.checkpoint(block, ...) around "
                    + ("every block" if f == 1.0 else f"{100 * f:.0f} % of the blocks")
                    + " (or FSDP/Megatron activation checkpointing)",
                    f"activations x {1 - f:.2g}; {100 * f:.0f} % of the forward runs again in backward "
                    f"(forward taken as {FORWARD_SHARE:.2g} of the compute)",
                    step,
                    step,
                    step,
                    b.replayed,
                    activation_factor=1.0 - f,
                )
            )
            break
    comm = (n[C.CATEGORY].to_numpy() == "communication") | (n[C.ROLE].to_numpy() == "sync")
    for k in ACCUMULATION_STEPS:
        if budget.fits(0.0, 1.0 / k) or k == ACCUMULATION_STEPS[-1]:
            dur = b.graph.dur.copy()
            dur[compute] /= k
            last = step_time(b, b.graph, replay(b.graph, b.plan, dur=dur))[0]
            dur[comm] = 0.0
            micro = step_time(b, b.graph, replay(b.graph, b.plan, dur=dur))[0]
            step = (k - 1) * micro + last
            out.append(
                Outcome(
                    "memory",
                    f"gradient accumulation over {k} micro-batches",
                    f"gradient_accumulation_steps={k} with batch per GPU / {k} (DDP: model.no_sync() on all but "
                    "the last micro-batch)",
                    f"activations / {k}; compute scaled with the micro-batch, gradients synchronised once per {k}",
                    step,
                    step,
                    step,
                    b.replayed,
                    activation_factor=1.0 / k,
                )
            )
            break
    return out


def _reporter(progress):
    if callable(progress):
        return progress
    if progress:
        return lambda done, total, text: print(f"extradeep optimize: {text}", file=sys.stderr, flush=True)
    return lambda done, total, text: None


def _table(b: Baseline, outcomes: list[Outcome], budget: MemoryBudget, min_gain: float) -> pd.DataFrame:
    rows = []
    for o in outcomes:
        ratio = o.step / o.reference if o.reference > 0 else 1.0
        err = b.replay_error
        lo, hi = b.measured * o.low / o.reference, b.measured * o.high / o.reference
        predicted = b.measured * ratio
        peak = budget.peak_with(o.memory_delta, o.activation_factor)
        fits = budget.fits(o.memory_delta, o.activation_factor)
        gain = 1.0 - predicted / b.measured if b.measured > 0 else 0.0
        rows.append(
            {
                C.STRATEGY: o.label,
                C.STRATEGY_TYPE: o.kind,
                C.PREDICTED_S: predicted,
                C.LOWER_S: max(min(lo, predicted) * (1 - err), 0.0),
                C.UPPER_S: max(hi, predicted) * (1 + err),
                C.MEASURED_S: b.measured,
                C.GAIN: gain,
                C.CRITICAL_PATH: path_change(b.breakdown, o.breakdown),
                C.SETTING: o.setting,
                C.MEMORY_GB: np.nan if peak is None else peak / GB,
                C.FITS: pd.NA if fits is None else fits,
                # when memory is short, whatever fits is proposed (the run needs it), fastest first
                C.PROPOSED: bool(fits is not False and (gain >= min_gain or budget.short)),
                C.DETAIL: o.detail,
            }
        )
    table = pd.DataFrame(rows, columns=C.STRATEGY_COLUMNS)
    if table.empty:
        return table
    # partitioning is proposed only where it beats the same buckets sent whole
    whole = table.loc[table[C.STRATEGY] == "optimal contiguous buckets", C.PREDICTED_S]
    split = table[C.STRATEGY].str.contains("pieces", regex=False)
    if len(whole):
        table.loc[split, C.PROPOSED] &= table.loc[split, C.PREDICTED_S] < whole.iloc[0] * (1 - 1e-3)
    table = table.sort_values([C.PROPOSED, C.PREDICTED_S], ascending=[False, True], kind="stable")
    return table.drop_duplicates([C.STRATEGY_TYPE, C.DETAIL]).reset_index(drop=True)


def path_change(before: dict, after: dict) -> str:
    """What moved on the critical path: the classes that changed most (ms, median step)."""
    if not before or not after:
        return ""
    delta = {c: after.get(c, 0.0) - before.get(c, 0.0) for c in CLASSES}
    total = max(sum(before.values()), 1e-12)
    moved = sorted((c for c in delta if abs(delta[c]) > 0.005 * total), key=lambda c: -abs(delta[c]))
    if not moved:
        return "unchanged"
    return ", ".join(f"{c} {1e3 * delta[c]:+.3g} ms" for c in moved[:3])


def _breakdowns(b: Baseline, outcomes: list[Outcome]) -> pd.DataFrame:
    """Seconds per class on the critical path (median step): the measured run and each strategy."""
    rows = [{"strategy": "measured", **b.breakdown}]
    rows += [{"strategy": o.label, **o.breakdown} for o in outcomes if o.breakdown]
    return pd.DataFrame(rows, columns=[C.STRATEGY, *CLASSES]).fillna(0.0)


def _memory_notes(budget: MemoryBudget) -> list[str]:
    if budget.source == "none":
        return [
            "memory not recorded (Kineto profile_memory=True or nsys --cuda-memory-usage=true) and no model "
            "description: strategies are not checked against memory"
        ]
    if budget.capacity is None:
        return [f"peak memory {budget.peak / GB:.3g} GB ({budget.source}), GPU capacity unknown (give gpu_memory_gb)"]
    return [f"memory: peak {budget.peak / GB:.3g} GB of {budget.capacity / GB:.3g} GB ({budget.source})"]


def _verdict(b: Baseline, table: pd.DataFrame, reasons: list[str], budget: MemoryBudget, min_gain: float) -> str:
    """One line: the best proposal, or why there is none."""
    proposed = table[table[C.PROPOSED]] if len(table) else table
    if len(proposed):
        best = proposed.iloc[0]
        short = (
            f"memory is short ({budget.peak / GB:.3g} GB needed, {budget.capacity / GB:.3g} GB available); "
            if budget.short
            else ""
        )
        change = f"{100 * abs(best[C.GAIN]):.1f} % {'faster' if best[C.GAIN] >= 0 else 'slower'}"
        return (
            f"{short}best: {best[C.STRATEGY]} -> {best[C.PREDICTED_S]:.4g} s per step "
            f"({best[C.LOWER_S]:.4g}-{best[C.UPPER_S]:.4g}) instead of {b.measured:.4g} s measured "
            f"({change}); set {best[C.SETTING]}"
        )
    total = max(sum(b.breakdown.values()), 1e-12)
    share = {c: b.breakdown.get(c, 0.0) / total for c in CLASSES}
    why = []
    if budget.short:
        why.append(
            f"memory is short ({budget.peak / GB:.3g} of {budget.capacity / GB:.3g} GB) and nothing that fits is faster"
        )
    top = max(share, key=share.get)
    if top == "compute":
        why.append(f"compute-bound: compute kernels are {100 * share[C.PART_COMPUTE]:.0f} % of the critical path")
    else:
        why.append(f"{top.replace('_', ' ')} is {100 * share[top]:.0f} % of the critical path")
    if not any(r.startswith("communication is") for r in reasons):
        why.append(f"communication exposed on it: {100 * share[C.COMMUNICATION]:.1f} %")
    refused = table[(table[C.FITS] == False) & (table[C.GAIN] >= min_gain)] if len(table) else table  # noqa: E712
    if len(refused):
        why.append(f"{len(refused)} faster strateg(ies) would not fit in memory")
    why += reasons
    best_gain = float(table[C.GAIN].max()) if len(table) else 0.0
    tail = f"; the best candidate saves {100 * best_gain:.1f} %" if len(table) else ""
    return f"nothing to gain above {100 * min_gain:g} %: " + "; ".join(why) + tail
