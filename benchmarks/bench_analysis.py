"""Accuracy and speed of the analysis: epoch-time predictions beyond the modeling range, on
simulator data with known truth, and the time to model, predict and write a report.

Run: python benchmarks/bench_analysis.py  (simulates into a temp folder; prints one line per case).
Modeling points ranks 2-10 (2 repetitions), evaluation points 20 (2x) and 40 (4x), 1 repetition;
dataset 50,000/10,000 samples, batch 64 per rank (strong scaling). CPU time is printed next to
wall time because the machine may be shared.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from extradeep.analysis.analyse import analyse, measured_points, prediction_table
from extradeep.analysis.bottlenecks import bottleneck_table
from extradeep.analysis.cost import CostSettings
from extradeep.experiment import Dataset
from extradeep.ingest import load_experiment
from extradeep.report.html import ReportInputs, build_html
from extradeep.simulate import simulate

DATASET = Dataset(train_samples=50_000, val_samples=10_000, batch_per_rank=64)
CASES = {
    "default (NCCL buckets overlap the backward pass)": {},
    "fast network (NCCL bandwidth x16)": {"nccl_bandwidth_scale": 16.0},
    "slow network (NCCL bandwidth x0.25)": {"nccl_bandwidth_scale": 0.25},
}


def accuracy(tmp: Path, name: str, kw: dict) -> None:
    simulate(tmp / "model", params={"ranks": [2, 4, 6, 8, 10]}, repetitions=2, seed=1, **kw)
    simulate(tmp / "eval", params={"ranks": [20, 40]}, repetitions=1, seed=2, **kw)
    cache = tmp / "cache"
    modeling = load_experiment([tmp / "model"], params=["ranks"], cache_dir=cache, progress=False)
    held = load_experiment([tmp / "eval"], params=["ranks"], cache_dir=cache, progress=False)
    analysis = analyse(modeling, DATASET)
    measured, _ = measured_points(held, DATASET)
    measured = measured[measured["quantity"] == "epoch time"].set_index("ranks")["value"]
    truth = {p["params"]["ranks"]: p["epoch_time"] for p in json.loads((tmp / "eval" / "truth.json").read_text())["points"]}
    table = prediction_table(analysis, pd.DataFrame({"ranks": [20.0, 40.0]}))
    table = table[table["quantity"] == "epoch time"].set_index("ranks")
    parts = []
    for ranks in (20, 40):
        row = table.loc[float(ranks)]
        noise = abs(measured[ranks] - truth[ranks]) / truth[ranks] * 100
        parts.append(f"{ranks} ranks: error vs measured {abs(row['T'] - measured[ranks]) / measured[ranks] * 100:.1f}%, "
                     f"vs truth {abs(row['T'] - truth[ranks]) / truth[ranks] * 100:.1f}% "
                     f"(measurement noise {noise:.1f}%, measured inside interval: "
                     f"{'yes' if row['T_lo'] <= measured[ranks] <= row['T_hi'] else 'no'})")
    print(f"accuracy, {name}: " + "; ".join(parts))


def speed(tmp: Path) -> None:
    simulate(tmp / "sample", params={"ranks": [2, 4, 6, 8, 10, 12, 16]}, repetitions=2, seed=0)
    experiment = load_experiment([tmp / "sample"], params=["ranks"], cache_dir=tmp / "c2", progress=False)
    t0, c0 = time.perf_counter(), time.process_time()
    analysis = analyse(experiment, DATASET)
    t1, c1 = time.perf_counter(), time.process_time()
    grid = pd.DataFrame({"ranks": [32.0, 64.0, 128.0]})
    predictions = prediction_table(analysis, grid, CostSettings())
    inputs = ReportInputs(analysis, predictions, bottleneck_table(analysis.region_models, {"ranks": 128.0}, ["ranks"]),
                          CostSettings(), x_max=128.0)
    html = build_html(inputs)
    t2, c2 = time.perf_counter(), time.process_time()
    regions = len(analysis.region_models)
    print(f"speed: analyse() of the sample set ({regions} region metrics x 2 phases + 6 quantities): "
          f"{t1 - t0:.2f} s wall, {c1 - c0:.2f} s CPU; predictions + HTML report ({len(inputs.figures)} figures, "
          f"{len(html) / 1e6:.1f} MB): {t2 - t1:.2f} s wall, {c2 - c1:.2f} s CPU")


def main() -> None:
    for name, kw in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            accuracy(Path(tmp), name, kw)
    with tempfile.TemporaryDirectory() as tmp:
        speed(Path(tmp))


if __name__ == "__main__":
    main()
