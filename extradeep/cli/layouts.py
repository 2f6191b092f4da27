"""`extradeep layouts`: which parallel layout is fastest or cheapest, and does it fit (issue 23)."""

from __future__ import annotations

import argparse

HELP = "search tensor/pipeline/data-parallel layouts for the fastest or cheapest one that fits in memory"
DESCRIPTION = """\
Calibrate the layout model on measured layouts (--table: CSV tables of configurations and their
step times, as vTrain and Megatron-LM publish them) and search every valid layout of a model
(--model: a TOML description) on --gpus GPU counts with --global-batch samples per step. Prints the
composed formula and what calibrated each part, the Pareto front of time against cost, and the best
layout under --max-time / --max-cost; --output writes every candidate as CSV or JSON. Without
--model it prints how well the calibration explains the tables. Without --table the model runs on
physics alone (every part labelled 'prior').

examples:
  extradeep layouts --table vtrain_multi_node.csv --hardware cluster.toml
  extradeep layouts --table runs.csv --model gpt39b.toml --gpus 256,512,1024 --global-batch 1536 \\
      --max-time 20 --price-per-gpu-hour 4.1 -o layouts.csv
  extradeep layouts --model gpt39b.toml --gpus 512 --global-batch 1536 --search-hardware a100-80gb,h100-sxm
"""
PARETO_ROWS = 12


def add_arguments(parser: argparse.ArgumentParser) -> None:
    calibrate = parser.add_argument_group("calibration")
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


def run(args) -> int:
    import pandas as pd

    from extradeep.cli.outputs import check_output_path
    from extradeep.errors import InputError
    from extradeep.layouts.model import LayoutModel
    from extradeep.layouts.tables import read_layout_table
    from extradeep.report.layouts import fit_text, search_text

    if args.output:
        inputs = {_resolved(p) for p in [*(args.table or []), args.model, args.hardware] if p}
        check_output_path("--output", args.output, inputs)
    searching = args.model is not None
    if searching and (args.gpus is None or args.global_batch is None):
        raise InputError(None, "a search needs --gpus and --global-batch")
    if not searching and not args.table:
        raise InputError(None, "give --table (measured layouts) and/or --model with --gpus and --global-batch")
    options = _search_options(args) if searching else {}  # every option checked before the long work
    hardware = _hardware(args, args.hardware)
    tables = [read_layout_table(path) for path in args.table or []]
    observations = pd.concat(tables, ignore_index=True) if tables else None
    model = LayoutModel(hardware=hardware, dp_overlap=args.dp_overlap).fit(observations)
    if not searching:
        print(fit_text(model, observations))
        if args.output:
            _write_fit(model, observations, args.output)
        return 0
    table = _search(model, options)
    print(search_text(model, table))
    if args.output:
        from extradeep.layouts.search import write_search

        write_search(table, args.output)
        print(f"wrote {len(table)} layouts to {args.output}")
    return 0


def _search_options(args) -> dict:
    from extradeep.analysis.points import parse_duration, parse_values
    from extradeep.errors import InputError
    from extradeep.layouts.space import RECOMPUTE_KINDS, SCHEDULES
    from extradeep.layouts.workload import load_transformer

    zero = _whole_numbers(args.zero, "--zero", low=0)
    if any(z > 3 for z in zero):
        raise InputError("--zero", "ZeRO stages are 0, 1, 2 and 3")
    for option, words, allowed in (
        ("--recompute", args.recompute, RECOMPUTE_KINDS),
        ("--schedules", args.schedules, SCHEDULES),
    ):
        unknown = sorted(set(_words(words)) - set(allowed))
        if unknown:
            raise InputError(option, f"unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    others = args.search_hardware.split(",") if args.search_hardware else [None]
    return {
        "shape": load_transformer(args.model),
        "gpus": _whole_numbers(args.gpus, "--gpus"),
        "global_batch": args.global_batch,
        "hardware": [h if h is None else _hardware(args, h.strip()) for h in others],
        "samples_per_epoch": args.samples_per_epoch,
        "max_time": parse_duration(args.max_time) if args.max_time else None,
        "max_cost": args.max_cost,
        "objective": args.objective,
        "micro_batches": [int(v) for v in parse_values(args.micro_batches, "--micro-batches")],
        "zero": zero,
        "recompute": _words(args.recompute),
        "schedules": _words(args.schedules),
        "chunks": _whole_numbers(args.chunks, "--chunks"),
    }


def _search(model, options: dict):
    from extradeep.layouts.search import search_layouts

    hardware = [model.hardware_ if h is None else h for h in options.pop("hardware")]
    return search_layouts(model, hardware=hardware, **options)


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


def _hardware(args, spec):
    """The hardware of ``spec`` with the command line's prices."""
    from dataclasses import replace

    from extradeep.layouts.hardware import load_hardware

    hardware = load_hardware(spec)
    prices = {
        k: getattr(args, k) for k in ("price_per_gpu_hour", "price_per_kwh") if getattr(args, k, None) is not None
    }
    return replace(hardware, **prices) if prices else hardware


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
