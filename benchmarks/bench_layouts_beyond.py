"""The layout model on unmeasured layouts beyond the criterion's truth set: ZeRO 2-3, interleaving and
recomputation at 64-512 GPUs.

    python benchmarks/bench_layouts_beyond.py [--seeds 1-8] [--variants]

The truth set of bench_layouts_variants.py and bench_layouts_random.py (14 layouts) holds ZeRO 0-1
only, one interleaved and one selective layout: a search ranks ZeRO 2-3 layouts too, and an
independent check may ask for them. Here the same studies (the random draws of the given seeds, and
with ``--variants`` the ten variants) are simulated with the truth of :data:`BEYOND` instead, and
the simulator check reports its errors. The criterion's bounds are printed beside each study; the
pick is over whichever of these layouts share a GPU count.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from bench_layouts_random import draw, passes, seeds_of
from bench_layouts_variants import VARIANTS, simulate_and_check

BEYOND = (
    "tp1.pp1.dp64.mbs1.nmb4.zero3",
    "tp2.pp1.dp32.mbs1.nmb4.zero2",
    "tp2.pp1.dp64.mbs2.nmb2.zero3",
    "tp4.pp1.dp32.mbs1.nmb4.zero2",
    "tp2.pp2.dp64.mbs1.nmb4.zero2",
    "tp4.pp1.dp64.mbs1.nmb2.zero3",
    "tp8.pp1.dp64.mbs1.nmb2.zero2",
    "tp1.pp1.dp512.mbs1.nmb1.zero3",
    "tp4.pp2.dp32.mbs1.nmb8.rc2",
    "tp2.pp4.dp8.mbs1.nmb8.vpp2",
    "tp8.pp2.dp16.mbs1.nmb8.zero1.rc1",
    "tp2.pp1.dp128.mbs1.nmb2.zero1",
)


def studies(seeds: list[int], variants: bool) -> list[tuple[str, dict, list, dict]]:
    out = [(f"draw {s}", *draw(s)) for s in seeds]
    if variants:
        out += [(name, shape, list(profiled), options) for name, (shape, profiled, options) in VARIANTS.items()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1-8", help="random draws, e.g. 1-8 or 3,5 (default 1-8)")
    parser.add_argument("--variants", action="store_true", help="the ten variants of bench_layouts_variants.py too")
    args = parser.parse_args()
    rows, worst = [], []
    for name, shape, profiled, options in studies(seeds_of(args.seeds), args.variants):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            frame, summary = simulate_and_check(Path(tmp) / "study", shape, profiled, BEYOND, options)
        rows.append({"study": name, **summary, "seconds": time.perf_counter() - start})
        rows[-1]["verdict"] = "pass" if passes(summary) else "FAIL"
        worst.append(frame.loc[frame["error_pct"].abs().idxmax(), ["tp", "pp", "dp", "zero", "error_pct"]])
        print(f"{name}: {rows[-1]['verdict']}", flush=True)
    table = pd.DataFrame(rows)
    table["worst_layout"] = [f"tp{w.tp:g}.pp{w.pp:g}.dp{w.dp:g}.zero{w.zero:g}" for w in worst]
    print(table.round(3).to_string(index=False))
    print(f"{(table['verdict'] == 'pass').sum()} of {len(table)} studies meet the criterion's bounds on these layouts")


if __name__ == "__main__":
    main()
