"""The text `extradeep budget` prints: the candidates, the valid intervals and the best configurations
of a budget search (:class:`extradeep.workflows.BudgetStudyResult`)."""

from __future__ import annotations

from extradeep.analysis.points import format_point, format_seconds
from extradeep.report import summary
from extradeep.report.text import format_interval, render_table

MAX_ROWS = 15  # more valid candidates than this are counted, not listed (unless every one is asked for)


def _cost_limit(max_cost: float, unit: str) -> str:
    """`cost <= 300 core-hours`, `cost <= 5 (EUR)`: the unit once, not `cost <= 5 cost (EUR)`."""
    return f"cost <= {max_cost:g} {unit.removeprefix('cost ')}"


def budget_text(analysis, result, level: float, show_all: bool = False) -> str:
    """The budget report of `result` (a BudgetResult of `analysis`); `show_all`: every candidate."""
    lines = []
    params, unit = analysis.params, result.cost_unit
    limits = result.limits
    asked = [
        f"time <= {format_seconds(limits.max_time)}" if limits.max_time else "",
        _cost_limit(limits.max_cost, unit) if limits.max_cost else "",
    ]
    lines.append(
        f"Limits for {limits.epochs:g} {analysis.per}(s): {' and '.join(a for a in asked if a)}; "
        f"{len(result.table)} candidates; {result.scaling} scaling"
    )
    lines.append(summary.primary_line(analysis))
    shown = result.table if show_all else result.table[result.table["valid"]]
    if len(shown) > MAX_ROWS and not show_all:
        lines.append(f"{len(shown)} valid candidates (--all lists every candidate)\n")
    elif not shown.empty:
        samples = "samples" in shown and "skipped_share" in shown
        rows = [
            [
                format_point(r, params),
                format_interval(r["T"], r["T_lo"], r["T_hi"]),
                format_seconds(r["total_time"]),
                f"{r['total_cost']:.4g}",
                f"{r['efficiency']:.2f}",
                "yes" if r["valid"] else "no",
                "yes" if r["valid_upper"] else "no",
            ]
            + ([f"{r['samples']:,.0f}", f"{r['skipped_share']:.1%}"] if samples else [])
            for _, r in shown.iterrows()
        ]
        lines.append(
            render_table(
                [
                    "configuration",
                    f"time/{analysis.per} [{level:.0%} interval]",
                    "total time",
                    f"total {unit}",
                    "efficiency",
                    "valid",
                    "valid at upper bound",
                ]
                + (["samples/epoch", "skipped"] if samples else []),
                rows,
            )
        )
        lines.append("")
    if result.failure:
        lines.append(f"No configuration meets the limits: {result.failure}.")
        return "\n".join(lines)
    spans = "; ".join(
        f"{r['from']:g}" if r["from"] == r["to"] else f"{r['from']:g} .. {r['to']:g}"
        for _, r in result.intervals.iterrows()
    )
    lines.append(f"Valid {analysis.ranks_param}: {spans}\n")
    best = best_rows(result.best, params)
    lines.append(
        render_table(
            ["best by", "configuration", "total time", f"total {unit}", "efficiency", "valid at upper bound"],
            best,
            "llrrrl",
        )
    )
    for note in result.notes:
        lines.append(f"\nNote: {note}")
    return "\n".join(lines)


def best_rows(best, params) -> list[list[str]]:
    """One row per best configuration (a BudgetResult's `best`): the text and the HTML report show
    the same cells."""
    return [
        [
            r["criterion"],
            format_point(r, params),
            format_seconds(r["total_time"]),
            f"{r['total_cost']:.4g}",
            f"{r['efficiency']:.2f}",
            "yes" if r["valid_upper"] else "no",
        ]
        for _, r in best.iterrows()
    ]
