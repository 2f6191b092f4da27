"""`extradeep report`: the cost-per-epoch budgeting report, one self-contained HTML file."""

from __future__ import annotations

import argparse
import sys

from extradeep.cli.budget import add_budget_arguments
from extradeep.cli.common import add_reading_arguments
from extradeep.cli.evaluate import add_evaluation_arguments
from extradeep.cli.model import CONFIG_NOTE, add_analysis_arguments

HELP = "write the cost-per-epoch budgeting report (one self-contained HTML file)"
DESCRIPTION = """Write an HTML report for whoever pays for the GPUs: configurations and dataset, time
and cost per epoch with measured points and prediction bands, speedup and efficiency, the
time/cost trade-off with deadline and budget shaded (with --max-time/--max-cost), the category
breakdown, the top bottlenecks, model accuracy (with --eval-points/--eval-dir) and how the
numbers were made. Figures are embedded; --plots DIR also saves them as PNG and SVG.

examples:
  extradeep report runs/ --param ranks --train-samples 50000 --batch-size 64 -o report.html
  extradeep report exp.sqlite --max-time 10h --epochs 90 --max-cost 4000 --plots figs/ -o report.html
"""
DESCRIPTION += CONFIG_NOTE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_reading_arguments(parser)
    add_analysis_arguments(parser)
    add_budget_arguments(parser)
    add_evaluation_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument(
        "-o", "--output", default="report.html", metavar="FILE", help="HTML file to write (default report.html)"
    )
    out.add_argument("--plots", metavar="DIR", help="also save every figure here")
    out.add_argument("--plot-formats", default="png,svg", metavar="LIST", help="formats for --plots (default png,svg)")
    out.add_argument("--title", help='report title (default: "Time and cost per epoch: budgeting report")')
    out.add_argument("--top", type=int, default=10, metavar="N", help="regions in the bottleneck table (default 10)")
    out.add_argument(
        "--plan-target",
        metavar="N,N",
        help="add 'What to profile next': the 3 runs (within --max-ranks) "
        "that shrink the 95%% interval at these ranks the most per GPU-hour",
    )
    out.add_argument(
        "--optimize-run",
        metavar="RUN",
        help="add 'Optimisation': the strategy search on the replay of this run (one run's profiles)",
    )


def run(args) -> int:
    from extradeep.cli.common import load_problems_shown, problems_on_stderr, progress_line, resolve_options
    from extradeep.cli.model import options_from_args
    from extradeep.workflows import ReportOptions, report_study

    options = options_from_args(args, resolve_options(args), ReportOptions)  # resolved once per command
    with load_problems_shown():
        result = report_study(options, progress=progress_line, on_read=problems_on_stderr)
    size = len(result.html) / 1e6
    print(f"extradeep: wrote {options.output} ({size:.1f} MB, {len(result.figures)} figures)", file=sys.stderr)
    if options.plots:
        print(f"extradeep: saved {len(result.figures)} figures to {options.plots}", file=sys.stderr)
    return 0
