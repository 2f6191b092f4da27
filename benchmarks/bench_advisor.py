"""Measurement advisor vs the default grid vs a Gaussian-process strategy, on simulated campaigns.

Each strategy starts cheap and adds runs until the 95% interval of the step-time model at 4x the
largest allocation is narrower than the goal; every run is simulated and read through the whole
pipeline (the same simulated run serves every strategy that asks for it). Prints one row per
scenario and strategy: GPU-hours spent, the interval reached and the error against the
simulator's truth at the target. Usage: python benchmarks/bench_advisor.py [--goal 5] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

from extradeep.simulate.campaign import Scenario, compare

SCENARIOS = [
    Scenario("compute-bound", kernel_scale={"*gemm*": 2.0}, bandwidth_scale=8.0, seed=1),
    Scenario("communication-bound", bandwidth_scale=0.25, seed=2),
    Scenario(
        "node boundary (emulated at 8 ranks)", boundary=8, bandwidth_scale=2.0, beyond_bandwidth_scale=0.5, seed=3
    ),
    Scenario("node boundary (simulated topology dgx-8-nvswitch)", topology="dgx-8-nvswitch", seed=4),
    Scenario("compute-bound, allocation 16", max_ranks=16, kernel_scale={"*gemm*": 2.0}, bandwidth_scale=8.0, seed=1),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goal", type=float, default=5.0, help="interval half-width goal in %% (default 5)")
    parser.add_argument("--quick", action="store_true", help="the first scenario only")
    parser.add_argument("--only", help="scenarios whose name contains this text")
    parser.add_argument("--strategies", default="grid,advisor,gp", help="comma-separated (default all three)")
    args = parser.parse_args()
    frames = []
    chosen = [s for s in SCENARIOS if args.only is None or args.only in s.name]
    for scenario in chosen[:1] if args.quick else chosen:
        start = time.perf_counter()
        frames.append(compare(scenario, goal_pct=args.goal, strategies=tuple(args.strategies.split(","))))
        print(f"{scenario.name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    table = pd.concat(frames, ignore_index=True)
    grid = table[table["strategy"] == "grid"].set_index("scenario")["gpu_hours"]
    if not grid.empty:
        table["vs_grid"] = table["gpu_hours"] / table["scenario"].map(grid)
    pd.set_option("display.width", 200)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
