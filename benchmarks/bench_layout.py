"""The node layout from UUID sets and export metadata only (issue 20, item 4), on an independently
built study: nsys exports written by tests/independent_study.py (the DDL of a real 2024.2 export,
no extradeep code) for a data-parallel training on 4-GPU nodes, measured at 2-16 ranks, whose
exports keep the layout only in TARGET_INFO_GPU UUID sets and EXPORT_HOST.

    python benchmarks/bench_layout.py [--before DIR] [--real DIR]   # DIR: a checkout of the old code

Prints two tables. Model: |error| of the epoch time at 2x, 3x and 4x the largest measured ranks
(32, 48, 64) against the law's expected measurement, weak and strong scaling, with no flag and
with `gpus-per-node = 4` in a system file. Advisor: `plan` run from 2, 4 and 8 ranks (targets 32
and 64, allocation 16), each proposal profiled with the same writer, until its interval at the
targets is within 5% and its prediction holds still; the ranks it asked for and its final errors.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
WRITER = HERE / "tests" / "independent_study.py"
MEASURED = [2, 3, 4, 8, 12, 16]
TARGETS = [32, 48, 64]
STUDIES = [("weak", 100e6), ("strong", 100e6), ("weak", 400e6)]  # scaling, gradient bytes (400 MB: network-bound)

COMMON = r"""
import importlib.util, json, sys
from pathlib import Path
import numpy as np
spec = importlib.util.spec_from_file_location("independent_study", sys.argv[1])
study = importlib.util.module_from_spec(spec); spec.loader.exec_module(study)
from extradeep.pipeline import load_experiment
from extradeep.aggregate.experiment import Dataset
"""

MODEL = (
    COMMON
    + r"""
from extradeep.analysis.core import analyse
out, system, weak, grad = sys.argv[2], sys.argv[3] or None, sys.argv[4] == "weak", float(sys.argv[6])
data = Dataset(50000, 10000, 64, weak_scaling=weak)
kw = {"system": system} if system else {}
model = analyse(load_experiment([out], progress=False, use_cache=False, dataset=data, **kw)).model("epoch time")
rows = []
for p in json.loads(sys.argv[5]):
    n_t = 50000 // 64 if weak else 50000 // (p * 64)
    n_v = 10000 // 64 if weak else 10000 // (p * 64)
    truth = study.expected_epoch_time(p, n_t, n_v, grad)
    rows.append([p, truth, float(model.predict(float(p)))])
print(json.dumps(rows))
"""
)

ADVISOR = (
    COMMON
    + r"""
import inspect
from extradeep.analysis.advisor import MeasurementAdvisor
out, real, partial = Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "partial"
writer = study.StudyWriter(real, out)
extra = {"partial_nodes": True} if partial else {}
if extra and "partial_nodes" not in inspect.signature(MeasurementAdvisor).parameters:
    print(json.dumps(None)); sys.exit()
runs, done, previous = {(p, r) for p in (2, 4, 8) for r in (1, 2)}, set(), None
for step in range(12):
    for p, r in sorted(runs - done):
        writer.write_run(p, r)
        done.add((p, r))
    experiment = load_experiment(out, params=["ranks"], progress=False, use_cache=False, replay=False)
    advisor = MeasurementAdvisor([32, 64], 16, **extra).fit(experiment)
    plan, now = advisor.propose(1), advisor.current_
    if advisor.model_ is not None:
        moved = 0.0 if previous is None else float(np.max(np.abs(now["predicted"] - previous) / now["predicted"]))
        if ((now["interval_pct"] <= 5).all() and previous is not None and moved <= 0.05) or plan.empty:
            break
        previous = now["predicted"].to_numpy()
    runs |= {(int(r.ranks), int(r.first_rep) + k) for r in plan.itertuples() for k in range(int(r.reps))}
errors = [
    100 * (pred - study.expected_epoch_time(int(p), 1, 0)) / study.expected_epoch_time(int(p), 1, 0)
    for p, pred in zip(now["ranks"], now["predicted"])
]
print(json.dumps({"ranks": sorted({p for p, _ in done}), "runs": len(done), "errors": errors}))
"""
)


def run(code: Path, script: str, *args) -> object:
    done = subprocess.run(
        [sys.executable, "-c", script, str(WRITER), *map(str, args)],
        cwd=code,
        env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def errors(rows) -> str:
    pct = [100 * (pred - truth) / truth for _, truth, pred in rows]
    worst = max(pct, key=abs)
    import numpy as np

    return f"{', '.join(f'{e:+.1f}%' for e in pct)} (median {np.median(np.abs(pct)):.1f}%, worst {abs(worst):.1f}%)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout of the code to compare with (e.g. git worktree of main)")
    parser.add_argument("--real", type=Path, default=HERE.parent / "shared" / "real_nsys", help="real exports folder")
    args = parser.parse_args()
    codes = [("after", HERE)] + ([("before", args.before.resolve())] if args.before else [])
    sys.path.insert(0, str(WRITER.parent))
    import independent_study as study

    with tempfile.TemporaryDirectory() as tmp:
        system = Path(tmp) / "g4.toml"
        system.write_text("gpus-per-node = 4\n")
        print(f"| code | study | flag | epoch time error at {', '.join(map(str, TARGETS))} ranks |")
        print("|---|---|---|---|")
        for grad in sorted({g for _, g in STUDIES}):
            out = Path(tmp) / f"study{int(grad)}"
            writer = study.StudyWriter(args.real, out, grad_bytes=grad)
            for p in MEASURED:
                for rep in (1, 2):
                    writer.write_run(p, rep)
        for label, code in codes:
            for scaling, grad in STUDIES:
                for flag, given in (("none", ""), ("gpus-per-node = 4", system)):
                    out = Path(tmp) / f"study{int(grad)}"
                    rows = run(code, MODEL, out, given, scaling, json.dumps(TARGETS), grad)
                    name = f"{scaling}, {grad / 1e6:g} MB gradients"
                    print(f"| {label} | {name} | {flag} | {errors(rows)} |", flush=True)
        print()
        print("| code | advisor | configurations profiled (runs) | step time error at 32, 64 ranks |")
        print("|---|---|---|---|")
        for label, code in codes:
            for mode in ("whole", "partial"):
                result = run(code, ADVISOR, Path(tmp) / f"campaign-{label}-{mode}", args.real, mode)
                if result is None:
                    continue
                flag = "--partial-nodes" if mode == "partial" else "default"
                errs = ", ".join(f"{e:+.1f}%" for e in result["errors"])
                print(f"| {label} | {flag} | {result['ranks']} ({result['runs']}) | {errs} |", flush=True)


if __name__ == "__main__":
    main()
