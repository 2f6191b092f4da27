"""`extradeep inspect PATH...`: what an Nsight Systems export or Kineto trace holds and which step marks it has."""

from __future__ import annotations

import argparse
import json
import sys

from extradeep.cli.common import add_step_mark_arguments, step_mark_settings

HELP = "show what profiles hold (nsys exports, Kineto traces): version, GPUs, ranks, step marks, event counts"
DESCRIPTION = """\
For each export: the nsys version, tables with row counts, GPUs, NVTX domains, the most frequent
NVTX range names, which step convention matched (and how many epochs and steps it found), and
event counts by category and, for kernels, by device. For a PyTorch profiler (Kineto) trace: the
rank and world size, GPUs, events per trace category, step marks and the most frequent
record_function annotations. Use it to check profiles before modeling
and to write --train-step-pattern when your step marks are not recognised.

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
    add_step_mark_arguments(parser.add_argument_group("step marks (as for model and report)"))


def run(args: argparse.Namespace) -> int:
    from extradeep.errors import InputError
    from extradeep.io.formats import KINETO, profile_format
    from extradeep.io.kineto.inspect import format_text as format_trace
    from extradeep.io.kineto.inspect import inspect_trace
    from extradeep.io.nsys.inspect import format_text, inspect_export

    if args.top < 0:
        raise InputError("--top", f"must be at least 0, got {args.top}")
    settings = step_mark_settings(args)
    infos, problems, paths = [], [], []
    for given in args.files:
        found = _expand(given)
        if not found:
            problems.append(f"{given}: no profiles in this folder (nor below it)")
            print(f"extradeep: error: {problems[-1]}", file=sys.stderr)
        paths += found
    for path in paths:
        try:
            if profile_format(path) == KINETO:
                info = inspect_trace(path, settings, top=args.top)
            else:
                info = inspect_export(path, settings, top=args.top)
        except InputError as exc:
            problems.append(str(exc))
            print(f"extradeep: error: {exc}", file=sys.stderr)
            continue
        infos.append(info)
        if not args.json:
            text = format_trace(info) if info.get("format") == KINETO else format_text(info)
            print(text + "\n")
    if args.json:
        json.dump({"files": infos, "problems": problems}, sys.stdout, indent=2)
        print()
    if problems and infos:
        print(f"extradeep: {len(problems)} of {len(paths)} file(s) could not be read", file=sys.stderr)
    return 0 if infos else 2


def _expand(given: str) -> list[str]:
    """A directory stands for the profiles below it (as `model` finds them); anything else is
    passed on as is."""
    from pathlib import Path

    from extradeep.io.discover import find_exports

    return [str(p) for p in find_exports(given)[0]] if Path(given).is_dir() else [given]
