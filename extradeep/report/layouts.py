"""The layout model and the layout search as terminal text: the composed formula, what calibrated
each part, the fit, the Pareto front and the best layout."""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import (
    CHUNKS,
    COST,
    DP,
    ENERGY_COST,
    ENERGY_KWH,
    FITS,
    GPUS,
    HARDWARE,
    MICRO_BATCH,
    MICRO_BATCHES,
    PARETO,
    PEAK_MEMORY,
    POWER_W,
    PP,
    RECOMPUTE,
    RUN_TIME,
    SCHEDULE,
    STEP_TIME,
    TIME_HIGH,
    TIME_LOW,
    TP,
    WORKLOAD,
    ZERO,
)
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


def error_percent(value: float) -> str:
    """6.6%, or 1.38e+300% for a table whose step time is off by hundreds of orders of magnitude
    (a cell in the wrong unit), never a 300-digit number."""
    return f"{value:.1f}%" if abs(value) < 1e4 else f"{value:.3g}%"


def fit_text(model, observations: pd.DataFrame | None) -> str:
    """The model, the in-sample fit per workload and the held-out errors the intervals come from."""
    parts = [model_text(model)]
    if observations is not None and len(observations):
        predicted = model.predict(observations)[STEP_TIME].to_numpy()
        frame = observations.assign(error=100 * np.abs(predicted / observations[STEP_TIME] - 1))
        rows = [
            [str(w), str(len(g)), error_percent(g["error"].mean()), error_percent(g["error"].max())]
            for w, g in frame.groupby(WORKLOAD if WORKLOAD in frame else GPUS)
        ]
        parts.append(
            section("Fit to the tables (in sample)", render_table(["workload", "layouts", "mean", "worst"], rows))
        )
    if len(model.cv_errors_):
        held = model.cv_errors_.assign(error=100 * np.abs(np.expm1(model.cv_errors_["log_error"])))
        rows = [
            [str(w), error_percent(g["error"].mean()), error_percent(g["error"].max())]
            for w, g in held.groupby(WORKLOAD)
        ]
        title = f"Held-out errors (each left out in turn; they size the {model.level:.0%} intervals)"
        parts.append(section(title, render_table(["left out", "mean", "worst"], rows)))
    return "\n\n".join(parts)


def layout_cells(r) -> list[str]:
    return [
        str(int(r[GPUS])),
        str(int(r[TP])),
        str(int(r[PP])),
        str(int(r[DP])),
        str(int(r[MICRO_BATCH])),
        str(int(r[MICRO_BATCHES])),
        str(int(r[ZERO])),
        str(r[RECOMPUTE]),
        str(r[SCHEDULE]) + (f" x{int(r[CHUNKS])}" if r[SCHEDULE] == "interleaved" else ""),
    ]


def outcome_cells(r) -> list[str]:
    """A searched layout's time, interval, cost, energy and peak memory per GPU, as shown."""
    return [
        f"{r[RUN_TIME]:.4g}",
        f"{r[TIME_LOW]:.3g}-{r[TIME_HIGH]:.3g}",
        f"{r[COST]:.4g}",
        f"{r[ENERGY_KWH]:.3g}",
        format_value(r[PEAK_MEMORY], "bytes"),
    ]


def search_text(model, table: pd.DataFrame) -> str:
    """Counts, the Pareto front of time against cost, the best layout under the limits (or why
    none), and examples of layouts that do not fit."""
    unit, cost_unit = table.attrs.get("time_unit", "s"), table.attrs.get("cost_unit", "GPU-hours")
    fits = int(table[FITS].sum())
    head = (
        f"{len(table)} candidate layouts on {', '.join(table[HARDWARE].unique())}: {fits} fit in GPU memory, "
        f"{int(table[PARETO].sum())} on the Pareto front of time against cost"
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
        money = f", cost {best[COST]:.4g} {cost_unit}, {best[ENERGY_KWH]:.3g} kWh"
        if np.isfinite(best[ENERGY_COST]):
            money += f" ({best[ENERGY_COST]:.3g} for energy)"
        if POWER_W in best:
            money += (
                f", {best[POWER_W]:.0f} W per GPU ({table.attrs.get('power_source', 'system file')}), "
                f"{best['perf_per_watt']:.3g} samples/J, {best['perf_per_cost']:.3g} samples per {cost_unit}"
            )
        detail = f"{best[RUN_TIME]:.4g} {unit} [{best[TIME_LOW]:.3g}, {best[TIME_HIGH]:.3g}]{money}"
        parts.append(section(f"Best by {objective} under the limits", f"{text}: {detail}{_note(best, ' (')}"))
        runs = runs_to_profile(best["extrapolated"])
        if runs:
            parts.append(section("What to profile next", "\n".join([*(f"- {r}" for r in runs), PLAN_HINT])))
    unfit = table[~table[FITS]]
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


# what a profiled run would measure that the best layout now extrapolates (its `extrapolated` notes)
MEASURES = {
    "dp across nodes": "one run whose data-parallel group spans two nodes (the network's share of DP is physics alone)",
    "tp across nodes": "one run whose tensor-parallel group spans two nodes",
    "algorithm assumed": (
        "one run whose data-parallel group crosses nodes with another number of GPUs per node than"
        " the profiled ones (one shape cannot tell how collectives cross nodes)"
    ),
    "h/t=": "one run with GEMMs as narrow (hidden / t = {value}): thin GEMMs are extrapolated",
    f"{ZERO}=": "one run with ZeRO stage {value}",
    f"{RECOMPUTE}=": "one run with recomputation {value}",
    f"{SCHEDULE}=": "one run with the {value} schedule",
}


PLAN_HINT = "(`extradeep plan --layout-model` chooses the runs that pin down most per GPU-hour)"


def runs_to_profile(extrapolated) -> list[str]:
    """The runs that would turn a layout's extrapolations into measurements; none when it leans
    only on the GPU count (as every prediction beyond the profiles does) or on nothing."""
    runs = []
    for note in filter(None, str(extrapolated or "").split(",")):
        for key, text in MEASURES.items():
            if note == key or (key.endswith("=") and note.startswith(key)):
                runs.append(text.format(value=note.partition("=")[2]))
    return list(dict.fromkeys(runs))
