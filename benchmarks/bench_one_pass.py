"""One pass per file: what each extra small export and one large export cost, against the floor of a
bare SELECT, for this checkout and, with --baseline, an older checkout, in the same run on one machine.

(a) Small exports: one simulated study with 1 and with 2 repetitions (100 and 200 exports of ~160 KB).
    `extradeep model DIR --param ranks --no-cache --jobs 1 --no-replay`, each run in a fresh process:
    CPU (user+sys of the child) and wall. Per extra export = (T(200) - T(100)) / 100, so start-up and
    modeling cancel out; the fixed cost = T(100) - 100 x per export. The floor: open each export
    read-only and SELECT start, end from its four main tables (kernels, CUDA runtime, NVTX, memcpy),
    the same difference. Target: per extra export <= 10x the floor.
(b) One large export (>= 1M kernel rows, made by the simulator): `read_export` against the bare
    `SELECT start,end,shortName,correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL` fetched into NumPy, CPU
    (user+sys) and wall, best of --repeat, each in a fresh process. Target: <= 2x in both.
(c) SQLite opens per export in one `model` run without the replay (sqlite3.connect counted).

Every measurement alternates between the checkouts, and the best of --repeat runs is reported (the
machine is shared: CPU time is the fairer figure). Data are made once under --workdir.

Usage: python benchmarks/bench_one_pass.py [--workdir DIR] [--baseline CHECKOUT] [--repeat 3]
       (a baseline checkout: e.g. `git worktree add /tmp/before <commit>`)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RANKS = "4,8,12,16,20,40"  # 100 exports per repetition
FLOOR_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
)

# Import extradeep from the checkout named by EXTRADEEP_CHECKOUT: an editable install's import hook
# would otherwise win over sys.path and measure the installed checkout twice.
PREAMBLE = r"""
import os, sys
sys.meta_path = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
sys.path.insert(0, os.environ["EXTRADEEP_CHECKOUT"])
"""

CHILD = (
    PREAMBLE
    + r"""
import json, resource, sys, time
def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
kind, arg = sys.argv[1], sys.argv[2]
t0, c0 = time.perf_counter(), usage()
if kind == "floor_small":
    import glob, sqlite3
    for path in sorted(glob.glob(arg + "/*.sqlite")):
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        for table in TABLES:
            conn.execute(f"SELECT start, end FROM {table}").fetchall()
        conn.close()
elif kind == "floor_big":
    import sqlite3, numpy as np
    conn = sqlite3.connect(f"file:{arg}?mode=ro&immutable=1", uri=True)
    rows = conn.execute("SELECT start,end,shortName,correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    np.array(rows, dtype=np.int64)
    conn.close()
elif kind == "read_big":
    from extradeep.io.nsys.read import read_export
    t0, c0 = time.perf_counter(), usage()  # the import is not the reader's work
    read_export(arg)
elif kind == "opens":
    import sqlite3
    from collections import Counter
    from urllib.parse import unquote, urlparse
    opens, real = Counter(), sqlite3.connect
    def counting(database, *a, **k):
        text = str(database)
        opens[unquote(urlparse(text).path) if text.startswith("file:") else text] += 1
        return real(database, *a, **k)
    sqlite3.connect = counting
    import contextlib, io
    from extradeep.cli import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["model", arg, "--param", "ranks", "--no-cache", "--jobs", "1", "--no-replay"])
    exports = [p for p in opens if p.endswith(".sqlite")]
    print(json.dumps({"opens": sum(opens[p] for p in exports), "exports": len(exports)}))
    sys.exit(0)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": usage() - c0}))
""".replace("TABLES", repr(FLOOR_TABLES))
)


def child(kind: str, arg: str, checkout: Path) -> dict:
    env = {**os.environ, "EXTRADEEP_CHECKOUT": str(checkout)}
    out = subprocess.run([sys.executable, "-c", CHILD, kind, arg], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def model_run(folder: str, checkout: Path) -> dict:
    """`extradeep model` in a fresh process: wall and CPU (user+sys) of the child."""
    import resource
    import time

    env = {**os.environ, "EXTRADEEP_CHECKOUT": str(checkout)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    argv = ["model", folder, "--param", "ranks", "--no-cache", "--jobs", "1", "--no-replay"]
    code = (
        PREAMBLE
        + "import runpy; sys.argv = ['extradeep', *sys.argv[1:]]; runpy.run_module('extradeep', run_name='__main__')"
    )
    subprocess.run([sys.executable, "-c", code, *argv], env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall": time.perf_counter() - start, "cpu": cpu}


def make_data(workdir: Path) -> tuple[Path, Path, Path]:
    from extradeep.simulate import simulate

    studies = []
    for reps in (1, 2):
        out = workdir / f"study_r{reps}"
        if not out.exists():
            ranks = [int(r) for r in RANKS.split(",")]
            simulate(out, params={"ranks": ranks}, repetitions=reps, seed=0)
        studies.append(out)
    big_dir = workdir / "big"
    if not big_dir.exists():
        subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "bench_ingest.py"), "--child", "big", str(workdir), "1000000"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return studies[0], studies[1], next(big_dir.glob("*.sqlite"))


def best(runs: list[dict]) -> dict:
    return {key: min(r[key] for r in runs) for key in ("wall", "cpu")}


def measure(checkouts: dict[str, Path], one: Path, two: Path, big: Path, repeat: int) -> dict:
    runs: dict = {}
    for _ in range(repeat):
        for name, checkout in checkouts.items():
            for label, fn, arg in (
                ("model_100", model_run, str(one)),
                ("model_200", model_run, str(two)),
                ("read_big", None, str(big)),
            ):
                result = fn(arg, checkout) if fn else child("read_big", arg, checkout)
                runs.setdefault((name, label), []).append(result)
        for label, kind, arg in (
            ("floor_100", "floor_small", str(one)),
            ("floor_200", "floor_small", str(two)),
            ("floor_big", "floor_big", str(big)),
        ):
            runs.setdefault(("floor", label), []).append(child(kind, arg, REPO))
    return {key: best(value) for key, value in runs.items()}


def report(results: dict, checkouts: dict[str, Path], opens: dict) -> None:
    floor_small = {
        k: (results["floor", "floor_200"][k] - results["floor", "floor_100"][k]) / 100 for k in ("cpu", "wall")
    }
    floor_big = results["floor", "floor_big"]
    print(f"floor per small export: {floor_small['cpu'] * 1e3:.2f} ms CPU, {floor_small['wall'] * 1e3:.2f} ms wall")
    print(f"floor of the large export: {floor_big['cpu']:.2f} s CPU, {floor_big['wall']:.2f} s wall")
    for name in checkouts:
        one, two, big = (results[name, label] for label in ("model_100", "model_200", "read_big"))
        per = {k: (two[k] - one[k]) / 100 for k in ("cpu", "wall")}
        fixed = {k: one[k] - 100 * per[k] for k in ("cpu", "wall")}
        print(
            f"[{name}] per extra export {per['cpu'] * 1e3:.1f} ms CPU ({per['cpu'] / floor_small['cpu']:.1f}x floor), "
            f"{per['wall'] * 1e3:.1f} ms wall ({per['wall'] / floor_small['wall']:.1f}x); "
            f"fixed cost {fixed['cpu']:.2f} s CPU, {fixed['wall']:.2f} s wall; "
            f"model on 100 exports {one['cpu']:.2f} s CPU, {one['wall']:.2f} s wall"
        )
        print(
            f"[{name}] large export: read_export {big['cpu']:.2f} s CPU ({big['cpu'] / floor_big['cpu']:.2f}x floor), "
            f"{big['wall']:.2f} s wall ({big['wall'] / floor_big['wall']:.2f}x); "
            f"SQLite opens per export in one model run: {opens[name]['opens'] / max(opens[name]['exports'], 1):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where the simulated exports are made (default: a temporary folder)")
    parser.add_argument("--baseline", help="a checkout of extradeep to compare with (its repository root)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (the best counts)")
    args = parser.parse_args()
    checkouts = {"this checkout": REPO}
    if args.baseline:
        checkouts = {"baseline": Path(args.baseline).resolve(), **checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        one, two, big = make_data(workdir)
        opens = {name: child("opens", str(one), checkout) for name, checkout in checkouts.items()}
        results = measure(checkouts, one, two, big, args.repeat)
        report(results, checkouts, opens)


if __name__ == "__main__":
    main()
