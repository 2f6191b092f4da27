"""The budgeting report as one library call: from an Analysis to a self-contained HTML file.

The CLI's `extradeep report` and the GUI's export both call :func:`build_report`, so they write the
same report from the same figures (:mod:`extradeep.report.plots`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from extradeep.analysis.bottlenecks import bottleneck_table
from extradeep.analysis.budget import BudgetLimits
from extradeep.analysis.core import Analysis, prediction_table, rebase
from extradeep.analysis.cost import CostSettings
from extradeep.analysis.workflows import DEFAULT_FACTORS, plan_budget, prediction_grid
from extradeep.errors import InputError
from extradeep.io.store import replaced_atomically
from extradeep.report.html import ReportInputs, build_html
from extradeep.report.plots import save_figure

PLOT_FORMATS = ("png", "svg", "pdf")
DEFAULT_TITLE = "Time and cost per epoch: budgeting report"


def build_report(
    analysis: Analysis,
    output=None,
    *,
    grid=None,
    cost: CostSettings | None = None,
    limits: BudgetLimits | None = None,
    candidates=None,
    max_ranks: float | None = None,
    fixed: dict | None = None,
    errors=None,
    evaluation_points=None,
    experiment=None,
    level: float = 0.95,
    title: str | None = None,
    plots_dir=None,
    plot_formats=("png", "svg"),
    plan=None,
    optimization=None,
) -> dict:
    """Write the budgeting report for `analysis` to `output` (an HTML path; None: only build it).

    `grid`: the prediction points (default: :func:`~extradeep.analysis.workflows.prediction_grid`,
    with `fixed` values of the other parameters); `cost`: how a configuration is priced; `limits`:
    deadline and/or budget, searched over `candidates` or multiples of the smallest measured ranks up
    to `max_ranks`, as `extradeep budget` does; `errors` and `evaluation_points`: a held-out
    evaluation (:func:`~extradeep.analysis.workflows.evaluate`); `experiment`: for the provenance
    table; `plan`: a ``MeasurementAdvisor.propose()`` table shown as "What to profile next";
    `optimization`: a fitted ``StrategySearch`` of one run, shown as "Optimisation".
    Returns {"html", "path", "figures" (name -> Figure), "saved" (figure files), "predictions",
    "budget" (the BudgetResult or None)}."""
    formats = [f.strip().lower() for f in plot_formats]
    unknown = sorted(set(formats) - set(PLOT_FORMATS))
    if unknown:
        raise InputError(
            None, f"unknown format(s) {', '.join(unknown)} ({', '.join(PLOT_FORMATS)})", field="plot_formats"
        )
    if analysis.application_models.empty:
        raise InputError(None, "the report needs profiles with step marks (a plain measurement table has no epochs)")
    # the budget is searched on the analysis as measured, exactly as `extradeep budget` does
    budget = (
        None
        if limits is None
        else plan_budget(
            analysis, limits, candidates=candidates, max_ranks=max_ranks, fixed=fixed, cost=cost, level=level
        )
    )
    if grid is None:
        analysis, grid = prediction_grid(analysis, default_predictions(analysis, max_ranks), fixed)
    else:  # rebase to the grid's values of the other parameters, so efficiency compares like with like
        analysis = rebase(analysis, {p: grid[p].iloc[0] for p in analysis.params if p != analysis.ranks_param})
    cost = replace(cost or CostSettings(), ranks_param=analysis.ranks_param)
    predictions = prediction_table(analysis, grid, cost, level)
    x_max = float(grid[analysis.ranks_param].max())
    if evaluation_points is not None and not evaluation_points.empty:
        x_max = max(x_max, float(evaluation_points[analysis.ranks_param].max()))
    inputs = ReportInputs(
        analysis=analysis,
        predictions=predictions,
        bottlenecks=bottleneck_table(analysis.region_models, grid.iloc[-1].to_dict(), analysis.params),
        cost=cost,
        x_max=x_max,
        level=level,
        provenance=None if experiment is None else experiment.provenance,
        budget=budget,
        errors=errors,
        evaluation_points=evaluation_points,
        title=title or DEFAULT_TITLE,
        plan=plan,
        optimization=optimization,
    )
    text = build_html(inputs)
    if output is not None:
        write_text_atomic(output, text)
    saved = (
        [p for name, fig in inputs.figures.items() for p in save_figure(fig, plots_dir, name, formats)]
        if plots_dir
        else []
    )
    return {
        "html": text,
        "path": None if output is None else Path(output),
        "figures": inputs.figures,
        "saved": saved,
        "predictions": predictions,
        "budget": budget,
    }


def default_predictions(analysis: Analysis, max_ranks: float | None) -> list[float] | None:
    """The default prediction points (None: 2x, 4x, 8x the largest measured), kept within the
    largest allocation the user allows, so the report predicts nothing the budget may not use."""
    if max_ranks is None:
        return None
    largest = float(analysis.points[analysis.ranks_param].max())
    values = [largest * f for f in DEFAULT_FACTORS if largest * f < max_ranks] + [float(max_ranks)]
    return sorted({v for v in values if v > largest}) or [float(max_ranks)]


def write_text_atomic(path, text: str) -> None:
    """Write `text` beside `path` and rename it into place, so a reader never sees half a file."""
    problem = "cannot write the report"
    try:
        with replaced_atomically(path, problem) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(path, f"{problem} ({exc.strerror})") from None
