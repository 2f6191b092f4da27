"""`extradeep model`: performance models of time per epoch, its breakdown and every region."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from extradeep.cli.common import add_reading_arguments
from extradeep.errors import InputError

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


def modeler_options(args, resolved=None) -> dict:
    """The modeler options the command line (or --config) gives; those it leaves out come from the
    experiment (a saved file's own, :func:`extradeep.analysis.saved.effective_options`). `resolved`:
    the command's options (:func:`extradeep.cli.common.resolve_options`), for --min-points."""
    options = {}
    if resolved is not None and resolved.given("min_points"):
        options["min_points"] = int(resolved.min_points)
    for flag in ("exponents_i", "exponents_j"):
        text = getattr(args, flag, None)
        if text:
            options[flag] = _exponents(text, "--" + flag.replace("_", "-"))
    if getattr(args, "terms", None) is not None:
        options["n_terms"] = args.terms
    if getattr(args, "nonnegative", None):
        options["nonnegative"] = True
    return options


def _exponents(text: str, option: str) -> tuple[str, ...]:
    """The parts of an exponent list, each checked to be a non-negative number or fraction."""
    from extradeep.modeling.terms import as_fraction

    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    for part in parts:
        try:
            value = as_fraction(part)
        except (ValueError, ZeroDivisionError):
            raise InputError(option, f"{part!r} is not a number or fraction like 1/2") from None
        if value < 0:
            raise InputError(option, f"{part!r} is negative; exponents must be >= 0")
    return parts


def cost_settings(args):
    """CostSettings from the options; a bad price or formula fails here, before any reading."""
    from extradeep.analysis.cost import CostSettings

    if args.cost_formula is not None:
        _check_formula(args.cost_formula, _given_params(args))
    return CostSettings(
        cores_per_rank=args.cores_per_rank,
        gpus_per_rank=args.gpus_per_rank,
        gpus_per_node=args.gpus_per_node,
        price_per_core_hour=args.price_per_core_hour,
        price_per_gpu_hour=args.price_per_gpu_hour,
        formula=args.cost_formula,
        currency=args.currency,
    )


def _given_params(args) -> list[str] | None:
    """The modeled parameters named by --param (aliases applied), or None when not given."""
    from extradeep.io.discover import parse_aliases

    if not getattr(args, "param", None):
        return None
    aliases = parse_aliases(getattr(args, "alias", None) or [])
    return [aliases.get(p, p) for p in args.param]


def _check_formula(text: str, params: list[str] | None) -> None:
    """Parse the cost formula (known variables when --param says which) and try it on typical
    values, so `T/0` fails before any reading rather than after it."""
    from extradeep.analysis.cost import cost_variables
    from extradeep.analysis.expression import parse_expression

    try:
        expr = parse_expression(text, None if params is None else cost_variables(params))
    except InputError as exc:  # the parser says "formula"; the user gave --cost-formula
        raise InputError("--cost-formula", exc.problem) from None
    if not set(expr.variables) <= cost_variables(params or []):
        return  # a name that may be a parameter of the inputs: checked (and named if unknown) once they are read
    values = {name: 3600.0 if name == "T" else 5.5 for name in expr.variables}
    result = expr(**values)
    if (result < 0).any():
        raise InputError("--cost-formula", f"{text!r} gives a negative cost")


def check_analysis_options(args, resolved) -> None:
    """Validate the values of the analysis options before anything is read (one line each);
    `resolved`: the command's reading options, already checked (--jobs and --min-points may come
    from --config)."""
    from extradeep.analysis.points import parse_values

    if not 0 < args.level < 1:
        raise InputError("--level", f"must be between 0 and 1, got {args.level}")
    for option in ("top", "jobs", "min_points", "terms"):
        value = getattr(resolved, option) if option in ("jobs", "min_points") else getattr(args, option, None)
        least = {"top": 0, "min_points": 2}.get(option, 1)  # a model needs two points at least
        if value is not None and value < least:
            raise InputError(f"--{option.replace('_', '-')}", f"must be at least {least}, got {value}")
    for option in ("predict", "candidates"):  # values of the ranks parameter: whole rank counts
        text = getattr(args, option, None)
        if text:
            whole_values(parse_values(text, f"--{option}"), f"--{option}")
    fixed_values(args, None)
    modeler_options(args, resolved)
    cost_settings(args)


def whole_values(values: list[float], option: str) -> list[float]:
    """``values`` of the ranks parameter, refused in one line unless they are whole rank counts."""
    bad = [v for v in values if v % 1]
    if bad:
        raise InputError(option, f"{bad[0]:g} is not a whole number: it counts ranks (processes)")
    return values


def fixed_values(args, analysis) -> dict[str, float]:
    """--at as {param: value}; checked against the modeled parameters (of ``analysis``, else of
    --param when given) and refused for the ranks parameter, which --predict varies."""
    from extradeep.analysis.core import ranks_parameter
    from extradeep.analysis.points import parse_fixed

    params = analysis.params if analysis is not None else _given_params(args)
    if params is None:  # before reading and without --param: check the syntax only
        return parse_fixed(args.at, [item.partition("=")[0].strip() for item in args.at or []])
    fixed = parse_fixed(args.at, params)
    ranks = analysis.ranks_param if analysis is not None else ranks_parameter(params, args.ranks_param)
    if ranks in fixed:
        raise InputError("--at", f"{ranks} is the parameter predictions vary; give its values with --predict")
    return fixed


def progress_line(message: str) -> None:
    print(f"extradeep: {message} ...", file=sys.stderr, flush=True)


def is_extrap_text(profiles: list[str]) -> bool:
    """One plain-text file (not SQLite, not a Kineto trace) among PROFILES: an Extra-P text input. A
    profile's name (.sqlite, .json[.gz]) goes to its reader, which says when the content is wrong."""
    from extradeep.io.formats import GZIP_MAGIC, SQLITE_MAGIC, format_by_name

    if len(profiles) != 1 or not Path(profiles[0]).is_file() or format_by_name(profiles[0]) is not None:
        return False
    try:
        with open(profiles[0], "rb") as handle:
            head = handle.read(64)
    except OSError:
        return False  # the profile reader says, in one line, that it cannot be read
    return not head.startswith((SQLITE_MAGIC, GZIP_MAGIC)) and head.lstrip()[:1] not in (b"{", b"[")


def analysis_from_args(args, resolved=None):
    """(Analysis, Experiment or None) from PROFILES and the options; progress on stderr. `resolved`:
    the command's options (resolved here when not given)."""
    from extradeep.analysis.core import analyse, analyse_table
    from extradeep.cli.common import experiment_from_args, resolve_options

    resolved = resolve_options(args) if resolved is None else resolved
    if is_extrap_text(args.profiles or []):
        from extradeep.modeling import read_extrap_text
        from extradeep.modeling.extrap_text import text_model_options

        table = read_extrap_text(args.profiles[0])
        options = text_model_options(modeler_options(args, resolved), table)
        return analyse_table(table, table.attrs["params"], options, args.scaling, args.ranks_param), None
    experiment = experiment_from_args(args, options=resolved)
    analysis = analyse(
        experiment,
        options=modeler_options(args, resolved),
        scaling=args.scaling,
        ranks_param=args.ranks_param,
        progress=progress_line,
        refit=args.refit,
    )
    return analysis, experiment


def prediction_grid(args, analysis):
    """(analysis rebased to the other parameters' values, grid): --predict along the ranks
    parameter (default 2x, 4x, 8x the largest measured), others from --at or the baseline."""
    from extradeep.analysis.points import parse_values
    from extradeep.analysis.workflows import prediction_grid as grid_of

    values = parse_values(args.predict, "--predict") if args.predict else None
    return grid_of(analysis, values, fixed_values(args, analysis))


def run(args) -> int:
    from extradeep.analysis.bottlenecks import bottleneck_table
    from extradeep.analysis.core import derived_models, extrapolation_notes, prediction_table, region_scaling
    from extradeep.cli.common import resolve_options
    from extradeep.cli.outputs import check_outputs
    from extradeep.report import summary

    resolved = resolve_options(args)  # once per command: every later step takes this value
    check_analysis_options(args, resolved)
    check_outputs(args, {"--json": args.json}, save=args.save)
    cost = cost_settings(args)
    if args.save and is_extrap_text(args.profiles or []):
        raise InputError("--save", "only experiments read from exports can be saved")
    analysis, experiment = analysis_from_args(args, resolved)
    if analysis.application_models.empty:
        print(summary.header(analysis))
        print(summary.region_section(analysis.region_models, args.top))
        print(summary.notes_section(cli_notes(analysis.notes)))
        _write_outputs(args, analysis, experiment, None, None, None, None, None)
        return 0
    analysis, grid = prediction_grid(args, analysis)
    predictions = prediction_table(analysis, grid, cost, args.level)
    target = grid.iloc[-1].to_dict()
    bottlenecks = bottleneck_table(analysis.region_models, target, analysis.params)
    derived = derived_models(analysis)
    n_exports = len(experiment.provenance) if experiment is not None else None
    parts = [
        summary.header(analysis, n_exports) + scaling_note(analysis) + summary.primary_line(analysis),
        summary.application_section(analysis),
        summary.measured_section(analysis, args.level),
        summary.prediction_section(analysis, predictions, args.level, cost.unit),
        summary.derived_section(analysis, derived),
        summary.bottleneck_section(bottlenecks.head(args.top), target, analysis.params, analysis.per),
        summary.notes_section(cli_notes(analysis.notes + extrapolation_notes(analysis, grid))),
    ]
    print("\n".join(p for p in parts if p))
    regions = region_scaling(analysis, grid, args.level) if args.json else None
    _write_outputs(args, analysis, experiment, predictions, bottlenecks, cost, derived, regions)
    return 0


def cli_notes(notes: list[str]) -> list[str]:
    """The analysis notes, with the flags that act on them where the library names no flag."""
    from extradeep.aggregate.experiment import NEED_DATASET

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


def _write_outputs(args, analysis, experiment, predictions, bottlenecks, cost, derived, regions) -> None:
    from extradeep.analysis.saved import models_tables
    from extradeep.report.jsonout import write_json

    if args.json:
        write_json(args.json, analysis, predictions, bottlenecks, cost, args.level, derived, regions)
        print(f"extradeep: wrote {args.json}", file=sys.stderr)
    if args.save:
        if experiment is None:
            raise InputError("--save", "only experiments read from profiles can be saved")
        # one atomic write (extradeep.io.store): the experiment and its models appear together or not at all
        experiment.save(args.save, extra_tables=models_tables(analysis))
        print(f"extradeep: saved the experiment and models to {args.save}", file=sys.stderr)
