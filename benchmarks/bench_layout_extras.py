"""Issue 23 items 3, 5, 6 and 7 on the GPT simulator's truth (figures in docs/performance.md).

    python benchmarks/bench_layout_extras.py

A 130M-parameter GPT (8 layers, hidden 1024, sequence 1024) profiled by the simulator (nsys, A100s):
1. Energy: power per GPU calibrated on the profiles' GPU_METRICS power samples against the data
   sheet's 400 W, at eight layouts of 64-512 GPUs (truth: the simulator's mean board power).
2. What to profile: a layout model calibrated on the runs `plan_layout_runs` proposes (V-optimal at
   the targets, D-optimal) against the data-parallel sweep of the same GPU-hours, at the same layouts.
3. Memory: the peak estimate calibrated on the peaks the nsys profiles record, against the formula alone.
4. Other GPU types: A100-calibrated predictions of the simulator's H100 truth, with and without the
   profile's kernel classes moving compute.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from extradeep.columns import STEP_TIME
from extradeep.layout_profiles import read_profiled_runs
from extradeep.layouts.design import naive_runs, plan_layout_runs
from extradeep.layouts.energy import PowerModel
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.transfer import transferred_model
from extradeep.layouts.workload import TransformerShape
from extradeep.simulate.gpt.config import RECOMPUTE_MODES, GPTModel
from extradeep.simulate.gpt.frames import truth_frame, truth_parts
from extradeep.simulate.gpt.study import simulate_gpt

MODEL = GPTModel(layers=8, hidden=1024, heads=16, seq=1024, vocab=51200, name="gpt-medium")
SHAPE = TransformerShape(layers=8, hidden=1024, heads=16, seq_len=1024, vocab=51200)
SHAPE_DICT = {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 51200}
PROFILED = [
    "tp1.pp1.dp1.mbs1.nmb8",
    "tp1.pp1.dp1.mbs2.nmb8.rc2",
    "tp2.pp1.dp1.mbs1.nmb8",
    "tp1.pp2.dp1.mbs1.nmb8",
    "tp1.pp1.dp2.mbs1.nmb4.zero1.rc2",
    "tp4.pp1.dp1.mbs1.nmb8.rc2",
    "tp2.pp2.dp1.mbs1.nmb8",
]
TARGETS = [
    "tp4.pp2.dp8.mbs1.nmb8",
    "tp8.pp2.dp4.mbs1.nmb16",
    "tp2.pp4.dp8.mbs1.nmb16",
    "tp1.pp1.dp64.mbs2.nmb2",
    "tp8.pp1.dp32.mbs1.nmb4",
    "tp2.pp2.dp128.mbs1.nmb4",
    "tp4.pp4.dp16.mbs1.nmb8.rc2",
    "tp2.pp1.dp256.mbs1.nmb2.zero1",
]


def errors(predicted, truth) -> str:
    e = np.abs(np.asarray(predicted, float) / np.asarray(truth, float) - 1)
    return f"median {100 * np.median(e):.1f}%, worst {100 * e.max():.1f}%"


def label(r) -> str:
    rc = RECOMPUTE_MODES.index(r.recompute)
    return f"tp{r.tp}.pp{r.pp}.dp{r.dp}.mbs{r.micro_batch}.nmb{r.micro_batches}.zero{r.zero}.rc{rc}"


def main() -> None:
    started = time.perf_counter()
    a100 = truth_frame(TARGETS, MODEL)
    with tempfile.TemporaryDirectory() as folder:
        simulate_gpt(folder, PROFILED, model=MODEL, steps=3, formats=("nsys",), noise=(0.01, 0.005, 0.005))
        paths = sorted(str(p) for p in Path(folder).glob("*.sqlite"))
        profiled = read_profiled_runs(paths, SHAPE_DICT)
    model = LayoutModel().fit(None, profiled.parts)
    predicted = model.predict(a100)

    power = PowerModel().fit(model, profiled.power)
    print(f"1. power per GPU ({power.source_}; idle {power.idle_:.0f} W, busy {power.busy_:.0f} W):")
    print(
        f"   calibrated {errors(power.predict(predicted), a100['power'])}; data sheet 400 W {errors(400.0, a100['power'])}"
    )
    energy = a100["gpus"] * power.predict(predicted) * predicted[STEP_TIME]
    print(f"   energy per step {errors(energy, a100['gpus'] * a100['power'] * a100[STEP_TIME])}")

    naive = naive_runs(SHAPE, 16, budget_gpu_hours=2.6)
    budget = float(naive["gpu_hours"].sum())
    print(f"2. what to profile ({budget:.2f} GPU-hours each), step time at the eight layouts:")
    for name, runs in (
        ("data-parallel sweep", naive),
        ("plan, V-optimal", plan_layout_runs(SHAPE, 16, budget_gpu_hours=budget, targets=a100)),
        ("plan, D-optimal", plan_layout_runs(SHAPE, 16, budget_gpu_hours=budget)),
    ):
        observed = truth_frame([label(r) for r in runs.itertuples()], MODEL)
        fitted = LayoutModel(interval=None).fit(None, truth_parts(observed))
        print(f"   {name}: {len(runs)} runs, {errors(fitted.predict(a100)[STEP_TIME], a100[STEP_TIME])}")

    formula = LayoutModel(interval=None).fit(None)
    print("3. peak memory per GPU:")
    print(f"   calibrated on the nsys peaks {errors(predicted['peak_memory'], a100['peak_memory'])}")
    print(f"   formula alone {errors(formula.predict(a100)['peak_memory'], a100['peak_memory'])}")

    h100 = truth_frame(TARGETS, MODEL, gpu="h100-sxm")
    moved = transferred_model(model, profiled.kernel_classes, "h100-sxm")
    print(f"4. H100 from A100 profiles (transfer factor {moved.transfer_factor_:.3f}):")
    for name, m in (("rooflines of the model's terms", model), ("moved by the kernel classes", moved)):
        p = m.predict(h100, "h100-sxm")
        inside = ((h100[STEP_TIME] >= p[STEP_TIME + "_low"]) & (h100[STEP_TIME] <= p[STEP_TIME + "_high"])).sum()
        print(f"   {name}: {errors(p[STEP_TIME], h100[STEP_TIME])}, truth inside the interval {inside}/{len(h100)}")
    print(f"   (same layouts on the A100 itself: {errors(predicted[STEP_TIME], a100[STEP_TIME])})")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
