"""`extradeep evaluate`: how well the models predict measured points they were not built from."""

from __future__ import annotations

import argparse
import copy
import sys

from extradeep.cli.common import add_reading_arguments
from extradeep.cli.model import CONFIG_NOTE, add_analysis_arguments
from extradeep.errors import InputError

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


def evaluation_from_args(args, required: bool, resolved=None):
    """(Analysis, Experiment, errors DataFrame or None, evaluation points or None) from ``args``;
    `resolved`: the command's options (:func:`extradeep.cli.common.resolve_options`)."""
    from extradeep.analysis.points import parse_values
    from extradeep.analysis.workflows import evaluate
    from extradeep.cli.common import experiment_from_args, resolve_options
    from extradeep.cli.model import analysis_from_args, modeler_options, progress_line

    if args.eval_points and args.eval_dir:
        raise InputError(None, "give --eval-points or --eval-dir, not both")
    if not (args.eval_points or args.eval_dir):
        if required:
            raise InputError(None, "give --eval-points (held-out measured configurations) or --eval-dir")
        analysis, experiment = analysis_from_args(args, resolved)
        return analysis, experiment, None, None
    resolved = resolve_options(args) if resolved is None else resolved
    experiment = experiment_from_args(args, options=resolved)
    held = (
        dict(eval_experiment=_evaluation_experiment(args, experiment))
        if args.eval_dir
        else dict(eval_points=parse_values(args.eval_points, "--eval-points"))
    )
    result = evaluate(
        experiment,
        **held,
        options=modeler_options(args, resolved),
        scaling=args.scaling,
        ranks_param=args.ranks_param,
        level=args.level,
        progress=progress_line,
    )
    return result.analysis, experiment, result.errors, result.evaluation_points


def _evaluation_experiment(args, modeling):
    """The experiment of --eval-dir, read with the modeling experiment's parameters and refused
    when it is of another application or has other parameters."""
    from extradeep.cli.common import experiment_from_args

    other = copy.copy(args)
    other.profiles = [args.eval_dir]
    other.manifest = None
    other.param = list(modeling.params)  # eval points may be a single configuration: nothing varies there
    other.alias = None
    full = experiment_from_args(other)
    check_compatible(modeling, full, args.eval_dir)
    return full


def check_compatible(modeling, evaluation, source) -> None:
    """One line naming what differs when the evaluation runs cannot be compared with the models."""
    apps = modeling.settings.app, evaluation.settings.app
    if apps[0] != apps[1]:
        raise InputError(source, f"holds application {apps[1]!r}, the models are of {apps[0]!r}")
    names = set(modeling.params) | set(modeling.fixed_params), set(evaluation.params) | set(evaluation.fixed_params)
    if names[0] != names[1]:
        raise InputError(
            source,
            f"has parameters {', '.join(sorted(names[1]))}; the modeling runs have {', '.join(sorted(names[0]))}",
        )
    fixed = {k: v for k, v in modeling.fixed_params.items() if k not in modeling.params}
    differ = [
        f"{k}={evaluation.fixed_params.get(k)!s} (modeling runs: {v})"
        for k, v in fixed.items()
        if k in evaluation.fixed_params and float(evaluation.fixed_params[k]) != float(v)
    ]
    if differ:
        raise InputError(source, f"differs in a parameter that is not modeled: {'; '.join(differ)}")


def run(args) -> int:
    from extradeep.analysis.core import primary_quantity
    from extradeep.analysis.epoch import quantity_label
    from extradeep.analysis.evaluation import error_summary
    from extradeep.analysis.points import format_point
    from extradeep.cli.common import resolve_options
    from extradeep.cli.model import check_analysis_options
    from extradeep.cli.outputs import check_outputs
    from extradeep.report import summary
    from extradeep.report.text import format_pct, format_value, render_table

    resolved = resolve_options(args)  # once per command (--eval-dir's folder has options of its own)
    check_analysis_options(args, resolved)
    check_outputs(args, {"--csv": args.csv})
    analysis, _, errors, _ = evaluation_from_args(args, required=True, resolved=resolved)
    params = analysis.params
    quantity = primary_quantity(analysis)
    main = errors[(errors["model_type"] == "application") & (errors["name"] == quantity)].sort_values(params)
    rows = [
        [
            format_point(r, params),
            r["role"],
            format_value(r["value"]),
            format_value(r["predicted"]),
            format_pct(r["error_pct"], 2),
            format_pct(r["spread_pct"], 2),
            "yes" if r["inside_interval"] else "no",
        ]
        for _, r in main.iterrows()
    ]
    held = sorted(errors.loc[errors["role"] == "evaluation", analysis.ranks_param].unique()) if len(errors) else []
    print(
        f"Models fitted again without the evaluation points ({analysis.ranks_param} = "
        f"{', '.join(f'{v:g}' for v in held)}), whatever models the input holds: the errors there are predictions"
    )
    print(summary.primary_line(analysis))
    print(
        f"{quantity_label(quantity, analysis.per)} per {analysis.per}: model accuracy (modeling points) and predictive power (evaluation points)"
    )
    print(
        render_table(
            ["configuration", "role", "measured", "model", "error", "repetition spread", "inside interval"],
            rows,
            "llrrrrl",
        )
    )
    app = errors[(errors["model_type"] == "application") & (errors["role"] == "evaluation")].sort_values(
        ["name", *params]
    )
    rows = [
        [
            quantity_label(r["name"], analysis.per),
            format_point(r, params),
            format_value(r["value"]),
            format_value(r["predicted"]),
            format_pct(r["error_pct"], 2),
            "yes" if r["inside_interval"] else "no",
        ]
        for _, r in app.iterrows()
    ]
    print(f"\nEvery application model at the evaluation points (per {analysis.per})")
    print(render_table(["quantity", "configuration", "measured", "model", "error", "inside interval"], rows, "llrrrl"))
    for by, title in (("category", "category"), ("kind", "region class")):
        summary = error_summary(errors[errors["model_type"] == "region"], params, by)
        summary = summary[summary["role"] == "evaluation"]
        rows = [
            [
                r[by],
                r["metric"],
                format_point(r, params),
                format_pct(r["mpe_pct"], 2),
                int(r["models"]),
                format_pct(r["inside_interval_pct"], 0),
            ]
            for _, r in summary.iterrows()
        ]
        print(f"\nMedian percentage error (MPE) at the evaluation points, per {title} and metric")
        print(render_table([title, "metric", "configuration", "MPE", "models", "inside interval"], rows, "lllrrr"))
    if args.csv:
        errors.to_csv(args.csv, index=False)
        print(f"extradeep: wrote {args.csv}", file=sys.stderr)
    return 0
