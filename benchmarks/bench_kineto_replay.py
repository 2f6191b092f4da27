"""Replay error of the trace-based predictor on the real Kineto traces (../shared/real_kineto, env
EXTRADEEP_REAL_KINETO): per trace (and for the two sampled ranks of the 128-rank job together) the
measured median step time (slowest rank), the replayed one, the largest per-step error, the
kernel-sum baseline's error, the critical-path breakdown and the time to predict.

Usage: PYTHONPATH=. python benchmarks/bench_kineto_replay.py (or with extradeep installed)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from extradeep.errors import InputError
from extradeep.predictor import BASELINE, predict

REPO = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("EXTRADEEP_REAL_KINETO", REPO.parent / "shared" / "real_kineto"))
PAIR = [REAL / f"HTA__trace_filter_sampled_rank-{r}.json.gz" for r in (0, 1)]


def row(label: str, paths) -> str:
    t = time.perf_counter()
    try:
        pred = predict(paths)
    except InputError as exc:
        return f"| {label} | - | - | - | - | {exc.problem[:60]} | - |"
    seconds = time.perf_counter() - t
    s = pred.summary[pred.summary["scenario"] == BASELINE].iloc[0]
    err = pred.steps["error"].abs().max()
    base = (s["kernel_sum_baseline"] - s["measured"]) / s["measured"] if s["measured"] else float("nan")
    shares = pred.breakdown[[c for c in pred.breakdown.columns if c.endswith("_share")]]
    text = ", ".join(f"{c.removesuffix('_share')} {100 * v:.1f}%" for c, v in shares.mean().items() if v >= 0.0005)
    owners = getattr(pred, "owners", None)
    if owners is not None and len(owners):
        top = owners[owners["level"] == 1].iloc[0]
        text += f"; top owner {str(top['owner'])[:30]} {100 * top['share']:.0f}%"
    return (
        f"| {label} | {s['phase']} x{int(s['steps'])} | {s['measured']:.6f} | {s['replayed']:.6f} | "
        f"{100 * err:.4f}% | {100 * base:+.1f}% | {text} | {seconds:.1f} s |"
    )


def main() -> None:
    print(
        "| trace | steps | measured (s) | replayed (s) | max step error | kernel-sum baseline | critical path | time |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted(REAL.glob("*.json.gz")):
        print(row(path.name.removeprefix("HTA__")[:40], [path]))
    print(row("trace_filter_sampled rank-0 + rank-1", PAIR))


if __name__ == "__main__":
    main()
