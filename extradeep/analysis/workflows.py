"""Workflows that answer one user question each, from an Analysis: where to predict, which
configurations fit a budget, how good the models are on held-out points.

The CLI parses options into these arguments and prints the results; the GUI and notebooks call
them directly. Nothing here reads options or prints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from extradeep.analysis.budget import BudgetLimits, BudgetResult, budget_search
from extradeep.analysis.core import (
    Analysis,
    analyse,
    measured_points,
    primary_quantity,
    rebase,
    require_parameters,
    subset_experiment,
)
from extradeep.analysis.cost import CostSettings
from extradeep.analysis.evaluation import prediction_errors
from extradeep.analysis.points import MAX_POINTS, point_grid, value_range
from extradeep.analysis.saved import effective_options, saved_choices
from extradeep.analysis.scales import check_whole, supported_points
from extradeep.columns import RANKS
from extradeep.errors import InputError

DEFAULT_FACTORS = (2, 4, 8)  # default predictions: these multiples of the largest measured ranks
BUDGET_REACH = 8  # default budget candidates reach this multiple of the largest measured ranks


def prediction_grid(
    analysis: Analysis, values=None, fixed: dict | None = None, *, field: str = "predict", strict: bool | None = None
) -> tuple[Analysis, pd.DataFrame]:
    """The points to predict at: `values` of the ranks parameter (default: 2x, 4x, 8x the largest
    measured), the other parameters at `fixed` or the baseline. Returns the analysis rebased to the
    same other parameters (so efficiency compares like with like) and the grid.

    Rank counts must be positive whole numbers and points must lie within the range the models
    support (:mod:`extradeep.analysis.scales`): asked-for points (``strict``, default: `values` given)
    beyond it are refused in one line naming ``field``; default points beyond it are left out, noted."""
    ranks = analysis.ranks_param
    strict = values is not None if strict is None else strict
    if values is None:
        largest = float(analysis.points[ranks].max())
        values = [largest * f for f in DEFAULT_FACTORS]
    check_whole(analysis, pd.DataFrame([fixed or {}]), "at")
    fixed = {**analysis.baseline, **(fixed or {})}
    grid, notes = supported_points(analysis, point_grid(list(values), analysis.params, ranks, fixed), field, strict)
    if grid.empty:
        raise InputError(None, field=field, problem=f"none of its points is within what the models support: {notes[0]}")
    analysis = rebase(analysis, fixed)
    return (replace(analysis, notes=[*analysis.notes, *notes]) if notes else analysis), grid


def budget_candidates(analysis: Analysis, candidates=None, max_ranks: float | None = None) -> list[float]:
    """The values of the ranks parameter a budget search considers: `candidates` when given, else
    multiples of the smallest measured value up to `max_ranks` (default: BUDGET_REACH x the largest)."""
    if candidates is not None:
        return list(candidates)
    ranks = analysis.ranks_param
    smallest = float(analysis.points[ranks].min())
    top = max_ranks if max_ranks is not None else float(analysis.points[ranks].max()) * BUDGET_REACH
    if top < smallest:
        raise InputError(None, f"{top:g} is below the smallest measured {ranks} ({smallest:g})", field="max_ranks")
    if top / smallest > MAX_POINTS:
        raise InputError(
            None,
            f"{top:g} asks for {top / smallest:.3g} candidates (multiples of {smallest:g}); the limit is {MAX_POINTS}",
            field="max_ranks",
        )
    return value_range(smallest, top, smallest)


def plan_budget(
    analysis: Analysis,
    limits: BudgetLimits,
    *,
    candidates=None,
    max_ranks: float | None = None,
    fixed: dict | None = None,
    cost: CostSettings | None = None,
    level: float = 0.95,
) -> BudgetResult:
    """Which configurations meet `limits`, and the best by efficiency, cost and time (paper Q5)."""
    values = budget_candidates(analysis, candidates, max_ranks)
    field = "candidates" if candidates is not None else "max_ranks"
    analysis, grid = prediction_grid(
        analysis, values, fixed, field=field, strict=candidates is not None or max_ranks is not None
    )
    cost = replace(cost or CostSettings(), ranks_param=analysis.ranks_param)
    model = analysis.model(primary_quantity(analysis))
    return budget_search(model, grid, analysis.params, limits, cost, analysis.baseline, analysis.scaling, level)


@dataclass
class Evaluation:
    """Models fitted without the held-out configurations, and every model's error at every point."""

    analysis: Analysis
    errors: pd.DataFrame  # prediction_errors rows, role "modeling" or "evaluation"
    evaluation_points: pd.DataFrame  # the measured application quantities at the held-out points


def evaluate(
    experiment,
    *,
    eval_points=None,
    eval_experiment=None,
    options: dict | None = None,
    scaling: str | None = None,
    ranks_param: str | None = None,
    level: float = 0.95,
    progress=None,
) -> Evaluation:
    """Hold out the measured `eval_points` (values of the ranks parameter) of `experiment`, or use
    the separate `eval_experiment`, fit on the rest, and compare every model with the held-out
    measurements (paper section 4: accuracy and predictive power)."""
    if (eval_points is None) == (eval_experiment is None):
        raise InputError("eval_points", "give held-out points or a separate evaluation experiment (one of them)")
    # the experiment's own options (a saved file's) hold for the refit, though its saved models do not
    options = effective_options(experiment, options)
    chosen = saved_choices(experiment, experiment.dataset, list(experiment.params))
    scaling, ranks_param = scaling or chosen.get("scaling"), ranks_param or chosen.get("ranks_param")
    if eval_experiment is not None:
        modeling, held = replace(experiment, saved_models=None), eval_experiment
    else:
        modeling, held = split_held_out(experiment, eval_points, ranks_param)
    # always fitted again without the held-out points: models saved with the experiment saw them
    analysis = analyse(
        modeling, options=options, scaling=scaling, ranks_param=ranks_param, progress=progress, refit=True
    )
    app_points, region_points = measured_points(held, analysis.dataset)
    errors = [
        prediction_errors(analysis, analysis.application_points, analysis.region_points, "modeling", level),
        prediction_errors(analysis, app_points, region_points, "evaluation", level),
    ]
    return Evaluation(analysis, pd.concat(errors, ignore_index=True), app_points)


def split_held_out(experiment, values, ranks_param: str | None = None):
    """(modeling, held-out) experiments: the configurations whose ranks parameter is in `values`
    are held out; refused when one was not measured or nothing would be left to model."""
    require_parameters(experiment)  # one configuration: nothing to hold out, and the line says what helps
    ranks = ranks_param or (RANKS if RANKS in experiment.params else experiment.params[0])
    points = experiment.points[experiment.params].drop_duplicates()
    measured = points[ranks].astype(float)
    missing = [v for v in values if not (measured == v).any()]
    if missing:
        raise InputError(
            "eval_points",
            f"{', '.join(f'{v:g}' for v in missing)} not measured "
            f"(measured {ranks}: {', '.join(f'{v:g}' for v in sorted(points[ranks].unique()))})",
        )
    held = measured.isin(values)
    return subset_experiment(experiment, points[~held]), subset_experiment(experiment, points[held])
