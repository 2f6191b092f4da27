"""`extradeep inspect PATH...`: what an Nsight Systems export or Kineto trace holds and which step marks it has."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from extradeep.cli.analyses import add_trace_analysis_arguments
from extradeep.cli.common import add_step_mark_arguments, step_mark_settings

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


def run(args: argparse.Namespace) -> int:
    from extradeep.errors import InputError
    from extradeep.io.formats import KINETO, profile_format
    from extradeep.io.kineto.inspect import format_text as format_trace
    from extradeep.io.kineto.inspect import inspect_trace
    from extradeep.io.nsys.inspect import format_text, inspect_export

    if args.top < 0:
        raise InputError("--top", f"must be at least 0, got {args.top}")
    settings = step_mark_settings(args)
    model = _model_shape(args.model_shape)
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
        info["parallel_layout"] = _layout(path, settings, model)
        infos.append(info)
        if not args.json:
            text = format_trace(info) if info.get("format") == KINETO else format_text(info)
            print("\n".join([text, *_layout_text(info["parallel_layout"])]) + "\n")
    layout = study_layout(infos)
    runs = _runs(args, settings, model) if (args.manifest or any(Path(g).is_dir() for g in args.files)) else None
    if args.json:
        doc = {"files": infos, "problems": problems, "layout": layout}
        if runs is not None:
            doc["runs"] = json.loads(runs[0].to_json(orient="records"))
        json.dump(doc, sys.stdout, indent=2, default=str)
        print()
    else:
        if layout is not None:
            from extradeep.io.placement import layout_text

            print(f"cluster layout of the {len(infos)} profiles:")
            print("\n".join(f"  {line}" for line in layout_text(layout)) + "\n")
        if runs is not None and len(runs[0]):
            print("\n".join(runs[1]))
    if problems and infos:
        print(f"extradeep: {len(problems)} of {len(paths)} file(s) could not be read", file=sys.stderr)
    if infos and (args.analysis or args.diff):
        _analyses(args, settings)
    return 0 if infos else 2


def _analyses(args, settings) -> None:
    """The trace analyses of each PATH given (a folder is one run), one line per run that fails."""
    from extradeep.cli.analyses import print_analyses
    from extradeep.errors import InputError

    for given in args.files:
        try:
            print_analyses(given, args, settings, title=given)
        except InputError as exc:
            print(f"extradeep: error: {exc}", file=sys.stderr)


def study_layout(infos: list[dict]) -> dict | None:
    """The cluster layout of the inspected profiles whose names give their point, repetition and
    rank (extradeep.io.placement.cluster_layout); None when no name does."""
    import pandas as pd

    from extradeep.errors import InputError
    from extradeep.io.discover import param_columns, parse_name
    from extradeep.io.placement import cluster_layout

    names, places = [], []
    for info in infos:
        try:
            names.append({"path": info["path"], **parse_name(Path(info["path"]).name)})
        except InputError:
            continue
        places.append(info.get("placement") or {})
    if not names:
        return None
    runs = pd.DataFrame(names)
    params = [p for p in param_columns(runs) if runs[p].nunique() > 1 or p == "ranks"]
    return cluster_layout(pd.concat([runs, pd.DataFrame(places, index=runs.index)], axis=1), params)


def _model_shape(text: str | None) -> dict | None:
    from extradeep.errors import InputError

    if not text:
        return None
    try:
        seq, hidden = (int(v) for v in text.split(","))
    except ValueError:
        raise InputError("--model-shape", f"{text!r} is not SEQ,HIDDEN (two whole numbers)") from None
    if seq < 1 or hidden < 1:
        raise InputError("--model-shape", f"{text!r}: both must be >= 1")
    return {"seq": seq, "hidden": hidden}


def _layout(path, settings, model) -> dict:
    """The layout fields one profile shows (JSON-ready), or the one-line problem."""
    from extradeep.errors import InputError
    from extradeep.io.parallel.layout import read_layout
    from extradeep.io.parallel.text import layout_json

    try:
        return layout_json(read_layout(path, settings, model))
    except InputError as exc:
        return {"problem": exc.problem}


def _layout_text(layout: dict) -> list[str]:
    from extradeep.io.parallel.infer import Field
    from extradeep.io.parallel.text import layout_lines

    if "problem" in layout:
        return [f"  parallel layout: not read ({layout['problem']})"]
    return layout_lines({k: Field(v["value"], v["source"]) for k, v in layout.items()})


def _runs(args, settings, model):
    """(layouts per run, lines) of the folders or the manifest given; None when no run is named."""
    from extradeep.errors import InputError
    from extradeep.io.discover import manifest_runs, param_columns, parse_aliases, runs_from_names
    from extradeep.io.parallel.layout import RUN_FIELDS, TOKEN_ALIASES, run_layouts
    from extradeep.io.parallel.text import run_lines

    aliases = parse_aliases(args.alias)
    try:
        if args.manifest:
            runs, _ = manifest_runs(args.manifest, aliases)
        else:
            runs, _ = runs_from_names([g for g in args.files if Path(g).is_dir()], aliases)
    except InputError as exc:
        print(f"extradeep: error: {exc}", file=sys.stderr)
        return None
    if runs.empty:
        return None
    layouts, _ = run_layouts(runs, settings, model, "manifest" if args.manifest else "file name")
    params = [c for c in param_columns(runs) if c not in RUN_FIELDS and c not in TOKEN_ALIASES]
    return layouts, run_lines(layouts, params)


def _expand(given: str) -> list[str]:
    """A directory stands for the profiles below it (as `model` finds them); anything else is
    passed on as is."""
    from extradeep.io.discover import find_exports

    return [str(p) for p in find_exports(given)[0]] if Path(given).is_dir() else [given]
