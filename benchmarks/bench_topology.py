"""Epoch-time predictions across node boundaries (issue 12): simulated weak- and strong-scaling
training on 4-GPU and 8-GPU nodes, modeled up to 4 nodes, predicted at 2x, 3x and 4x the largest
measured ranks; plus the one-node case with and without a system file.

    python benchmarks/bench_topology.py [--before DIR]   # DIR: a checkout of the old code to compare

Prints one row per scenario: median and worst |error| of the epoch time against the simulator's
truth, and how many truths lie inside the 95% interval.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIOS = [  # name, preset, scaling, measured ranks
    ("4-GPU nodes, weak", "4gpu-1nic-per-gpu", "weak", [2, 3, 4, 8, 12, 16]),
    ("4-GPU nodes, strong", "4gpu-1nic-per-gpu", "strong", [2, 3, 4, 8, 12, 16]),
    ("8-GPU nodes, weak", "dgx-8-nvswitch", "weak", [2, 4, 6, 8, 16, 24, 32]),
    ("8-GPU nodes, strong", "dgx-8-nvswitch", "strong", [2, 4, 6, 8, 16, 24, 32]),
    ("one 8-GPU node, no system file", "dgx-8-nvswitch", "weak", [2, 3, 4, 6, 8]),
]

EVALUATE = r"""
import json, sys
import numpy as np
try:
    from extradeep.pipeline import load_experiment
    from extradeep.aggregate.experiment import Dataset
except ImportError:  # before the layout refactor
    from extradeep.ingest import load_experiment
    from extradeep.experiment import Dataset
try:
    from extradeep.analysis.core import analyse
except ImportError:  # before the analysis package's rename
    from extradeep.analysis.analyse import analyse
out, system = sys.argv[1], (sys.argv[2] or None)
truth = json.load(open(out + "/truth.json"))
data = Dataset(50000, 10000, 64, weak_scaling=truth["scaling"] == "weak")
kw = {"system": system} if system else {}
model = analyse(load_experiment([out], progress=False, use_cache=False, dataset=data, **kw)).model("epoch time")
rows = []
for p in truth["truth_points"]:
    r, t = p["params"]["ranks"], p["epoch_time"]
    lo, hi = model.interval(float(r))
    rows.append([r, t, model.predict(float(r)), lo, hi])
print(json.dumps(rows))
"""


def evaluate(code: Path, outdir: Path, system: str = "") -> list:
    done = subprocess.run([sys.executable, "-c", EVALUATE, str(outdir), system], cwd=code, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(rows: list) -> str:
    import numpy as np

    errors = [abs(pred - t) / t * 100 for _, t, pred, _, _ in rows]
    inside = sum(lo <= t <= hi for _, t, _, lo, hi in rows)
    return f"{np.median(errors):5.1f}% | {max(errors):5.1f}% | {inside}/{len(rows)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout of the code to compare with (e.g. git archive of main)")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(here))
    from extradeep.simulate import simulate

    print("| scenario | predicted ranks | after: median / worst / in 95% | before: median / worst / in 95% |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, preset, scaling, ranks) in enumerate(SCENARIOS):
            out = Path(tmp) / f"s{k}"
            predict = [2 * ranks[-1], 3 * ranks[-1], 4 * ranks[-1]]
            simulate(out, params={"ranks": ranks}, topology=preset, scaling=scaling, truth_ranks=predict)
            runs = [("", name)] + ([(preset, f"{name[:-len(', no system file')]}, --system {preset}")]
                                   if "no system" in name else [])
            for system, label in runs:
                after = summary(evaluate(here, out, system))
                before = summary(evaluate(args.before, out)) if args.before else "-"
                print(f"| {label} | {', '.join(map(str, predict))} | {after} | {before} |", flush=True)


if __name__ == "__main__":
    main()
