"""`extradeep layouts`: which parallel layout is fastest or cheapest, and does it fit (issue 23)."""

from __future__ import annotations

import argparse
import sys

HELP = "search tensor/pipeline/data-parallel layouts for the fastest or cheapest one that fits in memory"
DESCRIPTION = """\
Calibrate the layout model on profiled runs in several layouts (PROFILES: Nsight Systems exports or
Kineto traces; their layouts read as `extradeep inspect` shows, their step parts and memory peaks
measured) and/or measured layouts (--table: CSV tables of configurations and their step times, as
vTrain and Megatron-LM publish them), and search every valid layout of a model
(--model: a TOML description) on --gpus GPU counts with --global-batch samples per step. Prints the
composed formula and what calibrated each part, the Pareto front of time against cost, and the best
layout under --max-time / --max-cost; --output writes every candidate as CSV or JSON. Without
--model it prints how well the calibration explains the tables. Without profiles or --table the
model runs on physics alone (every part labelled 'prior'). --report writes the search as one HTML
file: a heat map of the layouts against the GPU counts and the Pareto plot of time against cost.

examples:
  extradeep layouts sample_profiles/layouts/profiles --model sample_profiles/layouts/profiles/model.toml \\
      --gpus 64,128,256,512 --global-batch 512 --report out/layouts.html
  extradeep layouts --table vtrain_multi_node.csv --hardware cluster.toml
  extradeep layouts --table runs.csv --model gpt39b.toml --gpus 256,512,1024 --global-batch 1536 \\
      --max-time 20 --price-per-gpu-hour 4.1 -o layouts.csv
  extradeep layouts --model gpt39b.toml --gpus 512 --global-batch 1536 --search-hardware a100-80gb,h100-sxm
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    calibrate = parser.add_argument_group("calibration")
    calibrate.add_argument(
        "profiles", nargs="*", metavar="PROFILES", help="profiles (files or folders) of runs in several layouts"
    )
    calibrate.add_argument(
        "--profiled-model",
        metavar="TOML",
        help="model description of the profiled runs when they trained a smaller proxy (default: --model)",
    )
    calibrate.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="TOKEN=NAME",
        help="file-name token of a layout field, e.g. t=tp (fields: tp pp dp mbs nmb zero rc vpp)",
    )
    calibrate.add_argument("--manifest", metavar="FILE", help="CSV/TOML manifest naming each run's files and layout")
    calibrate.add_argument(
        "--table", action="append", metavar="CSV", help="measured layouts and step times (repeatable)"
    )
    calibrate.add_argument(
        "--hardware", metavar="FILE|PRESET", help="GPU and links of the measured runs (TOML or a GPU preset)"
    )
    calibrate.add_argument(
        "--dp-overlap", type=float, default=0.0, metavar="F", help="share of DP sync hidden under backward (default 0)"
    )
    search = parser.add_argument_group("search")
    search.add_argument("--model", metavar="TOML", help="model description: layers, hidden, heads, seq-len, vocab, ...")
    search.add_argument("--gpus", metavar="N,N,...", help="GPU counts to search (e.g. 64,128,256 or 64:512:64)")
    search.add_argument("--global-batch", type=int, metavar="B", help="samples per step")
    search.add_argument("--samples-per-epoch", type=float, metavar="S", help="report time, cost and energy per epoch")
    search.add_argument("--search-hardware", metavar="F,F,...", help="GPU types to search over (files or presets)")
    search.add_argument(
        "--micro-batches", default="1,2,4,8,16", metavar="LIST", help="micro-batch sizes (default 1,2,4,8,16)"
    )
    search.add_argument("--zero", default="0,1", metavar="LIST", help="ZeRO stages to consider (default 0,1)")
    search.add_argument("--recompute", default="full", metavar="LIST", help="none, selective, full (default full)")
    search.add_argument("--schedules", default="1f1b", metavar="LIST", help="1f1b, interleaved, gpipe (default 1f1b)")
    search.add_argument(
        "--chunks", default="2", metavar="LIST", help="model chunks per GPU when interleaved (default 2)"
    )
    search.add_argument(
        "--objective", default="time", choices=["time", "cost", "energy"], help="rank by (default time)"
    )
    search.add_argument(
        "--max-time", metavar="DURATION", help="limit on the time (per step, or per epoch): 20, 90min, 10h"
    )
    search.add_argument(
        "--max-cost", type=float, metavar="X", help="limit on the cost (GPU-hours, or money with a price)"
    )
    search.add_argument(
        "--price-per-gpu-hour", type=float, metavar="X", help="price of one GPU-hour (overrides the files)"
    )
    search.add_argument("--price-per-kwh", type=float, metavar="X", help="price of one kWh (overrides the files)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write every candidate layout (.csv or .json)")
    parser.add_argument(
        "--report", metavar="HTML", help="write the search as an HTML report (heat map, Pareto plot, best layout)"
    )


def run(args) -> int:
    from extradeep.layout_study import run_layout_study
    from extradeep.report.layouts import fit_text, search_text

    _check_outputs(args)
    study = study_from_args(args)
    result = run_layout_study(study, progress=_progress if study.profiled else None)
    for line in result.problems:
        print(f"extradeep: skipped {line}", file=sys.stderr)
    if result.table is None:
        print(fit_text(result.model, result.observations))
        if args.output:
            _write_fit(result.model, result.observations, args.output)
    else:
        print(search_text(result.model, result.table))
        if args.output:
            from extradeep.layouts.search import write_search

            write_search(result.table, args.output)
            print(f"wrote {len(result.table)} layouts to {args.output}")
    if args.report:
        from extradeep.report.layout_html import build_layout_report

        build_layout_report(result, args.report)
        print(f"wrote the layout report to {args.report}")
    return 0


def _progress(done, total, message) -> None:
    if done < total:
        print(f"extradeep: {message} ...", file=sys.stderr)


def _check_outputs(args) -> None:
    """Refuse, before any work, outputs that would replace an input or cannot be written."""
    from extradeep.cli.outputs import check_output_path
    from extradeep.errors import InputError

    given = [*(args.profiles or []), *(args.table or []), args.model, args.profiled_model, args.hardware, args.manifest]
    inputs = {_resolved(p) for p in given if p}
    folders = [p for p in inputs if p.is_dir()]
    for option, path in (("--output", args.output), ("--report", args.report)):
        if not path:
            continue
        check_output_path(option, path, inputs)
        target = _resolved(path)
        if target.exists() and any(folder in target.parents for folder in folders):
            raise InputError(option, f"{path} lies in an input folder and exists; refusing to overwrite it")
    if args.output and args.report and _resolved(args.output) == _resolved(args.report):
        raise InputError("--report", "give --output and --report different files")
    if args.report and _resolved(args.report).suffix.lower() not in (".html", ".htm"):
        raise InputError("--report", f"{args.report}: the report is one HTML file (.html)")


def study_from_args(args):
    """The LayoutStudy the command line asks for (every option checked here, before any reading)."""
    from extradeep.analysis.points import parse_duration
    from extradeep.layout_study import LayoutStudy, check_study

    searching = args.model is not None
    study = LayoutStudy(
        profiles=list(args.profiles or []),
        tables=list(args.table or []),
        hardware=args.hardware,
        model=args.model,
        profiled_model=args.profiled_model,
        aliases=list(args.alias or []),
        manifest=args.manifest,
        dp_overlap=args.dp_overlap,
        gpus=_whole_numbers(args.gpus, "--gpus") if searching and args.gpus else [],
        global_batch=args.global_batch,
        samples_per_epoch=args.samples_per_epoch,
        search_hardware=[h.strip() for h in args.search_hardware.split(",")] if args.search_hardware else [],
        micro_batches=tuple(_whole_numbers(args.micro_batches, "--micro-batches")),
        zero=tuple(_whole_numbers(args.zero, "--zero", low=0)),
        recompute=tuple(_words(args.recompute)),
        schedules=tuple(_words(args.schedules)),
        chunks=tuple(_whole_numbers(args.chunks, "--chunks")),
        objective=args.objective,
        max_time=parse_duration(args.max_time) if args.max_time else None,
        max_cost=args.max_cost,
        price_per_gpu_hour=args.price_per_gpu_hour,
        price_per_kwh=args.price_per_kwh,
    )
    if args.report and not searching:
        from extradeep.errors import InputError

        raise InputError("--report", "the layout report shows a search: give --model, --gpus and --global-batch")
    check_study(study)
    return study


def _whole_numbers(text: str, option: str, low: int = 1) -> list[int]:
    """``"0,1"`` or ``"64:512:64"`` -> whole numbers >= ``low``; one line naming the option otherwise."""
    from extradeep.analysis.points import parse_values
    from extradeep.errors import InputError

    shifted = ",".join(_shift(part, 1 - low) for part in str(text).split(","))
    values = [v - (1 - low) for v in parse_values(shifted, option)]
    if any(v != int(v) for v in values):
        raise InputError(option, f"{text!r}: whole numbers only")
    return [int(v) for v in values]


def _shift(part: str, by: int) -> str:
    """Shift a value or a start:stop[:step] range by ``by`` (so that 0 passes a check for >= 1)."""
    pieces = part.strip().split(":")
    try:
        moved = [str(float(p) + by) for p in pieces[:2]] + pieces[2:]
    except ValueError:
        return part
    return ":".join(moved)


def _words(text: str) -> list[str]:
    return [w.strip().lower() for w in text.split(",") if w.strip()]


def _resolved(path):
    from pathlib import Path

    return Path(path).expanduser().resolve()


def _write_fit(model, observations, path) -> None:
    from extradeep.columns import STEP_TIME
    from extradeep.layouts.search import write_search

    predicted = model.predict(observations)
    frame = observations.assign(predicted=predicted[STEP_TIME].to_numpy())
    frame["error_pct"] = 100 * (frame["predicted"] / frame[STEP_TIME] - 1)
    write_search(frame, path)
    print(f"wrote {len(frame)} layouts to {path}")
