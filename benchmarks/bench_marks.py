"""Cost of extradeep's marks and helpers, and speed of `extradeep instrument`.

(a) ns per `with marks.train_step(i):` (push + pop) when marks are off (no profiler attached, or
    `nvtx` missing), and when forced on with the real `nvtx` package but no profiler attached;
(b) ns per call of a `@marks.range` function versus the plain function, marks off and forced on;
(c) ns per step of the PyTorch helper's loop (`StepSampler.train`) versus a bare loop, marks off;
(d) `extradeep instrument` on extradeep's own package: modules and functions per second.

Usage: python benchmarks/bench_marks.py [--calls 200000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import timeit
from pathlib import Path

from extradeep.capture import marks

REPO = Path(__file__).resolve().parent.parent


def per_call_ns(statement, calls: int) -> float:
    return min(timeit.repeat(statement, number=calls, repeat=5)) / calls * 1e9


def with_marks(i=3):
    with marks.train_step(i):
        pass


def plain(x):
    return x


def marks_section(calls: int, label: str) -> None:
    decorated = marks.range("bench.plain")(plain)
    mark = per_call_ns(with_marks, calls)
    bare = per_call_ns(lambda: plain(1), calls)
    wrapped = per_call_ns(lambda: decorated(1), calls)
    print(
        f"{label:<42} with train_step: {mark:7.0f} ns   decorated call: {wrapped:6.0f} ns "
        f"(plain {bare:.0f} ns, +{wrapped - bare:.0f} ns)"
    )


def sampler_section(calls: int) -> None:
    from extradeep.capture.frameworks.torch import StepSampler

    def helper_loop():
        sampler = StepSampler(train_steps=calls, epochs=1)
        for _ in sampler.epochs(1):
            for _ in sampler.train(range(calls)):
                pass

    def bare_loop():
        for _ in range(calls):
            pass

    helper = min(timeit.repeat(helper_loop, number=1, repeat=5)) / calls * 1e9
    bare = min(timeit.repeat(bare_loop, number=1, repeat=5)) / calls * 1e9
    print(f"{'StepSampler.train per step, marks off':<42} {helper:7.0f} ns (bare loop {bare:.0f} ns)")


def instrument_section() -> None:
    from extradeep.capture.instrument import instrument

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        report = instrument(REPO / "extradeep", Path(out) / "copy")
        seconds = time.perf_counter() - start
    n = len(report.modules)
    print(
        f"instrument extradeep/: {n} modules, {report.n_instrumented} functions in {seconds:.2f} s "
        f"({n / seconds:.0f} modules/s, {report.n_instrumented / seconds:.0f} functions/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="calls per timing (default 200000)")
    args = parser.parse_args()
    for var in ("EXTRADEEP_NVTX", "NVTX_INJECTION64_PATH", "NVTX_INJECTION32_PATH"):
        os.environ.pop(var, None)

    marks.refresh()
    marks_section(args.calls, "marks off (no profiler attached)")
    sys.modules["nvtx"] = None  # as if nvtx were not installed
    os.environ["EXTRADEEP_NVTX"] = "1"
    marks.refresh()
    marks_section(args.calls, "marks off (nvtx not installed)")
    del sys.modules["nvtx"]
    if marks.refresh():
        marks_section(args.calls, "forced on: real nvtx, no profiler attached")
    else:
        print("nvtx not installed: skipping the forced-on figures")
    os.environ.pop("EXTRADEEP_NVTX")
    marks.refresh()
    sampler_section(args.calls)
    instrument_section()


if __name__ == "__main__":
    main()
