"""Trace analyses and the strategy search as options of `inspect` and `predict`.

`--analysis idle|launch|sequences|overlap|all` (repeatable) prints the named analyses of
`extradeep.predictor.analyses` for a run; `--diff OTHER` compares the run with another one;
`--optimize` (predict) runs the strategy search and prints its table and verdict.
"""

from __future__ import annotations

import argparse
import sys

from extradeep.errors import InputError

ANALYSES = ("idle", "launch", "sequences", "overlap")
WIDTH = {"display.width": 160, "display.max_columns": 20, "display.max_colwidth": 70}


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


def wanted(args) -> list[str]:
    names = []
    for name in args.analysis:
        names += list(ANALYSES) if name == "all" else [name]
    return list(dict.fromkeys(names))


def print_analyses(run, args, settings=None, title: str | None = None) -> None:
    """Print the analyses asked for (and the diff) of one run."""
    import pandas as pd

    from extradeep.predictor import analyses as an

    names = wanted(args)
    if not names and not args.diff:
        return
    trace = an.run_trace(run, settings=settings)
    with pd.option_context(*[x for kv in WIDTH.items() for x in kv]):
        if title:
            print(f"\n== {title}")
        if "idle" in names:
            idle = an.idle_time(trace)
            print("\nIdle time per GPU stream (s; host wait = the CPU did not enqueue work in time):")
            print(_table(idle))
        if "launch" in names:
            stats = an.kernel_launch_stats(trace)
            print(
                f"\nKernel launches (short: GPU time < launch call; outliers: call > {an.RUNTIME_CUTOFF * 1e6:g} us, "
                f"delay > {an.LAUNCH_DELAY_CUTOFF * 1e6:g} us):"
            )
            print(_table(an.launch_summary(stats)))
        if "sequences" in names:
            print("\nFrequent kernel sequences (fusion candidate: short kernels waiting for the host):")
            print(_table(an.kernel_sequences(trace, top=10)))
        if "overlap" in names:
            print("\nCommunication/computation overlap per rank:")
            print(_table(an.comm_overlap(trace)))
        if args.diff:
            diff = an.compare_runs(args.diff, trace, settings=settings)
            print(f"\nChanges against {args.diff} (per step; test = this run, control = {args.diff}):")
            print(_table(diff[diff["change"] != "same"].head(getattr(args, "top", 10) or 10)))


def check_optimize_arguments(args) -> None:
    """--min-gain, --gpu-memory and the --memory-model file, before any profile is read."""
    from extradeep.predictor.memory import load_description

    if not 0 <= args.min_gain < 100:
        raise InputError("--min-gain", f"must be a percentage in [0, 100), not {args.min_gain:g}")
    if args.gpu_memory is not None and not args.gpu_memory > 0:
        raise InputError("--gpu-memory", f"must be > 0 GB, not {args.gpu_memory:g}")
    load_description(args.memory_model)


def print_optimization(run, args, settings=None, select=None) -> None:
    """Run the strategy search and print it (and write its HTML page)."""
    import pandas as pd

    from extradeep.predictor.optimize import StrategySearch

    check_optimize_arguments(args)
    search = StrategySearch(
        min_gain=args.min_gain / 100.0,
        memory=args.memory_model,
        gpu_memory_gb=args.gpu_memory,
        select=select,
        settings=settings,
    ).fit(run, progress=True)
    table = search.strategies_
    with pd.option_context(*[x for kv in WIDTH.items() for x in kv]):
        for note in search.notes_:
            print(f"note: {note}")
        if len(table):
            shown = table.assign(gain=(100 * table["gain"]).round(2)).rename(columns={"gain": "gain_%"})
            print("\nStrategies (step time predicted on the replay; gain against the measured step):")
            print(
                shown[
                    ["strategy", "predicted_s", "lower_s", "upper_s", "gain_%", "critical_path", "proposed"]
                ].to_string(index=False, float_format=lambda v: f"{v:.5g}")
            )
            print("\nSettings:")
            for row in table[table["proposed"]].itertuples(index=False):
                print(f"  {row.strategy}: {row.setting}")
        print(f"\n{search.verdict_}")
    if args.optimize_report:
        from extradeep.report.optimisation import write_optimisation_page

        write_optimisation_page(search, args.optimize_report)
        print(f"wrote {args.optimize_report}", file=sys.stderr)


def _table(frame) -> str:
    if frame.empty:
        return "  (none)"
    return frame.to_string(index=False, float_format=lambda v: f"{v:.4g}")
