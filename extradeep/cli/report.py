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
    add_budget_arguments(parser, required=False)
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
    from extradeep.analysis.points import parse_values
    from extradeep.cli.budget import limits_from_args
    from extradeep.cli.common import resolve_options
    from extradeep.cli.evaluate import evaluation_from_args
    from extradeep.cli.model import check_analysis_options, cost_settings, fixed_values
    from extradeep.cli.outputs import check_outputs
    from extradeep.cli.plan import plan_for_report
    from extradeep.report.build import build_report

    formats = [f.strip().lower() for f in args.plot_formats.split(",") if f.strip()]
    resolved = resolve_options(args)  # once per command
    check_analysis_options(args, resolved)
    _refuse_layout_study(args)
    check_outputs(args, {"--output": args.output}, plots=args.plots)
    cost = cost_settings(args)
    limits = limits_from_args(args)
    analysis, experiment, errors, eval_points = evaluation_from_args(args, required=False, resolved=resolved)
    result = build_report(
        analysis,
        args.output,
        grid=_requested_grid(args, analysis),
        cost=cost,
        limits=limits,
        candidates=parse_values(args.candidates, "--candidates") if args.candidates else None,
        max_ranks=args.max_ranks,
        fixed=fixed_values(args, analysis),
        errors=errors,
        evaluation_points=eval_points,
        experiment=experiment,
        level=args.level,
        title=args.title,
        plots_dir=args.plots,
        plot_formats=formats,
        plan=plan_for_report(args, experiment, cost, analysis),
        optimization=_optimization(args),
    )
    size = len(result["html"]) / 1e6
    print(f"extradeep: wrote {args.output} ({size:.1f} MB, {len(result['figures'])} figures)", file=sys.stderr)
    if args.plots:
        print(f"extradeep: saved {len(result['figures'])} figures to {args.plots}", file=sys.stderr)
    return 0


LAYOUT_TOKENS = ("tp", "pp", "dp", "mbs", "nmb", "zero", "rc", "vpp")


def _refuse_layout_study(args) -> None:
    """Runs in several parallel layouts are a question for `extradeep layouts`: say so at once, from
    the file names, instead of failing after the whole read with too many parameters to model."""
    from extradeep.errors import InputError
    from extradeep.io.discover import parse_aliases, runs_from_names

    if args.manifest or not args.profiles:
        return
    try:
        runs, _ = runs_from_names(args.profiles, parse_aliases(args.alias))
    except InputError:
        return  # the reading below names the problem
    varying = [c for c in LAYOUT_TOKENS if c in runs and runs[c].nunique() > 1]
    if varying:
        raise InputError(
            None,
            f"the profiles are runs in several parallel layouts ({', '.join(varying)} vary), and this report models "
            f"one data-parallel axis; write the layout report instead: extradeep layouts {' '.join(args.profiles)} "
            f"--model MODEL.toml --gpus N,N --global-batch B --report {args.output}",
        )


def _optimization(args):
    """The strategy search of --optimize-run, or None."""
    if not args.optimize_run:
        return None
    from extradeep.predictor.optimize import StrategySearch

    return StrategySearch().fit(args.optimize_run, progress=True)


def _requested_grid(args, analysis):
    """The grid of --predict, or None for the library's default."""
    from extradeep.cli.model import prediction_grid

    return prediction_grid(args, analysis)[1] if args.predict else None
