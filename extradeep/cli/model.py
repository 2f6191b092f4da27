"""`extradeep model`: performance models of time per epoch, its breakdown and every region."""

from __future__ import annotations

import argparse
import sys

from extradeep.cli.common import add_reading_arguments

HELP = "model time per epoch, its breakdown and every kernel from profiles (Q1-Q4)"
DESCRIPTION = """Model how training scales, from Nsight Systems exports of a few small runs.

Prints the time-per-epoch model (from the measured NVTX step time) with prediction intervals, the
computation/communication/memory/idle breakdown, predictions with speedup, efficiency and cost,
and the regions whose time grows fastest.

examples:
  extradeep model sample_profiles/ --param ranks
  extradeep model runs/ --param ranks --train-samples 50000 --val-samples 10000 --batch-size 64 \\
      --predict 16,32,64 --price-per-gpu-hour 2.5 --json models.json --save exp.sqlite
  extradeep model measurements.txt          # an Extra-P text file

"""
CONFIG_NOTE = """
settings: when PROFILES is one folder and --config is not given, the folder's extradeep.toml is
read; like --config it may set PROFILES and the reading and dataset options (for example
train-samples = 50000, val-samples = 10000, batch-size = 64); options given here win.
"""
DESCRIPTION += CONFIG_NOTE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_reading_arguments(parser)
    add_analysis_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument(
        "--top", type=int, default=10, metavar="N", help="regions shown in the bottleneck table (default 10)"
    )
    out.add_argument("--json", metavar="FILE", help="write every model and value as JSON (schema: docs/json-schema.md)")
    out.add_argument("--save", metavar="FILE", help="save the experiment and its models as one SQLite file")


def add_analysis_arguments(parser: argparse.ArgumentParser) -> None:
    """Modeler, prediction, scaling and cost options shared by model, budget, evaluate and report."""
    mod = parser.add_argument_group("modeler")
    mod.add_argument(
        "--exponents-i", metavar="LIST", help="polynomial exponents, e.g. 0,1/2,1,3/2,2 (default: Extra-P's set)"
    )
    mod.add_argument("--exponents-j", metavar="LIST", help="logarithm exponents, e.g. 0,1,2 (default 0,1,2)")
    mod.add_argument("--terms", type=int, metavar="N", help="terms per parameter besides the constant (1-3, default 1)")
    mod.add_argument("--nonnegative", action="store_true", default=None, help="only non-negative coefficients")
    mod.add_argument(
        "--refit",
        action="store_true",
        help="fit the models again even where a saved experiment has them and was fitted the same way "
        "(evaluate always fits them again, without its evaluation points)",
    )
    ana = parser.add_argument_group("analysis")
    ana.add_argument(
        "--predict",
        metavar="LIST",
        help="predict at these values of the ranks parameter: 16,32,64 or 8:64:8 (default: 2x, 4x, 8x the largest measured)",
    )
    ana.add_argument(
        "--at",
        action="append",
        metavar="PARAM=VALUE",
        help="value of another parameter for predictions (repeatable; default: the baseline's)",
    )
    ana.add_argument(
        "--scaling",
        choices=("strong", "weak"),
        help="how efficiency is defined (default: weak with --weak-scaling, else strong)",
    )
    ana.add_argument(
        "--ranks-param", metavar="NAME", help="the parameter that counts ranks (default: ranks, else the first)"
    )
    ana.add_argument("--level", type=float, default=0.95, metavar="P", help="prediction interval level (default 0.95)")
    cost = parser.add_argument_group("cost (paper Eq. 14)")
    cost.add_argument("--cores-per-rank", type=float, default=1.0, metavar="N", help="CPU cores per rank (default 1)")
    cost.add_argument("--gpus-per-rank", type=float, default=1.0, metavar="N", help="GPUs per rank (default 1)")
    cost.add_argument(
        "--gpus-per-node", type=float, metavar="N", help="GPUs per node (needed for `nodes` in --cost-formula)"
    )
    cost.add_argument("--price-per-core-hour", type=float, metavar="X", help="price of one core-hour")
    cost.add_argument("--price-per-gpu-hour", type=float, metavar="X", help="price of one GPU-hour")
    cost.add_argument(
        "--currency",
        metavar="NAME",
        help="what the prices are in, for labels: EUR, USD, credits (default: currency units)",
    )
    cost.add_argument(
        "--cost-formula",
        metavar="EXPR",
        help="custom cost, e.g. 'T/3600 * nodes * 12.5' (T in seconds; "
        "variables: T, ranks, gpus, nodes, every parameter; + - * / ** min max ceil floor)",
    )


def options_from_args(args, resolved, kind):
    """The command's options value (`kind`, an :class:`extradeep.workflows.AnalysisOptions`) from the
    parsed flags and the resolved reading options: only what was given, so the library's defaults
    hold for the rest. Building it checks every value (an error names the field; its flag is shown)."""
    import dataclasses

    names = [f.name for f in dataclasses.fields(kind) if f.init and f.name not in ("reading", "config")]
    given = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    return kind(reading=resolved, config=getattr(args, "config", None), **given)


def run(args) -> int:
    from extradeep.cli.common import load_problems_shown, problems_on_stderr, progress_line, resolve_options
    from extradeep.workflows import ModelOptions, model_study

    options = options_from_args(args, resolve_options(args), ModelOptions)  # resolved once per command
    with load_problems_shown():
        result = model_study(options, progress=progress_line, on_read=problems_on_stderr)
    print(model_text(result))
    print_written(result.written)
    return 0


def model_text(result) -> str:
    """What `extradeep model` prints: the sections of :mod:`extradeep.report.summary` of the result."""
    from extradeep.report import summary

    analysis, options = result.analysis, result.options
    notes = summary.notes_section(cli_notes(result.notes))
    if result.predictions is None:
        return "\n".join([summary.header(analysis), summary.region_section(analysis.region_models, options.top), notes])
    n_exports = len(result.experiment.provenance) if result.experiment is not None else None
    parts = [
        summary.header(analysis, n_exports) + scaling_note(analysis) + summary.primary_line(analysis),
        summary.application_section(analysis),
        summary.measured_section(analysis, options.level),
        summary.prediction_section(analysis, result.predictions, options.level, options.cost.unit),
        summary.derived_section(analysis, result.derived),
        summary.bottleneck_section(result.bottlenecks.head(options.top), result.target, analysis.params, analysis.per),
        notes,
    ]
    return "\n".join(p for p in parts if p)


def print_written(written) -> None:
    """One line on stderr per output the workflow wrote."""
    for kind, path in written:
        line = f"saved the experiment and models to {path}" if kind == "save" else f"wrote {path}"
        print(f"extradeep: {line}", file=sys.stderr)


def cli_notes(notes: list[str]) -> list[str]:
    """The analysis notes, with the flags that act on them where the library names no flag."""
    from extradeep.workflows.model import NEED_DATASET

    return [f"{n}: give --train-samples, --val-samples and --batch-size" if n == NEED_DATASET else n for n in notes]


def scaling_note(analysis) -> str:
    """What speedup and efficiency mean when the values are per step under weak scaling (each rank
    does the same work per step, so the step time itself is the weak-scaling measure)."""
    if analysis.per != "step" or analysis.scaling != "weak":
        return ""
    ranks = analysis.ranks_param
    return (
        f"per-step values, weak-scaling definitions: efficiency = T(baseline)/T; speedup = efficiency x "
        f"{ranks}/{ranks}(baseline) (scaled speedup: the work grows with {ranks})\n"
    )
