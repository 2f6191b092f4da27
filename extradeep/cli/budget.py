"""`extradeep budget`: which configurations meet a deadline and/or a budget (paper Q5)."""

from __future__ import annotations

import argparse

from extradeep.cli.common import add_reading_arguments
from extradeep.cli.model import CONFIG_NOTE, add_analysis_arguments
from extradeep.errors import InputError

MAX_ROWS = 15
HELP = "find configurations that meet a deadline and/or budget, and the best by efficiency, cost, time (Q5)"
DESCRIPTION = """Search configurations for ones whose predicted time and cost stay within your limits.

The time-per-epoch model is evaluated at every candidate; candidates vary only the ranks parameter
(--ranks-param), other modeled parameters stay at the baseline or at --at values; cost follows --price-per-* or --cost-formula
(default: core-hours). Limits are for --epochs epochs. Reports the valid interval(s), the best
configuration by efficiency, by cost and by time, and when nothing is valid, which limit fails and
by how much.

examples:
  extradeep budget runs/ --param ranks --train-samples 50000 --batch-size 64 \\
      --max-time 10h --epochs 90 --max-cost 5000 --max-ranks 256
  extradeep budget exp.sqlite --max-cost 300 --price-per-gpu-hour 2.5 --candidates 8:128:8
"""
DESCRIPTION += CONFIG_NOTE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_reading_arguments(parser)
    add_analysis_arguments(parser)
    add_budget_arguments(parser, required=True)
    parser.add_argument("--all", action="store_true", help="list every candidate, not only a summary")


def add_budget_arguments(parser: argparse.ArgumentParser, required: bool) -> None:
    group = parser.add_argument_group("budget (limits are for --epochs epochs)")
    group.add_argument("--max-time", metavar="DURATION", help="deadline: 3600, 90min, 10h or 2d")
    group.add_argument(
        "--max-cost", type=float, metavar="X", help="budget, in the cost unit (core-hours, or money with --price-per-*)"
    )
    group.add_argument("--epochs", type=float, default=1.0, metavar="E", help="epochs the limits are for (default 1)")
    group.add_argument(
        "--candidates",
        metavar="LIST",
        help="values of the ranks parameter to consider: 8,16,32 or 8:256:8 (other parameters: the baseline or --at)",
    )
    group.add_argument(
        "--max-ranks",
        type=float,
        metavar="N",
        help="consider multiples of the smallest measured ranks up to N (default: 8x the largest measured)",
    )
    parser.set_defaults(_budget_required=required)


def limits_from_args(args):
    """BudgetLimits from the options (checked before any reading), or None when no limit was
    given and none is required (report)."""
    from extradeep.analysis.budget import BudgetLimits
    from extradeep.analysis.points import parse_duration

    if args.max_time is None and args.max_cost is None:
        if args._budget_required:
            raise InputError(None, "give --max-time and/or --max-cost")
        return None
    max_time = parse_duration(args.max_time) if args.max_time is not None else None
    return BudgetLimits(max_time=max_time, max_cost=args.max_cost, epochs=args.epochs)


def budget_from_args(args, analysis, limits):
    """The BudgetResult of ``limits`` (None gives None) over the candidates in ``args``."""
    from extradeep.analysis.points import parse_values
    from extradeep.analysis.workflows import plan_budget
    from extradeep.cli.model import cost_settings, fixed_values

    if limits is None:
        return None
    candidates = parse_values(args.candidates, "--candidates") if args.candidates else None
    return plan_budget(
        analysis,
        limits,
        candidates=candidates,
        max_ranks=args.max_ranks,
        fixed=fixed_values(args, analysis),
        cost=cost_settings(args),
        level=args.level,
    )


def _cost_limit(max_cost: float, unit: str) -> str:
    """`cost <= 300 core-hours`, `cost <= 5 (EUR)`: the unit once, not `cost <= 5 cost (EUR)`."""
    return f"cost <= {max_cost:g} {unit.removeprefix('cost ')}"


def run(args) -> int:
    from extradeep.analysis.points import format_point, format_seconds
    from extradeep.cli.common import resolve_options
    from extradeep.cli.model import analysis_from_args, check_analysis_options
    from extradeep.report import summary
    from extradeep.report.text import format_interval, render_table

    resolved = resolve_options(args)  # once per command
    check_analysis_options(args, resolved)
    limits = limits_from_args(args)
    analysis, _ = analysis_from_args(args, resolved)
    if analysis.per != "epoch":
        print("extradeep: note: no dataset sizes given, so limits apply to one training step")
    result = budget_from_args(args, analysis, limits)
    params, unit = analysis.params, result.cost_unit
    limits = result.limits
    asked = [
        f"time <= {format_seconds(limits.max_time)}" if limits.max_time else "",
        _cost_limit(limits.max_cost, unit) if limits.max_cost else "",
    ]
    print(
        f"Limits for {limits.epochs:g} {analysis.per}(s): {' and '.join(a for a in asked if a)}; "
        f"{len(result.table)} candidates; {result.scaling} scaling"
    )
    print(summary.primary_line(analysis))
    shown = result.table if args.all else result.table[result.table["valid"]]
    if len(shown) > MAX_ROWS and not args.all:
        print(f"{len(shown)} valid candidates (--all lists every candidate)\n")
    elif not shown.empty:
        samples = "samples" in shown and "skipped_share" in shown
        rows = [
            [
                format_point(r, params),
                format_interval(r["T"], r["T_lo"], r["T_hi"]),
                format_seconds(r["total_time"]),
                f"{r['total_cost']:.4g}",
                f"{r['efficiency']:.2f}",
                "yes" if r["valid"] else "no",
                "yes" if r["valid_upper"] else "no",
            ]
            + ([f"{r['samples']:,.0f}", f"{r['skipped_share']:.1%}"] if samples else [])
            for _, r in shown.iterrows()
        ]
        print(
            render_table(
                [
                    "configuration",
                    f"time/{analysis.per} [{args.level:.0%} interval]",
                    "total time",
                    f"total {unit}",
                    "efficiency",
                    "valid",
                    "valid at upper bound",
                ]
                + (["samples/epoch", "skipped"] if samples else []),
                rows,
            )
        )
        print()
    if result.failure:
        print(f"No configuration meets the limits: {result.failure}.")
        return 1
    spans = "; ".join(
        f"{r['from']:g}" if r["from"] == r["to"] else f"{r['from']:g} .. {r['to']:g}"
        for _, r in result.intervals.iterrows()
    )
    print(f"Valid {analysis.ranks_param}: {spans}\n")
    best = [
        [
            r["criterion"],
            format_point(r, params),
            format_seconds(r["total_time"]),
            f"{r['total_cost']:.4g}",
            f"{r['efficiency']:.2f}",
            "yes" if r["valid_upper"] else "no",
        ]
        for _, r in result.best.iterrows()
    ]
    print(
        render_table(
            ["best by", "configuration", "total time", f"total {unit}", "efficiency", "valid at upper bound"],
            best,
            "llrrrl",
        )
    )
    for note in result.notes:
        print(f"\nNote: {note}")
    return 0
