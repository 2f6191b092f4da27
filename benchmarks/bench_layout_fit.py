"""Speed of the layout model's calibration: its least-squares fit with the Jacobian's trial points
evaluated in one call (extradeep.layouts.fit_steps), against the same fit with one call per trial
point (what scipy's own '2-point' Jacobian does), in the same run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_layout_fit.py [--published DIR] [--repeats N]

(one BLAS thread, as the commands run; the last comparison sets its own).

Two calibrations: every vTrain layout (1,528 step times, with the held-out interval: one fit per
fold), and a simulated A100 study (four runs' per-part observations, read once before timing).
Both ways take the same steps, so the coefficients agree to rounding; the script checks that.

Then the vTrain calibration in fresh processes that load NumPy first, as a notebook does: with
OpenBLAS's default threads, the fit as it was before and as it is (it lowers them itself:
extradeep.processes.blas_single_threaded), and with one thread from the environment
(extradeep.processes.one_blas_thread, which the commands and the GUI apply). `--blas-only` runs
only this part.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import extradeep.layouts.model as layout_model
from extradeep.layout_profiles import read_profiled_runs
from extradeep.layouts.fit_steps import forward_differences
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.validation import VTRAIN_CLUSTER, vtrain_tables
from extradeep.simulate.gpt.config import GPTModel
from extradeep.simulate.gpt.study import simulate_gpt

STUDY = ["tp1.pp1.dp1.mbs1.nmb8", "tp2.pp1.dp1.mbs1.nmb8", "tp1.pp2.dp1.mbs1.nmb8", "tp4.pp1.dp1.mbs1.nmb8.rc2"]
SHAPE = {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 51200}


def one_call_per_point(columns, x, low, high):
    """The peer: the same forward differences, each trial point its own call (k + 1 calls)."""
    return forward_differences(lambda points: np.hstack([columns(p[:, None]) for p in points.T]), x, low, high)


def timed(fit, repeats: int) -> tuple[float, np.ndarray]:
    times, coef = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        coef = fit().coef_.to_numpy()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), coef


def compare(label: str, fit, repeats: int) -> None:
    batched, coef = timed(fit, repeats)
    layout_model.forward_differences = one_call_per_point
    try:
        single, peer_coef = timed(fit, repeats)
    finally:
        layout_model.forward_differences = forward_differences
    agree = np.max(np.abs(coef - peer_coef) / np.maximum(np.abs(peer_coef), 1e-12))
    print(
        f"{label}: batched {batched:.2f} s, one call per point {single:.2f} s, "
        f"ratio {single / batched:.1f}x; coefficients agree to {agree:.1e} (relative)"
    )


BLAS_CHILD = """
import sys, time
from pathlib import Path
import numpy  # loaded before extradeep, as in a notebook
import pandas as pd
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.validation import VTRAIN_CLUSTER, vtrain_tables
vtrain = pd.concat(vtrain_tables(Path(sys.argv[1])), ignore_index=True)
# the fit without its own one-thread block: how it ran before blas_single_threaded
fit = LayoutModel.fit.__wrapped__ if sys.argv[3] == "unwrapped" else LayoutModel.fit
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    fit(LayoutModel(hardware=VTRAIN_CLUSTER), vtrain)
    times.append(time.perf_counter() - start)
print(sorted(times)[len(times) // 2])
"""

BLAS_CASES = {  # label: (extra environment, fit)
    "default threads, the fit as before": ({}, "unwrapped"),
    "default threads, the fit lowers them itself": ({}, "fit"),
    "one thread from the environment": ({"OPENBLAS_NUM_THREADS": "1"}, "fit"),
}


def blas_threads(published: Path, repeats: int) -> None:
    """The vTrain calibration with OpenBLAS's default threads and with one, in fresh processes."""
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    seconds = {}
    for label, (extra, fit) in BLAS_CASES.items():
        argv = [sys.executable, "-c", BLAS_CHILD, str(published), str(repeats), fit]
        done = subprocess.run(argv, env={**base, **extra}, capture_output=True, text=True, check=True)
        seconds[label] = float(done.stdout.split()[-1])
    floor = seconds["one thread from the environment"]
    print(f"vTrain calibration ({os.cpu_count()} CPUs), against one thread from the environment ({floor:.2f} s):")
    for label, value in seconds.items():
        print(f"  {label}: {value:.2f} s ({value / floor:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--published", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "published")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blas-only", action="store_true", help="only the BLAS threads comparison")
    args = parser.parse_args()
    if args.blas_only:
        blas_threads(args.published, args.repeats)
        return
    vtrain = pd.concat(vtrain_tables(args.published), ignore_index=True)
    compare(
        "vTrain, 1,528 step times, with interval",
        lambda: LayoutModel(hardware=VTRAIN_CLUSTER).fit(vtrain),
        args.repeats,
    )
    with tempfile.TemporaryDirectory() as folder:
        simulate_gpt(Path(folder), STUDY, model=GPTModel(**SHAPE), steps=3, formats=("nsys",))
        paths = sorted(str(p) for p in Path(folder).glob("*.sqlite"))
        parts = read_profiled_runs(paths, SHAPE).parts
    compare(
        "simulated A100 study, per-part observations, with interval",
        lambda: LayoutModel().fit(None, parts),
        args.repeats,
    )
    blas_threads(args.published, args.repeats)


if __name__ == "__main__":
    main()
