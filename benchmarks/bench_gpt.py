"""GPT layout simulator and layout readers: speed and sizes.

(a) simulate_run of all ranks, 2 to 16 GPUs (a GPT with 8 layers, hidden 1024, seq 1024, 4 steps, noisy):
    graph nodes, seconds, microseconds per node (the cost of one causal operation);
(b) gpt_truth (one rank per pipeline stage, no files) of GPT 3.6B-like layouts (vTrain's multi-node
    model: 30 layers, hidden 3072, 32 heads, seq 2048) at 64 to 512 GPUs: seconds per layout;
(c) bytes per rank file (nsys export, Kineto trace with and without flow events) of the 16-GPU run;
(d) reading one rank's profile for its layout and parts (`profile_facts` + `infer_layout` +
    `file_parts`) against the step-sum reader on the same file (`read_profile`): the ratio.

Usage: python benchmarks/bench_gpt.py [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from extradeep.io.parallel.infer import infer_layout
from extradeep.io.parallel.layout import profile_facts
from extradeep.io.parallel.parts import file_parts
from extradeep.io.read import read_profile
from extradeep.simulate.gpt.config import GPTModel, load_gpu, parse_layout
from extradeep.simulate.gpt.run import simulate_run
from extradeep.simulate.gpt.study import gpt_truth, simulate_gpt
from extradeep.system import load_system

MODEL = GPTModel(layers=8, hidden=1024, heads=16, seq=1024, vocab=51200)
GPT_3_6B = GPTModel(layers=30, hidden=3072, heads=32, seq=2048, vocab=51200)
WRITTEN = {
    2: "tp1.pp2.dp1.mbs1.nmb4",
    4: "tp2.pp2.dp1.mbs1.nmb4",
    8: "tp2.pp2.dp2.mbs1.nmb4.zero1",
    16: "tp2.pp2.dp4.mbs1.nmb4.zero1",
}
TRUTH = [
    "tp1.pp1.dp64.mbs4.nmb2",
    "tp2.pp2.dp16.mbs4.nmb8",
    "tp8.pp2.dp16.mbs2.nmb16",
    "tp2.pp2.dp128.mbs2.nmb2.zero1",
    "tp8.pp2.dp32.mbs1.nmb16",
]


def simulation_speed(quick: bool) -> None:
    print("(a) simulate_run, all ranks, 4 steps")
    print(f"{'GPUs':>5} {'nodes':>9} {'seconds':>8} {'us/node':>8}")
    gpu, system = load_gpu("a100-80gb"), load_system("dgx-8-nvswitch")
    for world, label in WRITTEN.items():
        if quick and world > 8:
            continue
        t = time.perf_counter()
        run = simulate_run(MODEL, parse_layout(label), gpu, system, steps=4, noise=(0.02, 0.01, 0.01))
        dt = time.perf_counter() - t
        print(f"{world:>5} {len(run.graph.dur):>9,} {dt:>8.2f} {dt / len(run.graph.dur) * 1e6:>8.1f}")


def truth_speed(quick: bool) -> None:
    print("\n(b) gpt_truth without files, GPT 3.6B-like")
    for label in TRUTH[:2] if quick else TRUTH:
        t = time.perf_counter()
        truth = gpt_truth(label, GPT_3_6B)
        dt = time.perf_counter() - t
        print(
            f"  {truth['layout']['world']:>4} GPUs {label:<32} {dt:6.2f} s   step {truth['step_time']:.3f} s"
            f"   peak {truth['peak_memory'] / 2**30:5.1f} GiB"
        )


def sizes_and_readers(quick: bool) -> None:
    label = WRITTEN[8 if quick else 16]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        study = simulate_gpt(Path(tmp) / "a", [label], model=MODEL, steps=4)
        written = time.perf_counter() - t
        lean = simulate_gpt(Path(tmp) / "b", [label], model=MODEL, steps=4, formats=("kineto",), flows=False)
        files = sorted(study.files["path"])
        nsys = [p for p in files if p.endswith(".sqlite")]
        kineto = [p for p in files if p.endswith(".json.gz")]
        lean_files = sorted(lean.files["path"])
        print(f"\n(c) {label} ({len(nsys)} ranks, both formats) simulated and written in {written:.1f} s")
        for what, paths in (("nsys export", nsys), ("Kineto trace", kineto), ("Kineto, no flows", lean_files)):
            sizes = [Path(p).stat().st_size for p in paths]
            print(f"  {what:<17} {sum(sizes) / len(sizes) / 1e3:8.1f} kB per rank")
        print("\n(d) layout + parts reader against the step-sum reader, same file (best of 3)")
        for what, path in (("nsys", nsys[0]), ("kineto", kineto[0])):
            base = min(_time(lambda p=path: read_profile(p)) for _ in range(3))
            ours = min(_time(lambda p=path: _layout_and_parts(p)) for _ in range(3))
            print(
                f"  {what:<7} read_profile {base:6.3f} s   facts+layout+parts {ours:6.3f} s   ratio {ours / base:4.2f}"
            )


def _layout_and_parts(path) -> None:
    facts = profile_facts(path)
    file_parts(facts, {}, 0)
    infer_layout(facts)


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    simulation_speed(args.quick)
    truth_speed(args.quick)
    sizes_and_readers(args.quick)


if __name__ == "__main__":
    main()
