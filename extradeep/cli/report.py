"""`extradeep report`: the cost-per-epoch budgeting report, one self-contained HTML file."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from extradeep.cli.budget import add_budget_arguments
from extradeep.cli.common import add_reading_arguments
from extradeep.cli.evaluate import add_evaluation_arguments
from extradeep.cli.model import CONFIG_NOTE, add_analysis_arguments
from extradeep.errors import InputError

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
    out.add_argument("-o", "--output", default="report.html", metavar="FILE", help="HTML file to write (default report.html)")
    out.add_argument("--plots", metavar="DIR", help="also save every figure here")
    out.add_argument("--plot-formats", default="png,svg", metavar="LIST", help="formats for --plots (default png,svg)")
    out.add_argument("--title", default="Cost per epoch: budgeting report", help="report title")
    out.add_argument("--top", type=int, default=10, metavar="N", help="regions in the bottleneck table (default 10)")
    out.add_argument("--plan-target", metavar="N,N", help="add 'What to profile next': the 3 runs (within --max-ranks) "
                     "that shrink the 95%% interval at these ranks the most per GPU-hour")


def run(args) -> int:
    from extradeep.analysis.analyse import prediction_table
    from extradeep.analysis.bottlenecks import bottleneck_table
    from extradeep.cli.budget import budget_from_args, limits_from_args
    from extradeep.cli.evaluate import evaluation_from_args
    from extradeep.cli.model import check_analysis_options, cost_settings, prediction_grid
    from extradeep.cli.outputs import check_outputs
    from extradeep.cli.plan import plan_for_report
    from extradeep.report.html import ReportInputs, build_html
    from extradeep.report.plots import save_figure

    formats = [f.strip().lower() for f in args.plot_formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - {"png", "svg", "pdf"})
    if unknown:
        raise InputError("--plot-formats", f"unknown format(s) {', '.join(unknown)} (png, svg, pdf)")
    check_analysis_options(args)
    check_outputs(args, {"--output": args.output}, plots=args.plots)
    cost = cost_settings(args)
    limits = limits_from_args(args)
    analysis, experiment, errors, eval_points = evaluation_from_args(args, required=False)
    if analysis.application_models.empty:
        raise InputError(None, "the report needs profiles with step marks (a plain measurement table has no epochs)")
    analysis, grid = prediction_grid(args, analysis)
    cost = replace(cost, ranks_param=analysis.ranks_param)
    predictions = prediction_table(analysis, grid, cost, args.level)
    target = grid.iloc[-1].to_dict()
    x_max = float(grid[analysis.ranks_param].max())
    if eval_points is not None and not eval_points.empty:
        x_max = max(x_max, float(eval_points[analysis.ranks_param].max()))
    inputs = ReportInputs(
        analysis=analysis, predictions=predictions,
        bottlenecks=bottleneck_table(analysis.region_models, target, analysis.params),
        cost=cost, x_max=x_max, level=args.level,
        provenance=None if experiment is None else experiment.provenance,
        budget=budget_from_args(args, analysis, limits), errors=errors, evaluation_points=eval_points, title=args.title,
        plan=plan_for_report(args, experiment, cost))
    text = build_html(inputs)
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(args.output, f"cannot write the report ({exc.strerror})") from None
    print(f"extradeep: wrote {args.output} ({len(text) / 1e6:.1f} MB, {len(inputs.figures)} figures)", file=sys.stderr)
    if args.plots:
        for name, fig in inputs.figures.items():
            save_figure(fig, args.plots, name, formats)
        print(f"extradeep: saved {len(inputs.figures)} figures to {args.plots}", file=sys.stderr)
    return 0
