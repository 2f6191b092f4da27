"""The text `extradeep evaluate` prints: the error of the time model at every point, of every
application model at the evaluation points, and the median errors per category and region class
(paper Table 2), from the errors of :func:`extradeep.workflows.evaluation_study`."""

from __future__ import annotations

from extradeep.analysis.core import primary_quantity
from extradeep.analysis.epoch import quantity_label
from extradeep.analysis.evaluation import error_summary
from extradeep.analysis.points import format_point
from extradeep.columns import METRIC, NAME, PREDICTED, ROLE, VALUE
from extradeep.report import summary as sections
from extradeep.report.text import format_pct, format_value, render_table


def evaluation_text(analysis, errors) -> str:
    """The evaluation report of `errors` (prediction_errors rows, roles modeling and evaluation)."""
    lines = []
    params = analysis.params
    quantity = primary_quantity(analysis)
    main = errors[(errors["model_type"] == "application") & (errors[NAME] == quantity)].sort_values(params)
    rows = evaluation_rows(main, params)
    held = sorted(errors.loc[errors[ROLE] == "evaluation", analysis.ranks_param].unique()) if len(errors) else []
    lines.append(
        f"Models fitted again without the evaluation points ({analysis.ranks_param} = "
        f"{', '.join(f'{v:g}' for v in held)}), whatever models the input holds: the errors there are predictions"
    )
    lines.append(sections.primary_line(analysis))
    lines.append(
        f"{quantity_label(quantity, analysis.per)} per {analysis.per}: model accuracy (modeling points) and predictive power (evaluation points)"
    )
    lines.append(
        render_table(
            EVALUATION_HEADERS,
            rows,
            "llrrrrl",
        )
    )
    app = errors[(errors["model_type"] == "application") & (errors[ROLE] == "evaluation")].sort_values([NAME, *params])
    rows = [
        [
            quantity_label(r[NAME], analysis.per),
            format_point(r, params),
            format_value(r[VALUE]),
            format_value(r[PREDICTED]),
            format_pct(r["error_pct"], 2),
            "yes" if r["inside_interval"] else "no",
        ]
        for _, r in app.iterrows()
    ]
    lines.append(f"\nEvery application model at the evaluation points (per {analysis.per})")
    lines.append(
        render_table(["quantity", "configuration", "measured", "model", "error", "inside interval"], rows, "llrrrl")
    )
    for by, title in (("category", "category"), ("kind", "region class")):
        summary = error_summary(errors[errors["model_type"] == "region"], params, by)
        summary = summary[summary[ROLE] == "evaluation"]
        rows = [
            [
                r[by],
                r[METRIC],
                format_point(r, params),
                format_pct(r["mpe_pct"], 2),
                int(r["models"]),
                format_pct(r["inside_interval_pct"], 0),
            ]
            for _, r in summary.iterrows()
        ]
        lines.append(f"\nMedian percentage error (MPE) at the evaluation points, per {title} and metric")
        lines.append(
            render_table([title, "metric", "configuration", "MPE", "models", "inside interval"], rows, "lllrrr")
        )
    return "\n".join(lines)


EVALUATION_HEADERS = ["configuration", "role", "measured", "model", "error", "repetition spread", "inside interval"]


def evaluation_rows(errors, params) -> list[list[str]]:
    """One table row per point of `errors` (prediction_errors rows of one quantity): the text and
    the HTML report show the same cells."""
    return [
        [
            format_point(r, params),
            r[ROLE],
            format_value(r[VALUE]),
            format_value(r[PREDICTED]),
            format_pct(r["error_pct"], 2),
            format_pct(r["spread_pct"], 2),
            "yes" if r["inside_interval"] else "no",
        ]
        for _, r in errors.iterrows()
    ]
