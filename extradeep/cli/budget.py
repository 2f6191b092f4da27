"""`extradeep budget`: which configurations meet a deadline and/or a budget (paper Q5)."""

from __future__ import annotations

import argparse

from extradeep.cli.common import add_reading_arguments
from extradeep.cli.model import CONFIG_NOTE, add_analysis_arguments

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
    add_budget_arguments(parser)
    parser.add_argument("--all", action="store_true", help="list every candidate, not only a summary")


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
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


def run(args) -> int:
    from extradeep.cli.common import load_problems_shown, problems_on_stderr, progress_line, resolve_options
    from extradeep.cli.model import options_from_args
    from extradeep.report.budget_text import budget_text
    from extradeep.workflows import BudgetOptions, budget_study

    options = options_from_args(args, resolve_options(args), BudgetOptions)  # resolved once per command
    with load_problems_shown():
        result = budget_study(options, progress=progress_line, on_read=problems_on_stderr)
    if result.analysis.per != "epoch":
        print("extradeep: note: no dataset sizes given, so limits apply to one training step")
    print(budget_text(result.analysis, result.budget, options.level, show_all=args.all))
    return 1 if result.budget.failure else 0
