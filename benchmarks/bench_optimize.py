"""The strategy search (`extradeep.predictor.optimize`): speed at 64 ranks x 2,000 ops per step, and
accuracy against an exhaustive sweep of bucket layouts in the simulator.

Speed: the synthetic run of bench_predictor.py with communication exposed (4 ms all-reduce buckets
behind a device synchronize at the step end) and an AccumulateGrad range after every 10th kernel of
the backward half, so that the bucket search has gradients to group. The search's time is compared
with one replay of the same graph measured in the same run (the floor every candidate pays).

Accuracy: simulated DDP runs whose default buckets (bucket_cap_mb=25) leave communication exposed;
for each, every contiguous layout of the gradients is simulated noise-free (the truth), and the
search's best layout is simulated too. With --fallbacks the same runs are searched without the
gradient shapes (bytes shared equally within buckets) and without the AccumulateGrad ranges (the
measured collectives as units).

    python benchmarks/bench_optimize.py [--ranks 64] [--activities 2000] [--gradients 8] [--fallbacks]
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_predictor import synthetic_trace  # noqa: E402

SCENARIOS = [  # (gradient profile, NCCL bandwidth scale, format)
    ("uniform", 0.3, "nsys"),
    ("uniform", 0.5, "nsys"),
    ("uniform", 1.0, "nsys"),
    ("resnet", 0.3, "nsys"),
    ("resnet", 1.0, "nsys"),
    ("uniform", 0.5, "kineto"),
]


def bench_speed(ranks: int, activities: int, steps: int) -> None:
    from extradeep.predictor.graph import build_graph
    from extradeep.predictor.optimize import StrategySearch
    from extradeep.predictor.replay import plan_replay, replay

    trace = synthetic_trace(ranks, activities, steps, comm_us=4000, grad_every=10, sync_all=True)
    print(f"synthetic: {ranks} ranks x {activities} activities/step x {steps} steps = {len(trace.ops)} ops")
    start = time.perf_counter()
    last = [start]

    def progress(done, total, text):
        now = time.perf_counter()
        print(f"  {now - start:7.2f} s (+{now - last[0]:5.2f})  {text}")
        last[0] = now

    search = StrategySearch().fit(trace, progress=progress)
    total = time.perf_counter() - start
    graph = search.baseline_.graph
    t = time.perf_counter()
    plan = plan_replay(graph)
    t_plan = time.perf_counter() - t
    t = time.perf_counter()
    replay(graph, plan)
    t_replay = time.perf_counter() - t
    t = time.perf_counter()
    build_graph(trace)
    t_graph = time.perf_counter() - t
    table = search.strategies_
    print(
        f"search from the RunTrace: {total:.2f} s; {len(table)} strategies replayed; one graph build {t_graph:.2f} s, "
        f"one plan {t_plan:.2f} s, one replay {t_replay:.3f} s; search / (build + plan + replay) = "
        f"{total / (t_graph + t_plan + t_replay):.1f}"
    )
    print(f"  {search.verdict_}")


def bench_accuracy(gradients: int, fallbacks: bool) -> None:
    from extradeep.predictor import gradients as grad_mod
    from extradeep.predictor.optimize import StrategySearch
    from extradeep.simulate import simulate
    from extradeep.simulate.sweep import all_layouts, bucket_sweep

    modes = ["shapes"] + (["shared", "collectives"] if fallbacks else [])
    print(f"\naccuracy: {gradients} gradients, {2 ** (gradients - 1)} layouts swept per run")
    print(
        "profile  bw   format  mode         default ms  exhaustive best ms  search layout  simulated ms  "
        "vs best  sim gain  pred gain"
    )
    for profile, bw, fmt in SCENARIOS:
        with tempfile.TemporaryDirectory() as out:
            sim = simulate(
                out,
                params={"ranks": [4]},
                repetitions=1,
                epochs=2,
                train_steps=4,
                val_steps=1,
                ddp=True,
                seed=5,
                gradients=gradients,
                gradient_profile=profile,
                nccl_bandwidth_scale=bw,
                formats=(fmt,),
            )
            kw = dict(gradients=gradients, gradient_profile=profile, nccl_bandwidth_scale=bw)
            sweep = bucket_sweep(list(all_layouts(gradients)), **kw).set_index("layout")["step_s"]
            default = sweep[tuple(sim.truth["points"][0]["gradients"]["layout"])]
            for mode in modes:
                saved = (grad_mod._unit_shapes, grad_mod.ACCUMULATE)
                if mode == "shared":
                    grad_mod._unit_shapes = lambda *a, **k: None
                elif mode == "collectives":
                    grad_mod.ACCUMULATE = "no such operator"
                try:
                    table = StrategySearch().fit(out).strategies_
                finally:
                    grad_mod._unit_shapes, grad_mod.ACCUMULATE = saved
                buckets = table[table["type"] == "buckets"]
                if buckets.empty:
                    print(f"{profile:8} {bw:<4} {fmt:7} {mode:12} no bucket strategy")
                    continue
                best = buckets.iloc[0]
                layout = tuple(int(x) for x in re.search(r"of \[([^\]]*)\]", best["detail"]).group(1).split(","))
                if mode == "collectives":  # units are the measured buckets: expand to gradients
                    measured = sim.truth["points"][0]["gradients"]["layout"]
                    cuts = [0, *itertools.accumulate(measured)]
                    bounds = [0, *itertools.accumulate(layout)]
                    layout = tuple(cuts[b] - cuts[a] for a, b in zip(bounds[:-1], bounds[1:]))
                simulated = bucket_sweep([list(layout)], **kw)["step_s"][0]
                print(
                    f"{profile:8} {bw:<4} {fmt:7} {mode:12} {1e3 * default:10.3f}  {1e3 * sweep.min():18.3f}  "
                    f"{str(list(layout)):13}  {1e3 * simulated:12.3f}  {100 * (simulated / sweep.min() - 1):+6.2f} %  "
                    f"{100 * (1 - simulated / default):6.2f} %  {100 * best['gain']:7.2f} %"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--activities", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--gradients", type=int, default=8)
    parser.add_argument("--fallbacks", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    if not args.skip_speed:
        bench_speed(args.ranks, args.activities, args.steps)
    bench_accuracy(args.gradients, args.fallbacks)


if __name__ == "__main__":
    main()
