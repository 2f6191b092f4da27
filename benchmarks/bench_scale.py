"""Reading throughput at 1, 2, ... worker processes: Dask LocalCluster against the local pool.

(a) A simulated study of >= 1,000 small exports (simulation not timed): files per second and MB/s
    of reading every export (no cache) on a LocalCluster of 1..N one-thread worker processes, and
    on the local process pool (the default without --scheduler) with the same number of processes;
    speedup over 1 worker and efficiency (speedup / workers).
(b) The default for small folders: reading a 20-export folder end to end (read_experiment, no
    replay), with the local pool versus `scheduler="local"` (which starts a LocalCluster).
(c) Cost per file and per byte: one process reads exports of two sizes; a + b * bytes per file,
    the basis of docs/performance.md's estimate for a 1 TB study on N nodes.

Usage: python benchmarks/bench_scale.py [--files 1000] [--workers 1,2] [--workdir DIR]
On a shared machine, compare the rows of one run only; they are measured back to back.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def simulate_study(directory: Path, files: int, train_steps: int = 2) -> Path:
    from extradeep.simulate import simulate

    ranks = [8, 16, 32, 64]
    reps = max(1, -(-files // sum(ranks)))
    out = directory / f"study-{files}-{train_steps}"
    if not out.exists():
        simulate(
            out,
            app="toy",
            params={"ranks": ranks},
            repetitions=reps,
            epochs=2,
            train_steps=train_steps,
            val_steps=1,
            seed=1,
        )
    return out


def study_runs(directory: Path):
    from extradeep.io import discover

    runs, problems = discover.runs_from_names([directory], {})
    runs, problems = discover.validate_runs(runs, problems)
    assert not problems, problems[:3]
    return runs


def timed_read(runs, client=None, jobs=None) -> float:
    from extradeep.io.execute import read_all
    from extradeep.io.settings import ReaderSettings

    start = time.perf_counter()
    results, _ = read_all(runs, ReaderSettings(), jobs=jobs, cache_dir=None, progress=False, client=client)
    elapsed = time.perf_counter() - start
    assert all(r["problem"] is None for r in results)
    return elapsed


def throughput_table(runs, workers: list[int]) -> list[dict]:
    from extradeep.io.cluster import connect

    megabytes = runs["size"].sum() / 1e6
    rows = []
    for n in workers:
        with connect("local", jobs=n) as client:
            client.wait_for_workers(n, timeout=120)
            client.run(lambda: __import__("extradeep.io.nsys.read"))  # imports are not reading
            dask_s = timed_read(runs, client=client)
        pool_s = timed_read(runs, jobs=n)
        rows.append({"workers": n, "dask_s": dask_s, "pool_s": pool_s})
    for row in rows:
        for kind in ("dask", "pool"):
            row[f"{kind}_files_s"] = len(runs) / row[f"{kind}_s"]
            row[f"{kind}_mb_s"] = megabytes / row[f"{kind}_s"]
            row[f"{kind}_speedup"] = rows[0][f"{kind}_s"] / row[f"{kind}_s"]
    return rows


def small_folder(directory: Path, repeat: int = 3) -> dict:
    from extradeep.aggregate.ingest import read_experiment
    from extradeep.simulate import simulate

    out = directory / "small"
    if not out.exists():
        simulate(
            out,
            app="toy",
            params={"ranks": [2, 3, 4, 5, 6]},
            repetitions=1,
            epochs=2,
            train_steps=2,
            val_steps=1,
            seed=5,
        )
    times = {}
    for label, scheduler in (("local pool", None), ("LocalCluster", "local")):
        walls = []
        for _ in range(repeat):
            start = time.perf_counter()
            read_experiment([out], ["ranks"], use_cache=False, progress=False, jobs=2, scheduler=scheduler)
            walls.append(time.perf_counter() - start)
        times[label] = statistics.median(walls)
    return times


def cost_per_file_and_byte(directory: Path, count: int = 40) -> tuple[float, float, float, float]:
    """(seconds per file, seconds per byte, mean bytes small, mean bytes large) in one process."""
    from extradeep.io.execute import read_one
    from extradeep.io.settings import ReaderSettings

    points = []
    for steps in (2, 40):
        runs = study_runs(simulate_study(directory, count, train_steps=steps)).head(count)
        start = time.perf_counter()
        for path in runs["path"]:
            read_one(path, ReaderSettings())
        points.append(((time.perf_counter() - start) / len(runs), runs["size"].mean()))
    (t1, s1), (t2, s2) = points
    per_byte = (t2 - t1) / (s2 - s1)
    return t1 - per_byte * s1, per_byte, s1, s2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--workers", default=",".join(str(n) for n in range(1, (os.cpu_count() or 1) + 1)))
    parser.add_argument("--workdir")
    args = parser.parse_args()
    directory = Path(args.workdir or tempfile.mkdtemp(prefix="bench_scale_"))
    runs = study_runs(simulate_study(directory, args.files))
    print(f"(a) {len(runs)} exports, {runs['size'].sum() / 1e6:.1f} MB, on {os.cpu_count()} cores")
    print("| worker processes | Dask files/s | MB/s | speedup | local pool files/s | MB/s | speedup |")
    print("|---|---|---|---|---|---|---|")
    for row in throughput_table(runs, [int(n) for n in args.workers.split(",")]):
        print(
            f"| {row['workers']} | {row['dask_files_s']:.1f} | {row['dask_mb_s']:.2f} | {row['dask_speedup']:.2f} "
            f"| {row['pool_files_s']:.1f} | {row['pool_mb_s']:.2f} | {row['pool_speedup']:.2f} |"
        )
    times = small_folder(directory)
    print(
        "(b) 20-export folder end to end (median of 3): "
        + ", ".join(f"{label} {seconds:.2f} s" for label, seconds in times.items())
    )
    per_file, per_byte, small, large = cost_per_file_and_byte(directory)
    print(
        f"(c) one process: {per_file * 1e3:.1f} ms per file + {per_byte * 1e9:.2f} s per GB "
        f"(from files of {small / 1e3:.0f} kB and {large / 1e3:.0f} kB)"
    )


if __name__ == "__main__":
    main()
