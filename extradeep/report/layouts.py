"""The layout model and the layout search as terminal text: the composed formula, what calibrated
each part, the fit, the Pareto front and the best layout."""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import GPUS, STEP_TIME, WORKLOAD
from extradeep.layouts.search import best_layout, pareto_front, why_none
from extradeep.report.text import format_value, render_table, section

PARETO_ROWS = 12
LAYOUT_HEADERS = ["GPUs", "t", "p", "d", "micro-batch", "count", "ZeRO", "recompute", "schedule"]


def model_text(model) -> str:
    """The formula and one line per coefficient: value, prior, part, what calibrated it."""
    status = model.part_status()
    rows = [
        [r.coefficient, f"{r.value:.4g}", f"{r.prior:.4g}", r.part, r.calibrated_by, r.meaning]
        for r in status.itertuples(index=False)
    ]
    table = render_table(["coefficient", "value", "prior", "part", "calibrated by", "meaning"], rows, "lrrlll")
    return "\n\n".join(
        [
            section("Composed step model", model.formula()),
            section("Parts: measured (parts), calibrated on step totals, or physics only (prior)", table),
        ]
    )


def fit_text(model, observations: pd.DataFrame | None) -> str:
    """The model, the in-sample fit per workload and the held-out errors the intervals come from."""
    parts = [model_text(model)]
    if observations is not None and len(observations):
        predicted = model.predict(observations)[STEP_TIME].to_numpy()
        frame = observations.assign(error=100 * np.abs(predicted / observations[STEP_TIME] - 1))
        rows = [
            [str(w), str(len(g)), f"{g['error'].mean():.1f}%", f"{g['error'].max():.1f}%"]
            for w, g in frame.groupby(WORKLOAD if WORKLOAD in frame else GPUS)
        ]
        parts.append(
            section("Fit to the tables (in sample)", render_table(["workload", "layouts", "mean", "worst"], rows))
        )
    if len(model.cv_errors_):
        held = model.cv_errors_.assign(error=100 * np.abs(np.expm1(model.cv_errors_["log_error"])))
        rows = [[str(w), f"{g['error'].mean():.1f}%", f"{g['error'].max():.1f}%"] for w, g in held.groupby(WORKLOAD)]
        title = f"Held-out errors (each left out in turn; they size the {model.level:.0%} intervals)"
        parts.append(section(title, render_table(["left out", "mean", "worst"], rows)))
    return "\n\n".join(parts)


def layout_cells(r) -> list[str]:
    return [
        str(int(r[GPUS])),
        str(int(r["tp"])),
        str(int(r["pp"])),
        str(int(r["dp"])),
        str(int(r["micro_batch"])),
        str(int(r["micro_batches"])),
        str(int(r["zero"])),
        str(r["recompute"]),
        str(r["schedule"]) + (f" x{int(r['chunks'])}" if r["schedule"] == "interleaved" else ""),
    ]


def outcome_cells(r) -> list[str]:
    """A searched layout's time, interval, cost, energy and peak memory per GPU, as shown."""
    return [
        f"{r['time']:.4g}",
        f"{r['time_low']:.3g}-{r['time_high']:.3g}",
        f"{r['cost']:.4g}",
        f"{r['energy_kwh']:.3g}",
        format_value(r["peak_memory"], "bytes"),
    ]


def search_text(model, table: pd.DataFrame) -> str:
    """Counts, the Pareto front of time against cost, the best layout under the limits (or why
    none), and examples of layouts that do not fit."""
    unit, cost_unit = table.attrs.get("time_unit", "s"), table.attrs.get("cost_unit", "GPU-hours")
    fits = int(table["fits"].sum())
    head = (
        f"{len(table)} candidate layouts on {', '.join(table['hardware'].unique())}: {fits} fit in GPU memory, "
        f"{int(table['pareto'].sum())} on the Pareto front of time against cost"
    )
    front = pareto_front(table).head(PARETO_ROWS)
    headers = [*LAYOUT_HEADERS, f"time ({unit})", "95% interval", f"cost ({cost_unit})", "kWh", "memory", "note"]
    rows = [[*layout_cells(r), *outcome_cells(r), _note(r)] for _, r in front.iterrows()]
    parts = [model_text(model), section(head, render_table(headers, rows, "r" * 7 + "ll" + "r" * 6 + "l"))]
    best = best_layout(table)
    objective = table.attrs.get("objective", "time")
    if best is None:
        parts.append(section(f"Best by {objective}", "none: " + why_none(table)))
    else:
        cells = dict(zip(LAYOUT_HEADERS, layout_cells(best)))
        text = ", ".join(f"{k} {v}" for k, v in cells.items())
        money = f", cost {best['cost']:.4g} {cost_unit}, {best['energy_kwh']:.3g} kWh"
        if np.isfinite(best["energy_cost"]):
            money += f" ({best['energy_cost']:.3g} for energy)"
        if "power_w" in best:
            money += (
                f", {best['power_w']:.0f} W per GPU ({table.attrs.get('power_source', 'system file')}), "
                f"{best['perf_per_watt']:.3g} samples/J, {best['perf_per_cost']:.3g} samples per {cost_unit}"
            )
        detail = f"{best['time']:.4g} {unit} [{best['time_low']:.3g}, {best['time_high']:.3g}]{money}"
        parts.append(section(f"Best by {objective} under the limits", f"{text}: {detail}{_note(best, ' (')}"))
    unfit = table[~table["fits"]]
    if len(unfit):
        examples = "; ".join(unfit["reason"].drop_duplicates().head(3))
        parts.append(f"{len(unfit)} layouts never recommended: they do not fit in GPU memory ({examples}, ...)")
    return "\n\n".join(parts)


def _note(r, prefix: str = "") -> str:
    notes = []
    if r["estimate"]:
        notes.append("estimate: other hardware")
    if r["extrapolated"]:
        notes.append("extrapolated: " + r["extrapolated"])
    if not notes:
        return ""
    return f"{prefix}{'; '.join(notes)})" if prefix else "; ".join(notes)
