"""Kineto read speed and memory against the floor of a bare JSON load.

A large trace is built from the largest real trace in ../shared/real_kineto (env EXTRADEEP_REAL_KINETO)
by repeating its events `--copies` times, each copy shifted past the previous one, and written gzip-
compressed to a temporary folder (never into the repository). Each measurement runs in a fresh
subprocess, so its peak memory (ru_maxrss) is its own:

  floor_json    gunzip + json.loads of the whole document (the standard library)
  floor_orjson  gunzip + orjson.loads of the whole document
  load          extradeep.io.kineto.load.load: gunzip, parse (in pieces), columns
  read_trace    extradeep.io.kineto.read.read_trace: load + steps + per-step sums

CPU time (user+sys of the subprocess) is reported beside wall time: on a shared machine it is the
fairer figure. Ratios are against floor_json measured in the same run.

Usage: python benchmarks/bench_kineto_read.py [--copies 10] [--repeat 2] [--source FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("EXTRADEEP_REAL_KINETO", REPO.parent / "shared" / "real_kineto"))
SOURCE = "HTA__trace_diff_test_test.json.gz"

CODE = {
    "floor_json": "import gzip, json; json.loads(gzip.decompress(open(P, 'rb').read()))",
    "floor_orjson": "import gzip, orjson; orjson.loads(gzip.decompress(open(P, 'rb').read()))",
    "load": "from extradeep.io.kineto.load import load; load(P)",
    "read_trace": "from extradeep.io.kineto.read import read_trace; read_trace(P)",
}
RUNNER = """
import resource, sys, time
P = sys.argv[1]
t, c = time.perf_counter(), time.process_time()
{code}
print(time.perf_counter() - t, time.process_time() - c, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def build(source: Path, copies: int, out: Path) -> tuple[int, int]:
    """A trace with `copies` shifted copies of the source's events; (JSON bytes, events)."""
    doc = json.loads(gzip.decompress(source.read_bytes()))
    events = doc["traceEvents"]
    times = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(times) - min(times) + 1000
    out_events = []
    for k in range(copies):
        for e in events:
            copy = dict(e)
            if isinstance(copy.get("ts"), (int, float)):
                copy["ts"] = copy["ts"] + k * span
            if copy.get("name", "").startswith("ProfilerStep#"):
                copy["name"] = f"ProfilerStep#{k * 1000 + int(copy['name'].split('#')[1])}"
            out_events.append(copy)
    doc["traceEvents"] = out_events
    text = json.dumps(doc).encode()
    out.write_bytes(gzip.compress(text, compresslevel=1))
    return len(text), len(out_events)


def measure(what: str, path: Path) -> tuple[float, float, int]:
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER.format(code=CODE[what]), str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu, rss_kb = proc.stdout.split()
    return float(wall), float(cpu), int(rss_kb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--source", type=Path, default=REAL / SOURCE)
    args = parser.parse_args()
    if not args.source.is_file():
        sys.exit(f"source trace not found: {args.source} (set EXTRADEEP_REAL_KINETO)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.pt.trace.json.gz"
        size, n_events = build(args.source, args.copies, path)
        print(f"trace: {size / 1e6:.0f} MB JSON ({path.stat().st_size / 1e6:.0f} MB gzip), {n_events:,} events")
        results = {}
        for what in CODE:
            runs = [measure(what, path) for _ in range(args.repeat)]
            results[what] = (min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs))
        floor_cpu = results["floor_json"][1]
        print(f"{'step':<14}{'wall s':>9}{'cpu s':>9}{'x floor (cpu)':>15}{'peak RSS MB':>13}")
        for what, (wall, cpu, rss) in results.items():
            print(f"{what:<14}{wall:9.2f}{cpu:9.2f}{cpu / floor_cpu:15.2f}{rss / 1024:13.0f}")


if __name__ == "__main__":
    main()
