"""The layout model on the published measurements (issue 23), and the speed of the search.

    python benchmarks/bench_layouts.py [--published DIR] [--speed-only]

1. Leave one model out on vTrain's tables: calibrate on the 1,440 single-node runs and two of the
   three multi-node models, predict every layout of the third; per left-out model the mean and worst
   absolute error, Spearman's rho, the predicted rank of the fastest measured layout, the interval's
   coverage, and the measured time of the layout the model ranks first over the fastest measured.
2. Megatron-LM's SC'21 Table 1 from its smallest row (1F1B, and with interleaving allowed).
3. Speed: a search of about 10,000 candidate layouts (GPT 39.1B on 64 to 1,024 GPUs, ZeRO 0-3,
   three recomputation kinds, 1F1B and interleaved), timed against a floor in the same run: the bare
   NumPy pass that computes each candidate's training FLOPs (the least any model must do per layout).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import STEP_TIME, WORKLOAD
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.search import search_layouts
from extradeep.layouts.space import enumerate_layouts
from extradeep.layouts.validation import VTRAIN_CLUSTER, leave_one_model_out, megatron_check, vtrain_tables
from extradeep.layouts.workload import TransformerShape, training_flops

GPT_39B = TransformerShape(layers=48, hidden=8192, heads=64, seq_len=2048, name="GPT 39.1B")
SPACE = {
    "micro_batches": (1, 2, 3, 4, 6, 8, 12, 16),
    "zero": (0, 1, 2, 3),
    "recompute": ("none", "selective", "full"),
    "schedules": ("1f1b", "interleaved"),
    "chunks": (2, 3, 4),
}
GPUS = [64, 96, 128, 192, 256, 384, 512, 768, 1024]


def accuracy(folder: Path) -> None:
    rows, summary = leave_one_model_out(folder)
    picked = rows.loc[rows.groupby(WORKLOAD)["predicted"].idxmin(), [WORKLOAD, STEP_TIME]].set_index(WORKLOAD)
    best = rows.groupby(WORKLOAD)[STEP_TIME].min()
    summary["pick_over_best"] = summary[WORKLOAD].map(picked[STEP_TIME] / best)
    print("leave one model out (vTrain, A100):")
    print(summary.round(3).to_string(index=False))
    print()
    for chunks, label in (((1,), "1F1B"), ((1, 2, 4), "1F1B or interleaved")):
        table = megatron_check(folder, chunks=chunks)
        print(f"Megatron-LM SC'21 Table 1 from its smallest row ({label}):")
        print(table.round(2).to_string(index=False))
        print()


def speed(folder: Path) -> None:
    single, multi = vtrain_tables(folder)
    model = LayoutModel(hardware=VTRAIN_CLUSTER).fit(pd.concat([single, multi], ignore_index=True))
    layouts = enumerate_layouts(GPT_39B, GPUS, 1536, 8, **SPACE)
    floors, searches = [], []
    for _ in range(5):
        start = time.perf_counter()
        layouts = enumerate_layouts(GPT_39B, GPUS, 1536, 8, **SPACE)
        training_flops(layouts["global_batch"], 2048, 48, 8192, 51200)
        floors.append(time.perf_counter() - start)
        start = time.perf_counter()
        table = search_layouts(model, GPT_39B, GPUS, 1536, **SPACE)
        searches.append(time.perf_counter() - start)
    floor, search = np.median(floors), np.median(searches)
    print(f"search of {len(table)} candidate layouts ({int(table['fits'].sum())} fit): {search:.3f} s (median of 5)")
    print(f"floor (enumerate + FLOPs per layout): {floor:.3f} s; search / floor = {search / floor:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--published", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "published")
    parser.add_argument("--speed-only", action="store_true")
    args = parser.parse_args()
    if not args.speed_only:
        accuracy(args.published)
    speed(args.published)


if __name__ == "__main__":
    main()
