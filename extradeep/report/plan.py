"""The measurement plan next to the model it would improve: terminal text and an HTML report section."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from extradeep.columns import GPU_HOURS
from extradeep.report.text import format_pct, format_value, render_table

HEADERS = ["ranks", "reps", "from rep", "nodes", "what", "GPU-hours", "cost", "interval at targets", "shrink"]


def _rows(plan: pd.DataFrame) -> list[list[str]]:
    rows = []
    for r in plan.itertuples(index=False):
        interval = (
            f"+-{r.interval_before_pct:.1f}% -> +-{r.interval_after_pct:.1f}%"
            if np.isfinite(r.interval_after_pct)
            else "no model yet"
        )
        nodes = "" if not np.isfinite(r.nodes) else f"{int(r.nodes)}"
        rows.append(
            [
                str(int(r.ranks)),
                str(int(r.reps)),
                str(int(r.first_rep)),
                nodes,
                r.action,
                f"{r.gpu_hours:.3g}",
                f"{r.cost:.3g}",
                interval,
                format_pct(r.shrink_pct),
            ]
        )
    return rows


def _current_lines(current: pd.DataFrame, quantity: str, level: float) -> list[str]:
    lines = []
    for r in current.itertuples(index=False):
        if np.isfinite(r.predicted):
            lines.append(
                f"{quantity} at {int(r.ranks)} ranks: {format_value(r.predicted)} "
                f"[{format_value(max(r.lo, 0.0))}, {format_value(r.hi)}] "
                f"({level:.0%} interval +-{r.interval_pct:.1f}%)"
            )
    return lines


def plan_text(plan: pd.DataFrame, current: pd.DataFrame) -> str:
    """The plan as a terminal table, with the current interval at the targets and the notes."""
    attrs = plan.attrs
    quantity, level = attrs.get("quantity", "time"), attrs.get("level", 0.95)
    lines = _current_lines(current, quantity, level)
    if attrs.get("model"):
        lines.append(f"model: {attrs['model']}")
    if plan.empty:
        lines.append("nothing to propose (the budget is spent or every candidate is measured)")
    else:
        total = plan[GPU_HOURS].sum()
        unit = attrs.get("cost_unit", "core-hours")
        lines += [
            f"proposed runs ({int(plan['reps'].sum())} runs, {total:.3g} GPU-hours, cost in {unit}):",
            render_table(HEADERS, _rows(plan), align="rrrrlrrrr"),
        ]
        reasons = list(dict.fromkeys(plan["reason"]))
        lines += [f"  why: {reason}" for reason in reasons]
    lines += [f"note: {note}" for note in attrs.get("notes", [])]
    return "\n".join(lines)


def plan_section(
    plan: pd.DataFrame | None, current: pd.DataFrame | None = None, model_formula: str | None = None
) -> str:
    """HTML section "What to profile next": the model and its interval at the targets, then the plan
    (``MeasurementAdvisor.propose()``, whose attrs carry the current interval and the formula).

    Self-contained (its own table markup) so report assembly only has to append it; empty string
    without a plan.
    """
    if plan is None:
        return ""
    attrs = plan.attrs
    current = attrs.get("current") if current is None else current
    model_formula = model_formula or attrs.get("formula")
    quantity, level = attrs.get("quantity", "time"), attrs.get("level", 0.95)
    parts = ["<h2>What to profile next</h2>"]
    if model_formula:
        parts.append(f"<p>Model of the {html.escape(quantity)}: <code>{html.escape(model_formula)}</code></p>")
    if attrs.get("model"):
        parts.append(f"<p>{html.escape(attrs['model'])}</p>")
    if current is not None:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in _current_lines(current, quantity, level))
        parts.append(f"<ul>{items}</ul>" if items else "")
    if plan.empty:
        parts.append("<p>Nothing to propose: the budget is spent or every candidate is measured.</p>")
    else:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="num">{html.escape(c)}</td>' if i != 4 else f"<td>{html.escape(c)}</td>"
                for i, c in enumerate(row)
            )
            + "</tr>"
            for row in _rows(plan)
        )
        parts.append(f"<table><tr>{head}</tr>{body}</table>")
        parts.append("<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in dict.fromkeys(plan["reason"])) + "</ul>")
        parts.append(
            f"<p>Each run is costed at its ranks x the length of one profiled run; cost in "
            f"{html.escape(str(attrs.get('cost_unit', 'core-hours')))}. The shrink is the expected "
            f"narrowing of the {level:.0%} interval at the targets "
            f"({', '.join(map(str, attrs.get('targets', [])))} ranks). "
            "Run these with <code>extradeep profile-cmd --plan FILE</code>.</p>"
        )
    parts += [f'<p class="note">{html.escape(note)}</p>' for note in attrs.get("notes", [])]
    return "".join(parts)
