"""`extradeep inspect PATH...`: what an Nsight Systems export or Kineto trace holds and which step marks it has."""

from __future__ import annotations

import argparse
import json
import sys

from extradeep.cli.analyses import add_trace_analysis_arguments
from extradeep.cli.common import add_step_mark_arguments

HELP = "show what profiles hold (nsys exports, Kineto traces): version, GPUs, ranks, step marks, event counts"
DESCRIPTION = """\
For each export: the nsys version, tables with row counts, GPUs, NVTX domains, the most frequent
NVTX range names, which step convention matched (and how many epochs and steps it found), and
event counts by category and, for kernels, by device. For a PyTorch profiler (Kineto) trace: the
rank and world size, GPUs, events per trace category, step marks and the most frequent
record_function annotations. For every profile, its node signals (host name, the node's GPU UUIDs,
the rank's device, the launcher's ranks per node, the export host) and the parallel layout it shows
(tensor, pipeline and data parallel degrees, micro-batches, ZeRO stage, recomputation), each with where
it was read; for files named like a study (app.p4.r1.mpi0.sqlite), the cluster layout they give (which
signal gave it and where signals disagree); for a folder, each run's parallel layout with what file
names or --manifest add. Use it to check profiles before modeling and to write --train-step-pattern
when your step marks are not recognised.

A file that cannot be read gets one line on stderr; the others are still shown. The exit status
is non-zero only when no file could be read."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        metavar="PATH",
        help="Nsight Systems SQLite exports or Kineto JSON traces, or directories of them (searched recursively)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document (files and problems) for scripts")
    parser.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="how many of the most frequent NVTX range names to list (default 10)",
    )
    parser.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="TOKEN=NAME",
        help="file-name token of a layout field, e.g. t=tp (fields: tp pp dp mbs nmb zero recompute vpp)",
    )
    parser.add_argument("--manifest", metavar="FILE", help="CSV/TOML manifest naming each run's parameters and layout")
    parser.add_argument(
        "--model-shape",
        metavar="SEQ,HIDDEN",
        help="sequence length and hidden size, so message sizes give the micro-batch size",
    )
    add_step_mark_arguments(parser.add_argument_group("step marks (as for model and report)"))
    add_trace_analysis_arguments(parser)


def options_from_args(args: argparse.Namespace):
    """The one InspectOptions of the command line (checked by the library as it is built)."""
    from extradeep.cli.analyses import analysis_options
    from extradeep.workflows.inspection import InspectOptions
    from extradeep.workflows.traces import STEP_MARK_KEYS

    return InspectOptions(
        paths=tuple(args.files),
        top=args.top,
        alias=tuple(args.alias),
        manifest=args.manifest,
        model_shape=args.model_shape,
        step_marks={key: getattr(args, key, None) for key in STEP_MARK_KEYS},
        analyses=analysis_options(args),
    )


def run(args: argparse.Namespace) -> int:
    from extradeep.workflows.inspection import inspect_profiles

    result = inspect_profiles(options_from_args(args))
    for problem in result.problems:
        print(f"extradeep: error: {problem}", file=sys.stderr)
    if args.json:
        _print_json(result)
    else:
        from extradeep.report.inspect_text import inspect_text

        print(inspect_text(result), end="")
    if result.problems and (result.profiles or result.found > 1):  # one file alone: its error says it all
        print(f"extradeep: {len(result.problems)} of {result.found} file(s) could not be read", file=sys.stderr)
    for line in result.warnings:
        print(f"extradeep: error: {line}", file=sys.stderr)
    if result.analyses:
        from extradeep.report.trace_text import analyses_text

        print("\n".join(analyses_text(a) for a in result.analyses))
    return 0 if result.profiles else 2


def _print_json(result) -> None:
    doc = {"files": [p.info for p in result.profiles], "problems": result.problems, "layout": result.layout}
    if result.runs is not None:
        doc["runs"] = json.loads(result.runs.to_json(orient="records"))
    json.dump(doc, sys.stdout, indent=2, default=str)
    print()
