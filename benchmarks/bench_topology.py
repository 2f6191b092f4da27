"""Epoch-time predictions across node boundaries (issue 12): simulated weak- and strong-scaling
training on 4-GPU and 8-GPU nodes, modeled up to 4 nodes, predicted at 2x, 3x and 4x the largest
measured ranks; the same with tree and hierarchical all-reduce; plus the one-node case with and
without a system file.

    python benchmarks/bench_topology.py [--before DIR] [--only TEXT]   # DIR: a checkout of the old code

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

SCENARIOS = [  # name, preset, scaling, measured ranks, all-reduce algorithm of the simulated cluster
    ("4-GPU nodes, weak", "4gpu-1nic-per-gpu", "weak", [2, 3, 4, 8, 12, 16], "ring"),
    ("4-GPU nodes, strong", "4gpu-1nic-per-gpu", "strong", [2, 3, 4, 8, 12, 16], "ring"),
    ("8-GPU nodes, weak", "dgx-8-nvswitch", "weak", [2, 4, 6, 8, 16, 24, 32], "ring"),
    ("8-GPU nodes, strong", "dgx-8-nvswitch", "strong", [2, 4, 6, 8, 16, 24, 32], "ring"),
    ("4-GPU nodes, weak, tree", "4gpu-1nic-per-gpu", "weak", [2, 3, 4, 8, 12, 16], "tree"),
    ("4-GPU nodes, strong, tree", "4gpu-1nic-per-gpu", "strong", [2, 3, 4, 8, 12, 16], "tree"),
    ("8-GPU nodes, weak, tree", "dgx-8-nvswitch", "weak", [2, 4, 6, 8, 16, 24, 32], "tree"),
    ("4-GPU nodes, weak, hierarchical", "4gpu-1nic-per-gpu", "weak", [2, 3, 4, 8, 12, 16], "hierarchical"),
    ("4-GPU nodes, strong, hierarchical", "4gpu-1nic-per-gpu", "strong", [2, 3, 4, 8, 12, 16], "hierarchical"),
    ("8-GPU nodes, weak, hierarchical", "dgx-8-nvswitch", "weak", [2, 4, 6, 8, 16, 24, 32], "hierarchical"),
    ("one 8-GPU node, no system file", "dgx-8-nvswitch", "weak", [2, 3, 4, 6, 8], "ring"),
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
kernels = getattr(getattr(getattr(model, "train", model), "comm", None), "kernels", {})
reduce = next((k for k in kernels if "allreduce" in k.lower().replace("_", "")), None)
rows = []
for p in truth["truth_points"]:
    r, t = p["params"]["ranks"], p["epoch_time"]
    lo, hi = model.interval(float(r))
    pure = next((c["pure_per_step_s"] for c in p.get("collectives", []) if c["region"] == reduce), None)
    got = None if reduce is None or pure is None else float(kernels[reduce].predict(float(r)))
    rows.append([r, t, model.predict(float(r)), lo, hi, got, pure,
                 getattr(kernels.get(reduce), "algorithm", "PMNF") if reduce else "-"])
print(json.dumps(rows))
"""


def evaluate(code: Path, outdir: Path, system: str = "") -> list:
    done = subprocess.run(
        [sys.executable, "-c", EVALUATE, str(outdir), system], cwd=code, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(rows: list) -> str:
    import numpy as np

    errors = [abs(row[2] - row[1]) / row[1] * 100 for row in rows]
    inside = sum(row[3] <= row[1] <= row[4] for row in rows)
    return f"{np.median(errors):5.1f}% | {max(errors):5.1f}% | {inside}/{len(rows)}"


def allreduce(rows: list) -> str:
    """The all-reduce's model kind and its worst |error| per step against the true pure time."""
    if len(rows[0]) < 8 or rows[0][5] is None:
        return "-"
    return f"{rows[0][7]}: {max(abs(r[5] - r[6]) / r[6] * 100 for r in rows):.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout of the code to compare with (e.g. git archive of main)")
    parser.add_argument("--only", default="", help="run the scenarios whose name contains this text")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(here))
    from extradeep.simulate import simulate

    print(
        "| scenario | predicted ranks | after: median / worst / in 95% | all-reduce model: worst error "
        "| before: median / worst / in 95% |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, preset, scaling, ranks, algorithm) in enumerate(SCENARIOS):
            if args.only not in name:
                continue
            out = Path(tmp) / f"s{k}"
            predict = [2 * ranks[-1], 3 * ranks[-1], 4 * ranks[-1]]
            simulate(
                out, params={"ranks": ranks}, topology=preset, scaling=scaling, truth_ranks=predict, algorithm=algorithm
            )
            runs = [("", name)] + (
                [(preset, f"{name[: -len(', no system file')]}, --system {preset}")] if "no system" in name else []
            )
            for system, label in runs:
                rows = evaluate(here, out, system)
                before = summary(evaluate(args.before, out)) if args.before else "-"
                print(
                    f"| {label} | {', '.join(map(str, predict))} | {summary(rows)} | {allreduce(rows)} | {before} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
