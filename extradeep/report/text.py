"""Terminal tables for `extradeep model`, `budget` and `evaluate`: plain text an analyst can read."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from extradeep.analysis.points import format_point, format_seconds


def render_table(headers: list[str], rows: list[list], align: str | None = None, indent: str = "  ") -> str:
    """Columns padded to their widest cell; ``align`` is one "l"/"r" per column (default: first
    column left, the rest right). A cell with line breaks (a wrapped formula) makes its row taller;
    the other cells stand on the row's first line."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(part) for r in cells for part in r[i].split("\n")) for i in range(len(headers))]

    def lines(row):
        parts = [c.split("\n") for c in row]
        for k in range(max(len(p) for p in parts)):
            texts = [p[k] if k < len(p) else "" for p in parts]
            padded = [t.ljust(w) if a == "l" else t.rjust(w) for t, w, a in zip(texts, widths, align)]
            yield (indent + "  ".join(padded)).rstrip()

    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([*lines(cells[0]), rule, *(line for r in cells[1:] for line in lines(r))])


# a formula breaks only before a ' + ' or ' - ' term or after ', ': never inside a number or a name
_BREAKS = re.compile(r"(?= [+-] )|(?<=, )")


def wrap_formula(text: str, width: int = 80, indent: str = "    ") -> str:
    """`text` on lines of at most `width` characters where it can (a single term longer than that
    stays whole), broken at term boundaries; continuation lines are indented."""
    if len(text) <= width:
        return text
    lines, current = [], ""
    for piece in (p for p in _BREAKS.split(text) if p):
        if current.strip() and len(current) + len(piece.rstrip()) > width:
            lines.append(current.rstrip())
            current = indent + piece.lstrip()
        else:
            current += piece
    lines.append(current.rstrip())
    return "\n".join(lines)


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


def points_text(points: pd.DataFrame, params: list[str], listed: int = 6) -> str:
    """``ranks = 2, 4, 6`` for one parameter; every point for a few of several parameters; each
    parameter's values for more (``x = 20, 30, 40; y = 1, 2`` rather than 6 listed points)."""
    if len(params) == 1:
        values = ", ".join(format_point(r, params).split("=", 1)[1] for _, r in points.iterrows())
        return f"{params[0]} = {values}"
    if len(points) <= listed:
        return "; ".join(format_point(r, params) for _, r in points.iterrows())
    return "; ".join(
        f"{p} = " + ", ".join(format_point({p: v}, [p]).split("=", 1)[1] for v in sorted(points[p].unique()))
        for p in params
    )


def shorten(text: str, width: int) -> str:
    """Cut long kernel names in the middle so both ends stay recognisable."""
    if len(text) <= width:
        return text
    keep = width - 3
    return text[: keep - keep // 3] + "..." + text[len(text) - keep // 3 :]
