"""`extradeep evaluate`: how well the models predict measured points they were not built from."""

from __future__ import annotations

import argparse

from extradeep.cli.common import add_reading_arguments
from extradeep.cli.model import CONFIG_NOTE, add_analysis_arguments

HELP = "percentage error of every model at held-out measured points (paper Table 2, Fig. 5)"
DESCRIPTION = """Measure model accuracy (at modeling points) and predictive power (at evaluation points).

Models are always fitted again without the evaluation points (--eval-points holds measured
configurations out; --eval-dir reads a second set of exports), also from a saved experiment, whose
own models saw every point; then they are compared with the measured medians there.
Prints the error of the time-per-epoch model per point and the median percentage error (MPE)
per category and per region class (kind) and metric, like the paper's Table 2.

examples:
  extradeep evaluate runs/ --param ranks --eval-points 32,64
  extradeep evaluate small_runs/ --eval-dir big_runs/ --csv errors.csv
"""
DESCRIPTION += CONFIG_NOTE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_reading_arguments(parser)
    add_analysis_arguments(parser)
    add_evaluation_arguments(parser)
    parser.add_argument("--csv", metavar="FILE", help="write the error of every model at every point as CSV")


def add_evaluation_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("evaluation")
    group.add_argument(
        "--eval-points", metavar="LIST", help="measured values of the ranks parameter held out of modeling, e.g. 16,32"
    )
    group.add_argument("--eval-dir", metavar="DIR", help="exports of further configurations, not used for modeling")


def run(args) -> int:
    from extradeep.cli.common import load_problems_shown, problems_on_stderr, progress_line, resolve_options
    from extradeep.cli.model import options_from_args, print_written
    from extradeep.report.evaluation_text import evaluation_text
    from extradeep.workflows import EvaluationOptions, evaluation_study

    options = options_from_args(args, resolve_options(args), EvaluationOptions)  # resolved once per command
    with load_problems_shown():
        result = evaluation_study(options, progress=progress_line, on_read=problems_on_stderr)
    print(evaluation_text(result.analysis, result.errors))
    print_written(result.written)
    return 0
