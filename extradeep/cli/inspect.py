"""`extradeep inspect PATH...`: what an Nsight Systems export holds and which step marks it has."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "show what Nsight Systems exports hold: version, tables, GPUs, NVTX names, step marks, event counts"
DESCRIPTION = """\
For each export: the nsys version, tables with row counts, GPUs, NVTX domains, the most frequent
NVTX range names, which step convention matched (and how many epochs and steps it found), and
event counts by category and, for kernels, by device. Use it to check profiles before modeling
and to write --train-step-pattern when your step marks are not recognised.

A file that cannot be read gets one line on stderr; the others are still shown. The exit status
is non-zero only when no file could be read."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from extradeep.cli.common import add_pattern_arguments

    parser.add_argument("files", nargs="+", metavar="PATH", help="Nsight Systems SQLite exports, or directories of them (searched recursively)")
    parser.add_argument("--json", action="store_true", help="print one JSON document (files and problems) for scripts")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="how many of the most frequent NVTX range names to list (default 10)")
    marks = parser.add_argument_group("step marks (as for model and report)")
    add_pattern_arguments(marks)
    marks.add_argument("--warmup-epochs", type=int, metavar="N", help="leading epochs excluded as warm-up (default 1)")
    marks.add_argument("--warmup-steps", type=int, metavar="N", help="with a single epoch, its first N steps per phase are excluded instead (default 1)")


def run(args: argparse.Namespace) -> int:
    from extradeep.errors import InputError
    from extradeep.io.nsys.inspect import format_text, inspect_export
    from extradeep.io.nsys.settings import ReaderSettings

    if args.top < 0:
        raise InputError("--top", f"must be at least 0, got {args.top}")
    keys = ("epoch_pattern", "train_step_pattern", "val_step_pattern", "warmup_epochs", "warmup_steps")
    settings = ReaderSettings.from_any({k: getattr(args, k, None) for k in keys})
    infos, problems, paths = [], [], []
    for given in args.files:
        found = _expand(given)
        if not found:
            problems.append(f"{given}: no .sqlite exports in this folder (nor below it)")
            print(f"extradeep: error: {problems[-1]}", file=sys.stderr)
        paths += found
    for path in paths:
        try:
            info = inspect_export(path, settings, top=args.top)
        except InputError as exc:
            problems.append(str(exc))
            print(f"extradeep: error: {exc}", file=sys.stderr)
            continue
        infos.append(info)
        if not args.json:
            print(format_text(info) + "\n")
    if args.json:
        json.dump({"files": infos, "problems": problems}, sys.stdout, indent=2)
        print()
    if problems and infos:
        print(f"extradeep: {len(problems)} of {len(paths)} file(s) could not be read", file=sys.stderr)
    return 0 if infos else 2


def _expand(given: str) -> list[str]:
    """A directory stands for the *.sqlite files below it; anything else is passed on as is."""
    from pathlib import Path

    path = Path(given)
    return sorted(str(p) for p in path.rglob("*.sqlite")) if path.is_dir() else [given]
