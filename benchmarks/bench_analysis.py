"""Accuracy and speed of the analysis: epoch-time predictions beyond the modeling range, on
simulator data with known truth, and the time to model, predict and write a report.

Run: python benchmarks/bench_analysis.py [--seeds 1,3,5] [--repetitions 2]  (simulates into temp
folders; prints a Markdown table row per case). Modeling points ranks 2-10, evaluation points 20
(2x) and 40 (4x) with 2 repetitions of the next seed; dataset 50,000/10,000 samples, batch 64 per
rank (strong scaling). Errors are against truth.json's expected epoch time (the median of noisy
replicates the files never use); "measurement noise" is how far the measured evaluation points
are from it. CPU time is printed next to wall time because the machine may be shared.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from extradeep import load_experiment
from extradeep.aggregate.experiment import Dataset
from extradeep.analysis.bottlenecks import bottleneck_table
from extradeep.analysis.core import analyse, measured_points, prediction_table
from extradeep.analysis.cost import CostSettings
from extradeep.report.html import ReportInputs, build_html
from extradeep.simulate import simulate

DATASET = Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64)
CASES = {
    "default": {},
    "fast (NCCL x16)": {"nccl_bandwidth_scale": 16.0},
    "slow (NCCL x0.25)": {"nccl_bandwidth_scale": 0.25},
    "DDP buckets, imbalance 8%": {"ddp": True},
}


def accuracy(tmp: Path, name: str, kw: dict, seed: int, repetitions: int) -> None:
    """One row per case: epoch-time error at 20 (2x) and 40 (4x) ranks against truth.json's expected
    epoch time, with the exposure replay (the default) and without it (--no-replay)."""
    simulate(tmp / "model", params={"ranks": [2, 4, 6, 8, 10]}, repetitions=repetitions, seed=seed, **kw)
    simulate(tmp / "eval", params={"ranks": [20, 40]}, repetitions=2, seed=seed + 1, **kw)
    cache = tmp / "cache"
    held = load_experiment([tmp / "eval"], params=["ranks"], cache_dir=cache, progress=False, replay=False)
    measured, _ = measured_points(held, DATASET)
    measured = measured[measured["quantity"] == "epoch time"].set_index("ranks")["value"]
    truth = {
        p["params"]["ranks"]: p["epoch_time"] for p in json.loads((tmp / "eval" / "truth.json").read_text())["points"]
    }
    noise = "/".join(f"{abs(measured[r] - truth[r]) / truth[r] * 100:.1f}" for r in (20, 40))
    cells = []
    for replay in (True, False):
        modeling = load_experiment([tmp / "model"], params=["ranks"], cache_dir=cache, progress=False, replay=replay)
        analysis = analyse(modeling, DATASET)
        table = prediction_table(analysis, pd.DataFrame({"ranks": [20.0, 40.0]}))
        table = table[table["quantity"] == "epoch time"].set_index("ranks")
        errors = []
        for ranks in (20, 40):
            row = table.loc[float(ranks)]
            inside = "" if row["T_lo"] <= truth[ranks] <= row["T_hi"] else " (outside)"
            width = (row["T_hi"] - row["T_lo"]) / 2 / row["T"] * 100
            errors.append(f"{(row['T'] - truth[ranks]) / truth[ranks] * 100:+.1f}% ±{width:.0f}{inside}")
        cells.append(f"{analysis.model().train.choice}, " + " / ".join(errors))
    print(f"| {name}, seed {seed}, {repetitions} rep | {noise}% | {cells[0]} | {cells[1]} |", flush=True)


def speed(tmp: Path) -> None:
    simulate(tmp / "sample", params={"ranks": [2, 4, 6, 8, 10, 12, 16]}, repetitions=2, seed=0)
    experiment = load_experiment([tmp / "sample"], params=["ranks"], cache_dir=tmp / "c2", progress=False)
    t0, c0 = time.perf_counter(), time.process_time()
    analysis = analyse(experiment, DATASET)
    t1, c1 = time.perf_counter(), time.process_time()
    grid = pd.DataFrame({"ranks": [32.0, 64.0, 128.0]})
    predictions = prediction_table(analysis, grid, CostSettings())
    inputs = ReportInputs(
        analysis,
        predictions,
        bottleneck_table(analysis.region_models, {"ranks": 128.0}, ["ranks"]),
        CostSettings(),
        x_max=128.0,
    )
    html = build_html(inputs)
    t2, c2 = time.perf_counter(), time.process_time()
    regions = len(analysis.region_models)
    print(
        f"speed: analyse() of the sample set ({regions} region metrics x 2 phases + 6 quantities): "
        f"{t1 - t0:.2f} s wall, {c1 - c0:.2f} s CPU; predictions + HTML report ({len(inputs.figures)} figures, "
        f"{len(html) / 1e6:.1f} MB): {t2 - t1:.2f} s wall, {c2 - c1:.2f} s CPU"
    )


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,3,5", help="simulator seeds (comma-separated)")
    parser.add_argument("--repetitions", type=int, default=2, help="repetitions of the modeling points")
    parser.add_argument("--no-speed", action="store_true", help="accuracy only")
    args = parser.parse_args()
    print(
        "| case | measurement noise 2x/4x | with replay: rule, error 2x / 4x (±half-width of the 95% interval) "
        "| --no-replay: rule, error 2x / 4x |"
    )
    print("|---|---|---|---|")
    for name, kw in CASES.items():
        for seed in (int(s) for s in args.seeds.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                accuracy(Path(tmp), name, kw, seed, args.repetitions)
    if not args.no_speed:
        with tempfile.TemporaryDirectory() as tmp:
            speed(Path(tmp))


if __name__ == "__main__":
    main()
