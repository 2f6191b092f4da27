"""Trace analyses and the strategy search as options of `inspect` and `predict`.

`--analysis idle|launch|sequences|overlap|all` (repeatable) asks for the named analyses of a run
(extradeep.workflows.trace_analyses); `--diff OTHER` compares the run with another one; `--optimize`
(predict) runs the strategy search. The workflows compute them; extradeep.report.trace_text words them.
"""

from __future__ import annotations

import argparse

from extradeep.errors import InputError
from extradeep.workflows.trace_analyses import ANALYSES


def add_trace_analysis_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trace analyses (as HolisticTraceAnalysis offers them)")
    group.add_argument(
        "--analysis",
        action="append",
        default=[],
        choices=(*ANALYSES, "all"),
        metavar="NAME",
        help="idle (idle time: host wait, kernel wait, other), launch (kernel launch statistics), sequences "
        "(frequent kernel sequences, fusion candidates), overlap (communication/computation overlap per "
        "rank), or all (repeatable)",
    )
    group.add_argument(
        "--diff",
        metavar="OTHER",
        help="compare with another run (folder or file): which operators and kernels got slower or faster per step",
    )


def add_optimize_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("strategy search (what to change)")
    group.add_argument(
        "--optimize",
        action="store_true",
        help="search the replay for bucket layouts, kernel fusion, side streams and, when memory is short, "
        "recomputation or gradient accumulation; print each strategy's step time and the setting to change",
    )
    group.add_argument(
        "--min-gain",
        type=float,
        default=1.0,
        metavar="PCT",
        help="propose strategies that save at least PCT %% of the step (default 1)",
    )
    group.add_argument(
        "--memory-model",
        metavar="TOML",
        help="model description for the memory check: parameters, bytes_per_parameter, activation_gb, "
        "buffers_gb, gpu_memory_gb (see docs/predictor.md)",
    )
    group.add_argument("--gpu-memory", type=float, metavar="GB", help="GPU memory capacity, where the profile lacks it")
    group.add_argument("--optimize-report", metavar="HTML", help="write the strategies as an HTML page")


def analysis_options(args):
    """The trace analyses the command line asks for (``top`` rows of a diff)."""
    from extradeep.workflows.trace_analyses import TraceAnalysisOptions

    return TraceAnalysisOptions(analysis=tuple(args.analysis), diff=args.diff, top=getattr(args, "top", 10) or 10)


def optimize_options(args):
    """The strategy search the command line asks for; None without --optimize."""
    from extradeep.workflows.trace_analyses import OptimizeOptions

    if args.optimize_report and not args.optimize:
        raise InputError(None, "needs --optimize", field="optimize_report")
    if not args.optimize:
        return None
    return OptimizeOptions(
        min_gain=args.min_gain,
        memory_model=args.memory_model,
        gpu_memory=args.gpu_memory,
        optimize_report=args.optimize_report,
    )
