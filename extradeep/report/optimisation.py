"""The report's "Optimisation" section: the strategy search of one run (`StrategySearch`), as
before/after critical-path bars and the table of strategies with the setting to change.

`optimisation_section(search)` is the section the budgeting report adds when a run is given;
`write_optimisation_page(search, path)` writes it as a page of its own. `critical_path_bars(ax,
breakdowns)` is the panel (the GUI's predictor tab draws it too).
"""

from __future__ import annotations

import base64
import html

import pandas as pd
from matplotlib.figure import Figure

from extradeep import columns as C

CLASS_COLOURS = {
    "compute": "#4c72b0",
    "communication": "#dd8452",
    "memory": "#55a868",
    "cpu_overhead": "#c44e52",
    "idle": "#b0b0b0",
}
SHOWN = 6  # strategies drawn beside the measured run


def critical_path_bars(ax, breakdowns: pd.DataFrame, top: int = SHOWN) -> None:
    """Stacked horizontal bars: seconds per class on the critical path (median step), the measured
    run first, then the strategies in the order given."""
    frame = breakdowns.head(top + 1).iloc[::-1]
    left = pd.Series(0.0, index=frame.index)
    for cls, colour in CLASS_COLOURS.items():
        if cls not in frame:
            continue
        ms = frame[cls].clip(lower=0.0) * 1e3
        ax.barh(range(len(frame)), ms, left=left, color=colour, label=cls.replace("_", " "))
        left += ms
    ax.set_yticks(range(len(frame)))
    ax.set_yticklabels([_short(s) for s in frame[C.STRATEGY]], fontsize=8)
    ax.set_xlabel("critical path of the median step (ms)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_title("Critical path before and after each strategy", fontsize=10)


def _short(text: str, width: int = 38) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def figure(search) -> Figure:
    fig = Figure(figsize=(8, 0.5 + 0.45 * min(len(search.breakdowns_), SHOWN + 1)), layout="constrained")
    critical_path_bars(fig.add_subplot(), ordered_breakdowns(search))
    return fig


def ordered_breakdowns(search) -> pd.DataFrame:
    """Breakdowns in the order of the strategy table (measured first)."""
    b = search.breakdowns_
    order = ["measured", *search.strategies_[C.STRATEGY].tolist()]
    rank = {s: i for i, s in enumerate(order)}
    return b.assign(_r=b[C.STRATEGY].map(rank).fillna(len(order))).sort_values("_r").drop(columns="_r")


def optimisation_section(search) -> str:
    """<h2>Optimisation</h2>: verdict, bars, strategies table and notes."""
    from extradeep.report.plots import figure_bytes

    table = search.strategies_
    parts = [
        "<h2>Optimisation: what to change</h2>",
        f"<p>Strategy search on the replay of one run (measured step {search.measured_step_:.4g} s, median "
        "of the slowest rank over the steady training steps). Each strategy is replayed on the run's "
        "dependency graph; its interval covers the collective model's spread and the replay's error.</p>",
        f"<p><b>{html.escape(search.verdict_)}</b></p>",
    ]
    if len(search.breakdowns_) > 1:
        data = base64.b64encode(figure_bytes(figure(search), "png")).decode("ascii")
        parts.append(f'<p><img alt="critical path before and after" src="data:image/png;base64,{data}"></p>')
    if len(table):
        parts.append(_strategy_table(table))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in search.notes_)
    if notes:
        parts.append(f'<ul class="note">{notes}</ul>')
    return "".join(parts)


def _strategy_table(table: pd.DataFrame) -> str:
    head = ["strategy", "step (s)", "interval (s)", "gain", "on the critical path", "setting", "fits", "proposed"]
    rows = []
    for r in table.itertuples(index=False):
        fits = getattr(r, C.FITS)
        rows.append(
            [
                getattr(r, C.STRATEGY),
                f"{getattr(r, C.PREDICTED_S):.4g}",
                f"{getattr(r, C.LOWER_S):.4g} - {getattr(r, C.UPPER_S):.4g}",
                f"{100 * getattr(r, C.GAIN):+.1f} %",
                getattr(r, C.CRITICAL_PATH),
                getattr(r, C.SETTING),
                "?" if pd.isna(fits) else ("yes" if fits else "no"),
                "yes" if getattr(r, C.PROPOSED) else "",
            ]
        )
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + f"</tr>{cells}</table>"


def write_optimisation_page(search, path) -> None:
    """The section as a self-contained HTML page (written atomically)."""
    from extradeep import __version__
    from extradeep.report.build import write_text_atomic
    from extradeep.report.html import STYLE

    title = "Optimisation: what to change"
    text = (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1><p>Made by extradeep {__version__}.</p>"
        + optimisation_section(search).replace(f"<h2>{title}</h2>", "", 1)
        + "</body></html>"
    )
    write_text_atomic(path, text)
