"""Ground truth for bucket layouts: the simulated DDP step time of each layout, without writing files.

`bucket_sweep(layouts, ...)` runs the causal simulator noise-free for every layout (the same
workload as `simulate(..., ddp=True, gradients=N, ...)` at one point) and returns the training
step time of each: the slowest rank's, median over the steps after the first. With
`all_layouts(N)` (every contiguous grouping of N gradients, 2^(N-1) of them) it is the exhaustive
sweep a search is judged against.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from extradeep.simulate.catalogue import PARAM_BYTES, apply_scales, default_catalogue
from extradeep.simulate.engine import Engine
from extradeep.simulate.gradients import gradient_sizes
from extradeep.simulate.program import LoopConfig, TrainingProgram
from extradeep.simulate.run import T0_NS, _per_instance, bucket_plan


def all_layouts(n: int):
    """Every layout of n gradients (compositions of n), fewest buckets first."""
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            bounds = (0, *cuts, n)
            yield [bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)]


def bucket_sweep(
    layouts,
    *,
    ranks: int = 4,
    gradients: int = 16,
    gradient_profile: str = "resnet",
    nccl_bandwidth_scale: float = 1.0,
    kernel_scale: dict | None = None,
    cpu_scale: float = 1.0,
    foreach: bool = False,
    host_sync: bool = False,
    imbalance: float = 0.08,
    batch: int = 64,
    train_steps: int = 3,
    seed: int = 0,
) -> pd.DataFrame:
    """Step time (s) of every layout: columns layout (tuple), buckets, step_s."""
    sizes = gradient_sizes(gradients, PARAM_BYTES, gradient_profile)
    skew = 1.0 + imbalance * np.linspace(0.0, 1.0, ranks)
    cfg = LoopConfig(epochs=1, train_steps=train_steps, val_steps=0, marks="ranges", ddp=True, host_sync=host_sync)
    rows, cache = [], {}
    for layout in layouts:
        layout = [int(c) for c in layout]
        nb = len(layout)
        if nb not in cache:  # the catalogue depends on the number of buckets only
            ops = apply_scales(default_catalogue(True, nb, gradients, foreach), kernel_scale, nccl_bandwidth_scale)
            durations, op_bytes = _per_instance(ops, ["ranks"], batch, {"ranks": float(ranks)}, {"ranks": ranks})
            cache[nb] = (ops, durations, op_bytes)
        ops, durations, op_bytes = cache[nb]
        plan = bucket_plan(ops, durations, sizes, layout, ranks)
        engine = Engine(ranks, np.random.default_rng(seed), (0.0, 0.0, 0.0), T0_NS, skew, cpu_scale)
        program = TrainingProgram(engine, ops, durations, op_bytes, cfg, plan)
        program.run()
        times = [float(np.max(end - start)) / 1e9 for _e, phase, _s, start, end in program.windows if phase == "train"]
        rows.append({"layout": tuple(layout), "buckets": nb, "step_s": float(np.median(times[1:] or times))})
    return pd.DataFrame(rows)
