"""simulate(): profiles of a simulated distributed training, one export per point x repetition x rank."""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import RANKS
from extradeep.errors import InputError
from extradeep.io.naming import check_name_parts, rank_name, run_stem
from extradeep.simulate import truth as truth_mod
from extradeep.simulate.catalogue import (
    NCCL_ALPHA,
    NCCL_BANDWIDTH,
    NCCL_LAUNCH,
    PARAM_BYTES,
    apply_scales,
    default_catalogue,
    evaluate,
    resolve_terms,
)
from extradeep.simulate.engine import Engine
from extradeep.simulate.gradients import GradientPlan, gradient_plan, gradient_sizes, resolve_layout
from extradeep.simulate.kineto_writer import kineto_name, write_kineto_rank
from extradeep.simulate.program import MARKS, LoopConfig, TrainingProgram
from extradeep.simulate.schema import LAYOUTS, load_layout
from extradeep.simulate.writer import SIGNALS, Placement, RunColumns, write_rank
from extradeep.system import ALGORITHMS, collective_kind, collective_time, load_system

T0_NS = 1e9
FORMAT = "extradeep-simulator-truth/1"


@dataclass
class Simulation:
    """What simulate() wrote: the files (one row per export) and the ground truth."""

    outdir: Path
    files: pd.DataFrame
    truth: dict


def simulate(
    outdir,
    *,
    app: str = "cifar10",
    params: dict | None = None,
    prefixes: dict | None = None,
    repetitions: int = 2,
    epochs: int = 2,
    train_steps: int = 5,
    val_steps: int = 2,
    batch: int = 64,
    train_samples: int = 50_000,
    val_samples: int = 10_000,
    scaling: str = "strong",
    layout: str = "2026",
    marks: str = "ranges",
    nvtx_strings: str = "text",
    ddp: bool = False,
    kernel_scale: dict | None = None,
    nccl_bandwidth_scale: float = 1.0,
    cpu_scale: float = 1.0,
    buckets: int | None = None,
    gradients: int | None = None,
    bucket_layout=None,
    bucket_cap_mb: float | None = None,
    gradient_profile: str = "resnet",
    foreach: bool = False,
    host_sync: bool = False,
    activation_gb: float | None = None,
    noise=(0.02, 0.01, 0.01),
    seed: int = 0,
    warmup_factor: float = 1.3,
    imbalance: float | None = None,
    truth_replicates: int = 8,
    clock_offset_ns: float = 0.0,
    topology=None,
    algorithm: str = "ring",
    signals: str = "all",
    truth_ranks=(),
    formats=("nsys",),
    progress: bool = False,
) -> Simulation:
    """Simulate every point of the parameter grid and write its exports and truth.json.

    ``topology``: None (every rank its own host, collectives as in the catalogue) or a
    :class:`extradeep.system.System` / preset name: ranks fill nodes of its GPUs per node, the
    exports carry that layout (host names, the node's GPUs) and every collective costs
    :func:`extradeep.system.collective_time` with ``algorithm``. ``truth_ranks``: further rank counts
    (other parameters at their first value) whose truth is computed without writing files, to check
    predictions against. ``formats``: "nsys" (SQLite exports) and/or "kineto" (the same records as
    PyTorch profiler traces). ``signals``: which node signals the nsys exports of a topology carry
    (:data:`extradeep.simulate.writer.SIGNALS`: "all", "hostname", "uuids", "export-host",
    "containers"); Kineto traces carry distributedInfo and deviceProperties (the GPUs the rank sees).
    DDP only: ``gradients=N`` runs the backward as N layers whose
    gradients are all-reduced in buckets, ``bucket_layout`` (gradients per bucket, ready order) or
    ``bucket_cap_mb`` (DDP's rule, default 25) says how, ``gradient_profile`` ("resnet" or
    "uniform") how large they are (:mod:`extradeep.simulate.gradients`);
    ``foreach`` launches the optimizer's tiny kernels as one; ``host_sync`` makes the loop wait for
    the GPU before the optimizer step (as gradient clipping or logging the loss does);
    ``activation_gb`` records the GPU memory in the Kineto traces (PyTorch's ``profile_memory``
    ``[memory]`` events): 16 bytes per parameter plus these activations during each training step."""
    formats = (formats,) if isinstance(formats, str) else tuple(formats)
    if not formats or set(formats) - {"nsys", "kineto"}:
        raise InputError(None, f"formats must be 'nsys' and/or 'kineto', not {formats!r}")
    params = dict(params or {"ranks": [2, 4, 6, 8, 10]})
    system = None if topology is None else load_system(topology)
    if algorithm not in ALGORITHMS:
        raise InputError(None, f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    _check(
        params,
        scaling,
        layout,
        marks,
        nvtx_strings,
        repetitions,
        epochs,
        train_steps,
        val_steps,
        buckets,
        cpu_scale,
        nccl_bandwidth_scale,
        truth_replicates,
    )
    _check_values(batch, train_samples, val_samples, warmup_factor, kernel_scale)
    grad_sizes, grad_layout = _gradients(ddp, gradients, buckets, bucket_layout, bucket_cap_mb, gradient_profile)
    buckets = len(grad_layout) if grad_layout else buckets
    prefixes = {name: (prefixes or {}).get(name, {"ranks": "p", "batch": "b"}.get(name, name[0])) for name in params}
    check_name_parts(app, params, prefixes)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    names = list(params)
    refs = {name: float(values[0]) for name, values in params.items()}
    ops = apply_scales(default_catalogue(ddp, buckets, gradients, foreach), kernel_scale, nccl_bandwidth_scale)
    if activation_gb is not None and not activation_gb > 0:
        raise InputError(None, f"activation_gb must be > 0, not {activation_gb:g}")
    cfg = LoopConfig(epochs, train_steps, val_steps, marks, ddp, warmup_factor, host_sync, (activation_gb or 0.0) * 1e9)
    lay = load_layout(layout)
    imbalance = (0.08 if ddp else 0.0) if imbalance is None else imbalance
    steady = set(range(1, epochs)) or {0}
    truth = _truth_header(locals())
    truth["regions"] = truth_mod.region_models(ops, names, batch, refs, prefixes)
    truth["topology"] = (
        None
        if system is None
        else {
            "gpus_per_node": system.gpus_per_node,
            "algorithm": algorithm,
            "system": system.to_dict(),
            "signals": signals,
        }
    )
    if signals not in SIGNALS:
        raise InputError(None, f"signals must be one of {', '.join(SIGNALS)}, not {signals!r}")
    placement = None if system is None else Placement(system.gpus_per_node, signals)
    rows, points = [], []
    grid = list(itertools.product(*params.values()))

    def point_truth(p_index, point):
        """(run_once, durations, op_bytes, truth entry) of one point."""
        ranks = int(point[RANKS])
        per_rank_batch = int(point.get("batch", batch))
        durations, op_bytes = _per_instance(ops, names, batch, refs, point)
        if system is not None:
            durations = _topology_durations(ops, durations, op_bytes, ranks, system, algorithm)
        skew = 1.0 + imbalance * np.linspace(0.0, 1.0, ranks)
        plan = bucket_plan(ops, durations, grad_sizes, grad_layout, ranks, system, algorithm) if grad_layout else None

        def run_once(key, sigma):
            engine = Engine(ranks, np.random.default_rng([seed, p_index, *key]), tuple(sigma), T0_NS, skew, cpu_scale)
            program = TrainingProgram(engine, ops, durations, op_bytes, cfg, plan)
            program.run()
            return engine.rec, program.windows

        exact = truth_mod.point_values(*run_once([0], (0.0, 0.0, 0.0)), ops, op_bytes, steady, lay.tables)
        # expected measured values: independent noisy replicates (seeds never used for the files)
        replicates = [
            truth_mod.point_values(*run_once([0, k + 1], noise), ops, op_bytes, steady, lay.tables)
            for k in range(truth_replicates if any(noise) else 0)
        ]
        values_ = truth_mod.expected_values(exact, replicates)
        weak = scaling == "weak"
        n_t = truth_mod.steps_per_epoch(train_samples, ranks, per_rank_batch, weak)
        n_v = truth_mod.steps_per_epoch(val_samples, ranks, per_rank_batch, weak)
        entry = {
            "params": point,
            "batch_per_rank": per_rank_batch,
            "n_t": n_t,
            "n_v": n_v,
            **values_,
            **truth_mod.epoch_values(values_, n_t, n_v),
        }
        if plan is not None:
            entry["gradients"] = plan.to_dict()
        if system is not None:
            entry["nodes"] = int(system.nodes(ranks))
            entry["collectives"] = _collective_truth(ops, durations, op_bytes)
        return run_once, op_bytes, entry

    for p_index, values in enumerate(grid):
        point = dict(zip(names, values))
        ranks = int(point[RANKS])
        run_once, op_bytes, entry = point_truth(p_index, point)
        files, offsets_by_rep = [], []
        for rep in range(1, repetitions + 1):
            rec, _ = run_once([rep], noise)
            offsets = _clock_offsets(clock_offset_ns, ranks, seed, p_index, rep)
            offsets_by_rep.append(offsets.astype(int).tolist())
            columns = RunColumns(rec, ops, op_bytes, offsets, placement)
            for rank in range(ranks):
                name = _file_name(app, point, prefixes, rep, rank)
                if "nsys" in formats:
                    write_rank(outdir / name, lay, columns, rank, nvtx_strings)
                    files.append(name)
                    rows.append({"path": str(outdir / name), **point, "rep": rep, "rank": rank})
                if "kineto" in formats:  # the same records as a PyTorch profiler trace
                    trace = kineto_name(name)
                    write_kineto_rank(outdir / trace, columns, rank, ranks)
                    files.append(trace)
                    rows.append({"path": str(outdir / trace), **point, "rep": rep, "rank": rank})
            if progress:
                print(
                    f"\rsimulate: point {p_index + 1}/{len(grid)} repetition {rep}/{repetitions}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        points.append({**entry, "files": files, "clock_offsets_ns": offsets_by_rep})
    if progress:
        print(file=sys.stderr)
    truth["points"] = points
    if truth_ranks:
        first = {name: values[0] for name, values in params.items()}
        truth["truth_points"] = [
            point_truth(len(grid) + k, {**first, "ranks": int(r)})[2] for k, r in enumerate(truth_ranks)
        ]
    (outdir / "truth.json").write_text(json.dumps(truth, indent=1))
    (outdir / "extradeep.toml").write_text(_reading_config(truth["dataset"], names, truth["prefixes"]))
    return Simulation(outdir, pd.DataFrame(rows), truth)


def _gradients(ddp, gradients, buckets, bucket_layout, bucket_cap_mb, profile="resnet"):
    """(sizes, layout) of the explicit gradients, or (None, None) without them."""
    if gradients is None:
        if bucket_layout is not None or bucket_cap_mb is not None:
            raise InputError(None, "a bucket layout or bucket_cap_mb needs gradients=N (DDP with explicit gradients)")
        return None, None
    if not ddp:
        raise InputError(None, "gradients=N simulates DDP's gradient buckets: it needs ddp=True")
    if buckets is not None:
        raise InputError(None, "with gradients=N give the buckets as a layout or bucket_cap_mb, not buckets=")
    sizes = gradient_sizes(int(gradients), PARAM_BYTES, profile)
    return sizes, resolve_layout(sizes, bucket_layout, bucket_cap_mb)


def bucket_plan(ops, durations, sizes, layout, ranks, system=None, algorithm="ring") -> GradientPlan:
    """Per-bucket all-reduce bytes and times of one point (durations: the catalogue's per instance, ns)."""
    idx = next(i for i, op in enumerate(ops) if op.block == "bucket")
    return gradient_plan(sizes, layout, float(durations[idx]), ranks, system, algorithm)


def _topology_durations(ops, durations, op_bytes, ranks, system, algorithm) -> np.ndarray:
    """Per-instance durations (ns) with every collective costed on the system's links."""
    out = durations.copy()
    for i, op in enumerate(ops):
        kind = collective_kind(op.name) if op.category == "communication" else None
        if kind is not None:
            seconds = NCCL_LAUNCH + collective_time(kind, algorithm, ranks, op_bytes[i], system)[0]
            out[i] = seconds * 1e9
    return out


def _collective_truth(ops, durations, op_bytes) -> list[dict]:
    """The true pure time per instance and per training step of every collective."""
    return [
        {
            "region": op.name,
            "collective": collective_kind(op.name),
            "bytes": int(op_bytes[i]),
            "pure_s": float(durations[i] / 1e9),
            "pure_per_step_s": float(durations[i] / 1e9 * op.visits),
        }
        for i, op in enumerate(ops)
        if op.category == "communication" and op.block != "warmup"
    ]


def _reading_config(dataset: dict, names: list[str], prefixes: dict) -> str:
    """The settings `extradeep model OUTDIR` picks up, so the simulated run models whole epochs
    and its file-name tokens (b64) map to the parameter names the truth uses (batch)."""
    batch = '"batch"' if "batch" in names else dataset["batch_per_rank"]
    aliases = [f'"{prefixes[n]}={n}"' for n in names if prefixes[n] != n and (prefixes[n], n) != ("p", "ranks")]
    lines = [
        "# Dataset of the simulated training (paper Eq. 2-3), read by `extradeep model` from this folder.",
        f"train-samples = {dataset['train_samples']}",
        f"val-samples = {dataset['val_samples']}",
        f"batch-size = {batch}",
        f"weak-scaling = {'true' if dataset['weak_scaling'] else 'false'}",
    ]
    if aliases:
        lines.append(f"alias = [{', '.join(aliases)}]")
    return "\n".join(lines) + "\n"


def _per_instance(ops, names, batch, refs, point) -> tuple[np.ndarray, np.ndarray]:
    """Per-instance duration (ns) and bytes of every op at this point."""
    dur = np.array(
        [evaluate(resolve_terms(op.terms, op.batch_scaled, names, batch, refs), point) / op.visits * 1e9 for op in ops]
    )
    nbytes = np.array(
        [round(evaluate(resolve_terms(op.bytes_terms, False, names, batch, refs), point) / op.visits) for op in ops],
        dtype=np.int64,
    )
    return dur, nbytes


def _clock_offsets(spread_ns: float, ranks: int, seed: int, p_index: int, rep: int) -> np.ndarray:
    """Per-rank clock offsets as if each rank ran its own nsys session (rank 0 is the reference)."""
    offsets = np.zeros(ranks)
    if spread_ns > 0:
        draw = np.random.default_rng([seed, p_index, rep, 7]).uniform(-spread_ns, spread_ns, ranks)
        offsets[1:] = np.rint(draw[1:])
    return offsets


def _file_name(app: str, point: dict, prefixes: dict, rep: int, rank: int) -> str:
    return rank_name(run_stem(app, {prefixes[k]: v for k, v in point.items()}, rep), rank)


def _check(
    params,
    scaling,
    layout,
    marks,
    nvtx_strings,
    repetitions,
    epochs,
    train_steps,
    val_steps,
    buckets,
    cpu_scale,
    bandwidth,
    truth_replicates,
) -> None:
    problems = []
    if RANKS not in params:
        problems.append("the parameter 'ranks' is required (it sets the number of files per point)")
    for name, values in params.items():
        if not values or any(float(v) <= 0 for v in values):
            problems.append(f"parameter {name!r} needs positive values")
    if any(not float(v).is_integer() or int(v) < 1 for v in params.get("ranks", [])):
        problems.append("ranks must be positive integers")
    choices = {
        "scaling": (scaling, ("strong", "weak")),
        "layout": (layout, LAYOUTS),
        "marks": (marks, MARKS),
        "nvtx_strings": (nvtx_strings, ("text", "textId")),
    }
    for what, (value, allowed) in choices.items():
        if value not in allowed:
            problems.append(f"{what} must be one of {', '.join(allowed)}, not {value!r}")
    if (
        min(repetitions, epochs, train_steps, 1 if buckets is None else buckets) < 1
        or val_steps < 0
        or min(cpu_scale, bandwidth) <= 0
        or truth_replicates < 0
    ):
        problems.append(
            "repetitions, epochs, train steps and buckets must be >= 1, validation steps and truth "
            "replicates >= 0, scale factors > 0"
        )
    if problems:
        raise InputError(None, "; ".join(problems))


def _check_values(batch, train_samples, val_samples, warmup_factor, kernel_scale) -> None:
    """Values that would make files extradeep rejects (negative durations) or a division by zero."""
    if batch < 1 or train_samples < 1 or val_samples < 0:
        raise InputError(None, "batch and train samples must be >= 1, validation samples >= 0")
    if warmup_factor <= 0:
        raise InputError(None, f"warmup factor must be > 0 (a slow-down factor), not {warmup_factor:g}")
    bad = [f"{pattern}={factor:g}" for pattern, factor in (kernel_scale or {}).items() if not factor > 0]
    if bad:
        raise InputError(None, f"kernel scale {', '.join(bad)}: factors must be > 0 (durations stay positive)")


def _truth_header(o: dict) -> dict:
    """The run-wide part of truth.json; o holds simulate()'s resolved arguments and op list."""
    return {
        "format": FORMAT,
        **{k: o[k] for k in ("app", "seed", "layout", "marks", "nvtx_strings", "ddp")},
        "kernel_scale": dict(o["kernel_scale"] or {}),
        "nccl_bandwidth_scale": o["nccl_bandwidth_scale"],
        "cpu_scale": o["cpu_scale"],
        "buckets": o["buckets"],
        "gradients": o["gradients"],
        "bucket_cap_mb": o["bucket_cap_mb"],
        "gradient_profile": o["gradient_profile"],
        "foreach": o["foreach"],
        "host_sync": o["host_sync"],
        "activation_gb": o["activation_gb"],
        "params": o["names"],
        "prefixes": o["prefixes"],
        "scaling": o["scaling"],
        "dataset": {
            "train_samples": o["train_samples"],
            "val_samples": o["val_samples"],
            "batch_per_rank": o["batch"],
            "gpus_param": "ranks",
            "model_parallel": 1,
            "weak_scaling": o["scaling"] == "weak",
        },
        "epochs": o["epochs"],
        "warmup_epochs": [0] if o["epochs"] > 1 else [],
        "warmup_factor": o["warmup_factor"],
        "train_steps": o["train_steps"],
        "val_steps": o["val_steps"],
        "repetitions": o["repetitions"],
        "noise": dict(zip(("instance", "rank", "repetition"), map(float, o["noise"]))),
        "rank_imbalance": o["imbalance"],
        "clock_offset_ns": o["clock_offset_ns"],
        "nccl_model": (
            {
                "alpha_s": NCCL_ALPHA,
                "bandwidth_Bps": NCCL_BANDWIDTH / o["nccl_bandwidth_scale"],
                "launch_s": NCCL_LAUNCH,
                "bucket_bytes": PARAM_BYTES / next(op.visits for op in o["ops"] if op.block == "bucket"),
            }
            if o["ddp"]
            else None
        ),
        "truth_replicates": o["truth_replicates"] if any(o["noise"]) else 0,
    }
