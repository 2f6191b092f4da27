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
    calibrate.add_argument(
        "--grad-overlap",
        choices=("auto", "none", "buckets", "select"),
        default="auto",
        help="how ZeRO 0-1 reduce gradients: auto (the default) reads it from the profiles' ZeRO 0-1 runs with "
        "d > 1 (reductions launched from the autograd thread), else none; none: after the backward pass "
        "(Megatron's and DeepSpeed's defaults); buckets: bucket by bucket during it (PyTorch DDP, Megatron's "
        "--overlap-grad-reduce); select: the better fit",
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


def options_from_args(args):
    """The one LayoutsOptions of the command line (resolved and checked by the library as it is built)."""
    from extradeep.workflows.layouts import LayoutsOptions

    return LayoutsOptions(
        profiles=tuple(args.profiles or ()),
        table=tuple(args.table or ()),
        hardware=args.hardware,
        model=args.model,
        profiled_model=args.profiled_model,
        alias=tuple(args.alias or ()),
        manifest=args.manifest,
        dp_overlap=args.dp_overlap,
        grad_overlap=args.grad_overlap,
        gpus=args.gpus,
        global_batch=args.global_batch,
        samples_per_epoch=args.samples_per_epoch,
        search_hardware=args.search_hardware,
        micro_batches=args.micro_batches,
        zero=args.zero,
        recompute=args.recompute,
        schedules=args.schedules,
        chunks=args.chunks,
        objective=args.objective,
        max_time=args.max_time,
        max_cost=args.max_cost,
        price_per_gpu_hour=args.price_per_gpu_hour,
        price_per_kwh=args.price_per_kwh,
        output=args.output,
        report=args.report,
        progress=_progress,
    )


def run(args) -> int:
    from extradeep.report.layouts import fit_text, search_text
    from extradeep.workflows.layouts import layout_search

    result = layout_search(options_from_args(args))
    for line in result.warnings:
        print(f"extradeep: skipped {line}", file=sys.stderr)
    study = result.study
    if study.table is None:
        print(fit_text(study.model, study.observations))
    else:
        print(search_text(study.model, study.table))
    for what, path, rows in result.written:
        print(f"wrote {rows} layouts to {path}" if what == "layouts" else f"wrote the layout report to {path}")
    if result.warnings:  # the summary after the batch: the lines above scroll away behind the tables
        print(f"extradeep: {len(result.warnings)} profile(s) or run(s) skipped (listed above)", file=sys.stderr)
    return 0


def _progress(done, total, message) -> None:
    if done < total:
        print(f"extradeep: {message} ...", file=sys.stderr)
