"""Speed of the simulator: the sample set, and one wide DDP run (64 ranks) for the predictor.

Run: python benchmarks/bench_simulate.py  (prints one line per case; writes to a temp folder).
CPU time is printed next to wall time because the machine may be shared.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from extradeep.simulate import simulate

CASES = {
    "sample set (ranks 2-16, 2 reps, 116 files)": dict(params={"ranks": [2, 4, 6, 8, 10, 12, 16]}, repetitions=2),
    "sample set without truth replicates": dict(
        params={"ranks": [2, 4, 6, 8, 10, 12, 16]}, repetitions=2, truth_replicates=0
    ),
    "DDP run, 64 ranks, 1 rep": dict(params={"ranks": [64]}, repetitions=1, ddp=True),
}


def main() -> None:
    for name, kw in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            t0, c0 = time.perf_counter(), time.process_time()
            sim = simulate(Path(tmp) / "out", **kw)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            size = sum(Path(p).stat().st_size for p in sim.files.path)
            print(
                f"{name}: {seconds:.2f} s wall, {cpu:.2f} s CPU, {len(sim.files)} files, "
                f"{len(sim.files) / cpu:.0f} files per CPU-second, {size / 1e6:.1f} MB"
            )


if __name__ == "__main__":
    main()
