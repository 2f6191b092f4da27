"""The layout search as HTML: a section for any report (:func:`layout_section`) and a report of its
own (:func:`build_layout_report`, what `extradeep layouts --report` and the GUI's Layouts tab write).

The section shows what was searched and what calibrated it, the recommended layout under the limits
(or why there is none), the heat map of layouts against GPU counts with the infeasible cells and
their reasons, the Pareto plot and front of time against cost, the profiled runs' layouts and the
composed model with what calibrated each part.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from pathlib import Path

import pandas as pd

from extradeep import __version__
from extradeep.columns import (
    CHUNKS,
    COST,
    DP,
    ENERGY_KWH,
    FITS,
    GLOBAL_BATCH,
    GPUS,
    HARDWARE,
    MICRO_BATCH,
    MICRO_BATCHES,
    PARETO,
    PEAK_MEMORY,
    PP,
    RANK,
    RECOMPUTE,
    RUN_TIME,
    SCHEDULE,
    TIME_HIGH,
    TIME_LOW,
    TP,
    ZERO,
)
from extradeep.layouts.search import best_layout, pareto_front, why_none
from extradeep.report.html import STYLE
from extradeep.report.html import _table as html_table
from extradeep.report.layout_figures import FEASIBLE, INFEASIBLE, heatmap_cells, heatmap_figure, pareto_figure
from extradeep.report.layouts import LAYOUT_HEADERS, layout_cells, outcome_cells, runs_to_profile
from extradeep.report.plots import figure_bytes
from extradeep.report.text import format_value

DEFAULT_TITLE = "Which parallel layout? Layout search report"
MAX_INFEASIBLE_ROWS = 40
MAX_FRONT_ROWS = 20
RUN_FIELDS = [GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, ZERO, RECOMPUTE, SCHEDULE, CHUNKS]


def _image(figures: dict, name: str, fig, alt: str) -> str:
    figures[name] = fig
    data = base64.b64encode(figure_bytes(fig, "png")).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def _p(text: str, css: str | None = None) -> str:
    attrs = f' class="{css}"' if css else ""
    return f"<p{attrs}>{html.escape(text)}</p>"


def calibration_text(result) -> str:
    """What calibrated the model: profiled runs, measured tables, or physics alone."""
    pieces = []
    if result.parts is not None and len(result.parts):
        runs = result.parts.drop_duplicates([c for c in [*RUN_FIELDS, "workload"] if c in result.parts])
        pieces.append(f"{len(runs)} profiled runs (their step parts and memory peaks)")
    if result.observations is not None and len(result.observations):
        pieces.append(f"{len(result.observations)} measured step times from tables")
    if not pieces:
        return "physics alone: nothing calibrated it, so every part is a prior (wide intervals)"
    return "calibrated on " + " and ".join(pieces)


def best_text(table: pd.DataFrame) -> str:
    best = best_layout(table)
    objective = table.attrs.get("objective", "time")
    if best is None:
        return f"No layout recommended: {why_none(table)}."
    unit, cost_unit = table.attrs.get("time_unit", "s per step"), table.attrs.get("cost_unit", "GPU-hours")
    cells = ", ".join(f"{k} {v}" for k, v in zip(LAYOUT_HEADERS, layout_cells(best)))
    text = (
        f"Best by {objective} under the limits: {cells} on {best[HARDWARE]}: {best[RUN_TIME]:.4g} {unit} "
        f"(95% interval {best[TIME_LOW]:.3g}-{best[TIME_HIGH]:.3g}), cost {best[COST]:.4g} {cost_unit}, "
        f"{best[ENERGY_KWH]:.3g} kWh, {format_value(best[PEAK_MEMORY], 'bytes')} per GPU."
    )
    if best["extrapolated"]:
        text += f" Extrapolated: {best['extrapolated']}."
        runs = runs_to_profile(best["extrapolated"])
        if runs:
            text += f" To measure it, profile {'; '.join(runs)}."
    if best["estimate"]:
        text += " An estimate on other hardware than the calibration's."
    return text


def layout_section(result, figures: dict | None = None) -> str:
    """The HTML of one layout study's search (``result``: a LayoutStudyResult with a table)."""
    figures = {} if figures is None else figures
    table = result.table
    limits = ", ".join(
        f"{name} {table.attrs[key]:g}"
        for key, name in (("max_time", "max time"), ("max_cost", "max cost"))
        if table.attrs.get(key) is not None
    )
    shape = result.shape.label() if result.shape is not None else "the model"
    counts = ", ".join(str(int(n)) for n in sorted(table[GPUS].unique()))
    head = (
        f"{len(table)} candidate layouts of {shape} on {counts} GPUs ({', '.join(table[HARDWARE].unique())}), "
        f"{int(table[GLOBAL_BATCH].iloc[0])} samples per step: {int(table[FITS].sum())} fit in GPU memory, "
        f"{int(table[PARETO].sum())} on the Pareto front of time against cost. The model is "
        f"{calibration_text(result)}. Limits: {limits or 'none'}."
    )
    parts = ["<h2>Parallel layouts: which t, p, d, micro-batch and ZeRO stage</h2>", _p(head)]
    parts.append(_p(best_text(table), None if best_layout(table) is not None else "fail"))
    parts.append("<h3>Layouts against GPU counts</h3>")
    parts.append(
        _p(
            "Each cell is the best time among the layouts of that tensor-parallel degree t and pipeline depth p "
            "on that many GPUs that fit in GPU memory (d = GPUs / (t p); the micro-batch split, ZeRO stage, "
            "recomputation and schedule chosen per cell, as the list under the map names them)."
        )
    )
    parts.append(_image(figures, "layout_heatmap", heatmap_figure(table), "heat map of layouts against GPU counts"))
    parts.append(_cell_choices(table))
    parts.append(_infeasible_table(table))
    parts.append("<h3>Time against cost</h3>")
    parts.append(_image(figures, "layout_pareto", pareto_figure(table), "Pareto plot of time against cost"))
    parts.append(_front_table(table))
    if result.runs is not None and len(result.runs):
        parts.append(_runs_table(result.runs))
    parts.append("<h3>The composed step model</h3>")
    parts.append(f"<pre>{html.escape(result.model.formula())}</pre>")
    parts.append(_status_table(result.model))
    if result.problems:
        items = "".join(f"<li>{html.escape(p)}</li>" for p in result.problems)
        parts.append(f"<p class=note>Skipped inputs:</p><ul>{items}</ul>")
    return "".join(parts)


def _cell_choices(table: pd.DataFrame) -> str:
    """The layout behind each coloured cell, folded away (a long list for a large search)."""
    unit = table.attrs.get("time_unit", "s per step")
    cells = heatmap_cells(table)
    shown = cells[cells["state"] == FEASIBLE]
    rows = [
        [r.row, str(getattr(r, GPUS)), f"{r.value:.4g}", r.option, str(r.rank) if r.rank else "outside limits"]
        for r in shown.itertuples(index=False)
    ]
    headers = ["layout", "GPUs", f"time ({unit})", "choices", "rank"]
    return (
        f"<details><summary>The layout of each cell ({len(rows)} cells)</summary>"
        + html_table(headers, rows, numeric={1, 2, 4})
        + "</details>"
    )


def _infeasible_table(table: pd.DataFrame) -> str:
    cells = heatmap_cells(table)
    bad = cells[cells["state"] == INFEASIBLE]
    if bad.empty:
        return _p("Every cell has a layout that fits in GPU memory.")
    rows = [[r.row, str(getattr(r, GPUS)), r.option, r.reason] for r in bad.head(MAX_INFEASIBLE_ROWS).itertuples()]
    text = f"{len(bad)} cells where no layout fits in GPU memory (the least memory-hungry layout of each, and why):"
    more = f" ({len(bad) - MAX_INFEASIBLE_ROWS} more in the CSV)" if len(bad) > MAX_INFEASIBLE_ROWS else ""
    return _p(text + more) + html_table(["layout", "GPUs", "choices", "reason"], rows, numeric={1}, clip={3})


def _front_table(table: pd.DataFrame) -> str:
    unit, cost_unit = table.attrs.get("time_unit", "s per step"), table.attrs.get("cost_unit", "GPU-hours")
    front = pareto_front(table).head(MAX_FRONT_ROWS)
    headers = [*LAYOUT_HEADERS, f"time ({unit})", "95% interval", f"cost ({cost_unit})", "kWh", "memory", "rank"]
    rows = [
        [*layout_cells(r), *outcome_cells(r), str(int(r[RANK])) if r[RANK] else "outside limits"]
        for _, r in front.iterrows()
    ]
    return _p("The Pareto front, fastest first:") + html_table(headers, rows, numeric=set(range(len(headers))))


def _runs_table(runs: pd.DataFrame) -> str:
    present = [c for c in RUN_FIELDS if c in runs]
    rows = [[str(r["point"])] + [_plain(r[c]) for c in present] for _, r in runs.iterrows()]
    return "<h3>Profiled runs and their layouts</h3>" + html_table(["run", *present], rows)


def _plain(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "not recorded"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _status_table(model) -> str:
    status = model.part_status()
    rows = [
        [r.coefficient, f"{r.value:.4g}", f"{r.prior:.4g}", r.part, r.calibrated_by, r.meaning]
        for r in status.itertuples(index=False)
    ]
    headers = ["coefficient", "value", "prior", "part", "calibrated by", "meaning"]
    return _p("What calibrated each part ('prior': physics only, an extrapolation):") + html_table(
        headers, rows, numeric={1, 2}
    )


def build_layout_report(result, output=None, title: str | None = None) -> dict:
    """Write the layout report of ``result`` (a LayoutStudyResult with a search) to ``output`` (an
    HTML path; None: only build it). Returns {"html", "path", "figures"}."""
    from extradeep.errors import InputError
    from extradeep.report.build import write_text_atomic

    if result.table is None:
        raise InputError(None, "the layout report shows a search: give the model to search, GPU counts and a batch")
    figures: dict = {}
    body = layout_section(result, figures)
    title = html.escape(title or DEFAULT_TITLE)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1>"
        f"<p>Made by extradeep {__version__} on {stamp}.</p>{body}</body></html>"
    )
    if output is not None:
        write_text_atomic(output, text)
    return {"html": text, "path": None if output is None else Path(output), "figures": figures}
