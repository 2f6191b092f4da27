"""Ingest speed: read_export against the bare-SELECT floor, and batch throughput with 1 and 2 jobs.

(a) One simulated export with >= 1M kernel rows: time of `read_export` versus the floor, a bare
    `SELECT start,end,shortName,correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL` fetched into NumPy
    (target: within 2x).
(b) 500 small simulated exports: files per second with 1 and 2 jobs (no cache), with a warm cache,
    peak memory (ru_maxrss of the process and its workers, tracemalloc peak of the process), and the
    time to load the saved Experiment instead.

Usage: python benchmarks/bench_ingest.py [--workdir DIR] [--big-rows 1000000] [--files 500]
Each measurement runs in a fresh subprocess so peak-memory figures do not leak between them.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def best_of(fn, repeat: int = 3) -> tuple[float, float]:
    """(best wall time, best CPU time) of `repeat` calls; CPU time is the fairer figure on a busy machine."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def kernel_rows(path: Path) -> int:
    from extradeep.io.sqlite import open_readonly

    conn = open_readonly(path)
    try:
        return conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        conn.close()


def _simulate_one(out: Path, steps: int, progress: bool = False) -> Path:
    from extradeep.simulate import simulate

    simulate(
        out,
        app="big",
        params={"ranks": [1]},
        repetitions=1,
        epochs=2,
        train_steps=steps,
        val_steps=2,
        noise=(0.02, 0.0, 0.0),
        progress=progress,
    )
    return next(out.glob("*.sqlite"))


def make_big(workdir: Path, rows: int) -> Path:
    """One rank, one repetition, as many training steps as give at least `rows` kernel rows
    (kernels per step measured on two small probes, since the simulator's op mix may change)."""
    out = workdir / "big"
    if not out.exists():
        small, large = (kernel_rows(_simulate_one(workdir / f"probe{n}", n)) for n in (10, 30))
        per_step = (large - small) / (2 * 20)  # two epochs
        steps = int(np.ceil((rows - small) / (2 * per_step))) + 10
        _simulate_one(out, steps, progress=True)
    return next(out.glob("*.sqlite"))


def make_many(workdir: Path, n_files: int) -> Path:
    """About `n_files` small exports: five points whose rank counts add up to n_files / 2, two repetitions."""
    from extradeep.simulate import simulate

    out = workdir / "many"
    if not out.exists():
        per_rep = n_files // 2
        base = per_rep // 15
        ranks = [base, 2 * base, 3 * base, 4 * base, per_rep - 10 * base]
        simulate(
            out, app="many", params={"ranks": ranks}, repetitions=2, epochs=2, train_steps=2, val_steps=1, progress=True
        )
    return out


def floor_and_read(path: Path) -> dict:
    from extradeep.io.nsys.read import read_export
    from extradeep.io.sqlite import open_readonly

    def floor():
        conn = open_readonly(path)
        rows = conn.execute("SELECT start,end,shortName,correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        np.array(rows, dtype=np.int64)
        conn.close()

    n_kernels = kernel_rows(path)
    (t_floor, c_floor), (t_read, c_read) = best_of(floor), best_of(lambda: read_export(path, None))
    return {
        "file": str(path),
        "bytes": path.stat().st_size,
        "kernel_rows": n_kernels,
        "floor_s": t_floor,
        "read_export_s": t_read,
        "ratio": t_read / t_floor,
        "floor_cpu_s": c_floor,
        "read_export_cpu_s": c_read,
        "cpu_ratio": c_read / c_floor,
    }


def batch(directory: Path, jobs: int, cache_dir: str | None, save: str | None) -> dict:
    import tracemalloc

    from extradeep import load_experiment

    tracemalloc.start()
    start = time.perf_counter()
    exp = load_experiment(directory, jobs=jobs, cache_dir=cache_dir, use_cache=cache_dir is not None, progress=False)
    wall = time.perf_counter() - start
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if save:
        exp.save(save)
    n = len(exp.provenance)
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    return {
        "jobs": jobs,
        "cache": cache_dir is not None,
        "files": n,
        "wall_s": wall,
        "files_per_s": n / wall,
        "cpu_s": cpu,
        "files_per_cpu_s": n / cpu,
        "problems": len(exp.problems),
        "tracemalloc_peak_mb": traced_peak / 2**20,
        "maxrss_self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "maxrss_workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def load_saved(path: str) -> dict:
    from extradeep.aggregate.experiment import Experiment

    return {"load_saved_s": best_of(lambda: Experiment.load(path))[0]}


def child(argv: list[str]) -> dict:
    """Run one step in a fresh interpreter (its progress on our stderr) and return its JSON result."""
    out = subprocess.run([sys.executable, __file__, "--child", *argv], check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where simulated exports are made (default: a temp dir)")
    parser.add_argument("--big-rows", type=int, default=1_000_000, help="kernel rows wanted in the big export")
    parser.add_argument("--files", type=int, default=500, help="number of small exports")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = {
            "big": lambda: {"path": str(make_big(Path(rest[0]), int(rest[1])))},
            "many": lambda: {"path": str(make_many(Path(rest[0]), int(rest[1])))},
            "floor": lambda: floor_and_read(Path(rest[0])),
            "batch": lambda: batch(
                Path(rest[0]), int(rest[1]), rest[2] if rest[2] != "-" else None, rest[3] if len(rest) > 3 else None
            ),
            "load": lambda: load_saved(rest[0]),
        }[kind]()
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        # Data are made in child processes too: ru_maxrss survives fork+exec, so a big parent
        # would inflate every child's peak-memory figure.
        big = child(["big", str(workdir), str(args.big_rows)])["path"]
        a = child(["floor", big])
        print(
            f"(a) {a['kernel_rows']:,} kernel rows, {a['bytes'] / 2**20:.0f} MiB: floor {a['floor_s']:.2f} s "
            f"({a['floor_cpu_s']:.2f} s CPU), read_export {a['read_export_s']:.2f} s ({a['read_export_cpu_s']:.2f} s CPU), "
            f"ratio {a['ratio']:.2f}x wall, {a['cpu_ratio']:.2f}x CPU (target <= 2x)"
        )
        many = child(["many", str(workdir), str(args.files)])["path"]
        saved = str(workdir / "many_experiment.sqlite")
        cache = str(workdir / "cache")
        runs = (
            (1, "-", saved, "no cache"),
            (2, "-", None, "no cache"),
            (2, cache, None, "cold cache"),
            (2, cache, None, "warm cache"),
        )
        for jobs, cache_dir, save, label in runs:
            b = child(["batch", many, str(jobs), cache_dir, *([save] if save else [])])
            print(
                f"(b) {b['files']} files, jobs={jobs}, {label}: {b['wall_s']:.1f} s wall, {b['files_per_s']:.1f} files/s, "
                f"{b['cpu_s']:.1f} s CPU (all processes), "
                f"peak RSS {b['maxrss_self_mb']:.0f} MiB (workers {b['maxrss_workers_mb']:.0f} MiB), "
                f"tracemalloc peak {b['tracemalloc_peak_mb']:.0f} MiB, {b['problems']} problems"
            )
        c = child(["load", saved])
        print(f"(c) loading the saved experiment of those files: {c['load_saved_s']:.3f} s")


if __name__ == "__main__":
    main()
