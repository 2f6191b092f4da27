"""`extradeep instrument SRC --out DIR`: a copy of a Python project with NVTX ranges on user functions."""

from __future__ import annotations

import sys

HELP = "copy a Python project with an NVTX range around every user-defined function (needs libcst)"
DESCRIPTION = """\
Write instrumented copies of SRC (a script, a package or a directory) and of the local modules it
imports, recursively, to DIR at the same relative paths. Every module-level function and method gets
the NVTX range decorator @_extradeep_marks.range("module.Class.function") (extradeep.capture.marks), so
Nsight Systems shows the time of the code you wrote next to kernels and CUDA calls. Sources are never modified; running it again (even on its
own output) changes nothing more. Third-party code (site-packages, virtual environments, build
directories) is not followed; generated files are copied unchanged. Marks cost nothing unless the
program runs under a profiler with the `nvtx` package installed (pip install 'extradeep[nvtx]').

examples:
  extradeep instrument train.py --out instrumented/
  extradeep instrument src/mypackage --out instrumented/ --verbose
  cd instrumented && nsys profile -t cuda,nvtx python train.py
"""


def add_arguments(parser) -> None:
    parser.add_argument("src", metavar="SRC", help="entry script, package directory or project directory to instrument")
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="directory for the instrumented copies (created if missing)"
    )
    parser.add_argument("--verbose", action="store_true", help="list every function instrumented or left out, and why")


def run(args) -> int:
    from extradeep.workflows.tools import InstrumentOptions, instrument_project

    shown = sys.stderr.isatty()
    report = instrument_project(InstrumentOptions(args.src, args.out, progress=_progress if shown else None))
    if shown:
        print("\r\033[K", end="", file=sys.stderr)
    print("\n".join(report.lines(verbose=args.verbose)))
    return 0


def _progress(module: str) -> None:
    print(f"\r\033[Kinstrumenting {module}", end="", file=sys.stderr, flush=True)
