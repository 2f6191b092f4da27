"""Terminal tables for `extradeep model`, `budget` and `evaluate`: plain text an analyst can read."""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.analysis.points import format_point, format_seconds


def render_table(headers: list[str], rows: list[list], align: str | None = None, indent: str = "  ") -> str:
    """Columns padded to their widest cell; ``align`` is one "l"/"r" per column (default: first
    column left, the rest right)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row):
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)]
        return (indent + "  ".join(parts)).rstrip()

    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def format_value(value: float, metric: str = "time") -> str:
    """A measured or predicted value in its unit: durations, counts or bytes."""
    if value is None or not np.isfinite(value):
        return "n/a"
    if metric == "time":
        return format_seconds(value)
    if metric == "bytes":
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(value) >= size:
                return f"{value / size:.3g} {unit}"
        return f"{value:.0f} B"
    return f"{value:.4g}"


def format_interval(value: float, lo: float, hi: float, metric: str = "time") -> str:
    return f"{format_value(value, metric)} [{format_value(lo, metric)}, {format_value(hi, metric)}]"


def format_pct(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}%"


def section(title: str, body: str) -> str:
    return f"{title}\n{body}\n"


def points_text(points: pd.DataFrame, params: list[str]) -> str:
    """``ranks = 2, 4, 6`` for one parameter; ``5 points`` listing for several."""
    if len(params) == 1:
        values = ", ".join(format_point(r, params).split("=")[1] for _, r in points.iterrows())
        return f"{params[0]} = {values}"
    return "; ".join(format_point(r, params) for _, r in points.iterrows())


def shorten(text: str, width: int) -> str:
    """Cut long kernel names in the middle so both ends stay recognisable."""
    if len(text) <= width:
        return text
    keep = width - 3
    return text[: keep - keep // 3] + "..." + text[len(text) - keep // 3 :]
