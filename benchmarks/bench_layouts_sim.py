"""The layout model against the GPT simulator's truth (issue 23's simulator criterion).

    python benchmarks/bench_layouts_sim.py [--seeds 1,2,3]

1. sample_profiles/layouts/profiles: 5 layouts on 2-4 GPUs of one node; its 12 truth layouts.
2. The study of extradeep.layouts.validation (GPT 8 layers, hidden 1,536; 5 layouts on at most 16
   GPUs, one and two nodes; 12 unmeasured layouts at 64-512 GPUs), simulated once per seed (the
   profiles' noise changes with the seed, the truth does not).

Per study: median and worst absolute error of the step time, the 95% interval's coverage, the worst
memory error, the truth time per sample of the layout ranked first per GPU count over the truly
fastest, the collectives' algorithm the model chose, and the seconds of the check (reading the
profiles, calibrating with intervals, predicting).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from extradeep.layout_profiles import simulator_check
from extradeep.simulate.gpt.study import simulate_study

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_profiles" / "layouts" / "profiles"
HARDWARE = SAMPLE / "hardware.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1,2,3")
    args = parser.parse_args()
    rows = []
    studies = [("sample_profiles/layouts/profiles", SAMPLE)]
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            studies.append((f"GPT 8L h1536, seed {seed}", simulate_study(Path(tmp) / f"seed{seed}", seed=seed)))
        for name, folder in studies:
            start = time.perf_counter()
            frame, summary = simulator_check(folder, HARDWARE)
            rows.append({"study": name, **summary, "seconds": time.perf_counter() - start})
            print(name)
            columns = ["gpus", "tp", "pp", "dp", "micro_batch", "micro_batches", "zero", "recompute"]
            columns += ["truth", "predicted", "error_pct", "inside", "memory_error_pct"]
            print(frame[columns].round(4).to_string(index=False))
            print()
    print(pd.DataFrame(rows).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
