"""Ground truth for truth.json: per-region PMNF models and per-point expected values.

Expected values come from a noise-free run of the same causal simulator (so deterministic waits
and rank imbalance are included), reduced like the paper: sum per step, median over steady-state
steps, then median over ranks.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from extradeep.columns import (
    BYTES,
    CATEGORY,
    KIND,
    METRIC,
    PHASE,
    REGION,
    STEP_CATEGORY,
    STEP_REGION,
    TIME,
    VALUE,
    VISITS,
)
from extradeep.simulate.catalogue import OpSpec, format_terms, merge_terms, resolve_terms, terms_json
from extradeep.simulate.engine import Records

TRAIN_BLOCKS = ("data", "zero_grad", "forward", "backward", "bucket", "optimizer")
CPU_KINDS = {"runtime": "cuda_api", "osrt": "os", "cudnn": "cudnn", "cublas": "cublas", "mpi": "mpi"}
CPU_TABLES = {
    "runtime": "CUPTI_ACTIVITY_KIND_RUNTIME",
    "osrt": "OSRT_API",
    "cudnn": "CUDNN_EVENTS",
    "cublas": "CUBLAS_EVENTS",
    "mpi": "MPI_COLLECTIVES_EVENTS",
    "nccl_nvtx": "NVTX_EVENTS",
}


def in_phase(op: OpSpec, phase: str) -> bool:
    """train/val: steady-state steps; between: after each training step; warmup: epoch 0's first step."""
    if phase == "train":
        return op.block in TRAIN_BLOCKS
    if phase in ("between", "warmup"):
        return op.block == phase
    return op.block == "data" or (op.block == "forward" and op.category == "computation")


def region_models(ops: list[OpSpec], params: list[str], batch: int, refs: dict, prefixes: dict) -> list[dict]:
    """One entry per region (ops sharing a name merged), with models per phase and metric."""
    by_name: dict[str, list[OpSpec]] = defaultdict(list)
    for op in ops:
        by_name[op.name].append(op)
    regions = []
    for name, group in by_name.items():
        models = {}
        for phase in ("train", "val", "between", "warmup"):
            members = [op for op in group if in_phase(op, phase)]
            if not members:
                continue
            metrics = {
                "time": merge_terms(resolve_terms(op.terms, op.batch_scaled, params, batch, refs) for op in members),
                "visits": merge_terms([[(float(op.visits), {})] for op in members]),
            }
            if group[0].kind in ("memcpy", "memset"):
                metrics[BYTES] = merge_terms(
                    resolve_terms(op.bytes_terms, False, params, batch, refs) for op in members
                )
            models[phase] = {
                m: {"formula": format_terms(t, prefixes), "terms": terms_json(t)} for m, t in metrics.items()
            }
        regions.append(
            {
                "region": name,
                "kind": group[0].kind,
                "category": group[0].category,
                "demangled": sorted({op.demangled for op in group}),
                "warmup_only": all(op.block == "warmup" for op in group),
                "between": any(op.block == "between" for op in group),
                "kernel_scale": group[0].scale,
                "models": models,
            }
        )
    return regions


def _tag_by_time(times: np.ndarray, windows: list[tuple]) -> list[tuple]:
    """(epoch, phase, step) of each CPU timestamp (rank 0) in [start, end) of a step, else None."""
    starts = np.array([w[3][0] for w in windows])
    ends = np.array([w[4][0] for w in windows])
    pos = np.searchsorted(starts, times, side="right") - 1
    return [windows[p][:3] if p >= 0 and times[i] < ends[p] else None for i, p in enumerate(pos)]


def point_values(
    rec: Records, windows: list[tuple], ops: list[OpSpec], op_bytes: np.ndarray, steady: set[int], tables
) -> dict:
    """Noise-free expected per-step values (median over steps, then ranks) and between-step totals."""
    n_ranks = len(windows[0][3])
    sums = defaultdict(
        lambda: defaultdict(lambda: np.zeros(n_ranks))
    )  # (region, kind, cat, phase, metric) -> step -> ranks
    between = defaultdict(lambda: np.zeros(n_ranks))
    for idx, _sid, start, end, _corr, tag in rec.gpu:
        epoch, phase, step = tag
        if epoch not in steady:
            continue
        op = ops[idx]
        values = {"time": (end - start) / 1e9, "visits": 1.0}
        if op.kind in ("memcpy", "memset"):
            values[BYTES] = float(op_bytes[idx])
        for metric, v in values.items():
            key = (op.name, op.kind, op.category, phase, metric)
            if phase == "between":
                between[key] += v
            else:
                sums[key][(epoch, step)] += v
    for epoch, phase, step, start, end in windows:
        if epoch in steady:
            sums[(STEP_REGION, STEP_CATEGORY, STEP_CATEGORY, phase, TIME)][(epoch, step)] += (end - start) / 1e9
            sums[(STEP_REGION, STEP_CATEGORY, STEP_CATEGORY, phase, VISITS)][(epoch, step)] += 1.0
    _cpu_visits(rec, windows, steady, sums, tables)
    # a step without the region counts as 0, as the reader sees it
    all_steps = {
        phase: [(w[0], w[2]) for w in windows if w[0] in steady and w[1] == phase] for phase in ("train", "val")
    }
    zero = np.zeros(n_ranks)
    per_step = [
        dict(
            region=k[0],
            kind=k[1],
            category=k[2],
            phase=k[3],
            metric=k[4],
            value=float(np.median(np.median([steps.get(s, zero) for s in all_steps[k[3]]], axis=0))),
        )
        for k, steps in sums.items()
    ]
    n_epochs = max(len(steady), 1)
    per_epoch_between = [
        dict(region=k[0], kind=k[1], category=k[2], metric=k[4], value=float(np.median(v)) / n_epochs)
        for k, v in between.items()
    ]
    return {"per_step": per_step, "between_per_epoch": per_epoch_between}


def _cpu_visits(rec: Records, windows, steady, sums, tables) -> None:
    """Visits per step of CPU-side calls, for the kinds the layout has a table for."""
    sources = [
        ("runtime", [(r[0], r[1][0]) for r in rec.runtime]),
        ("osrt", [(o[0], o[1][0]) for o in rec.osrt if o[3] == 0]),
        ("mpi", [(m[0], m[1][0]) for m in rec.mpi]),
    ]
    for lib in ("cudnn", "cublas"):
        sources.append((lib, [(x[1], x[2][0]) for x in rec.library if x[0] == lib]))
    sources.append(("nccl_nvtx", [(n[0], n[1][0]) for n in rec.nvtx if n[5] == 1 and n[3] == 59]))
    for source, items in sources:
        if not items or CPU_TABLES[source] not in tables:
            continue
        tags = _tag_by_time(np.array([t for _, t in items]), windows)
        kind = CPU_KINDS.get(source, source)
        category = {"cuda_api": "cuda_api", "os": "os", "mpi": "communication", "nccl_nvtx": "nvtx"}.get(
            kind, "library"
        )
        for (name, _), tag in zip(items, tags):
            if tag is not None and tag[0] in steady:
                sums[(name, kind, category, tag[1], VISITS)][(tag[0], tag[2])] += 1.0


def expected_values(exact: dict, replicates: list[dict]) -> dict:
    """value = the noise-free run (matches the formulas but for deterministic waits and imbalance);
    expected = median over noisy replicates of the same reduction, i.e. what a measurement is
    expected to give, waits for the slowest rank included (equal to value without replicates)."""
    out = {}
    for part, key_fields in (
        ("per_step", ("region", "kind", "phase", "metric")),
        ("between_per_epoch", ("region", "kind", "metric")),
    ):
        samples = defaultdict(list)
        for rep in replicates:
            for row in rep[part]:
                samples[tuple(row[f] for f in key_fields)].append(row[VALUE])
        rows = []
        for row in exact[part]:
            got = samples.get(tuple(row[f] for f in key_fields))
            expected = float(np.median(got)) if got and len(got) == len(replicates) else row[VALUE]
            rows.append({**row, "expected": expected})
        out[part] = rows
    return out


def epoch_values(values: dict, n_t: int, n_v: int) -> dict:
    """Paper Eq. 4 per region and metric, the epoch time and its split by category."""
    per = defaultdict(float)
    meta = {}
    for row in values["per_step"]:
        if row[KIND] not in ("kernel", "memcpy", "memset", "step"):
            continue
        n = n_t if row[PHASE] == "train" else n_v
        key = (row[REGION], row[KIND], row[CATEGORY], row[METRIC])
        per[key] += n * row[VALUE]
        meta[key] = row
    per_epoch = [dict(region=k[0], kind=k[1], category=k[2], metric=k[3], value=v) for k, v in per.items()]
    by_cat = defaultdict(float)
    for (_region, _kind, category, metric), v in per.items():
        if metric == "time" and category in ("computation", "communication", "memory"):
            by_cat[category] += v
    step = {row[PHASE]: row[VALUE] for row in values["per_step"] if row[KIND] == "step" and row[METRIC] == "time"}
    return {
        "per_epoch": per_epoch,
        "step_time": step,
        "epoch_time": n_t * step.get("train", 0.0) + n_v * step.get("val", 0.0),
        "epoch_time_by_category": dict(by_cat),
    }


def steps_per_epoch(samples: int, ranks: int, batch: int, weak: bool) -> int:
    """Paper Eq. 2-3 with G = ranks, M = 1; weak scaling multiplies the dataset by the ranks."""
    total = samples * ranks if weak else samples
    return int(math.floor(total / ranks / batch))
