"""The breakdown figure: where the time per epoch (or step) goes, as stacked computation,
communication, memory and idle along the models or per configuration, with the overlap of
concurrent streams and the time in no category shown against the epoch time (the HTML report and
the GUI's Breakdown tab)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from extradeep.analysis.epoch import EPOCH_TIME
from extradeep.analysis.parts import PARTS
from extradeep.columns import OVERLAP, UNEXPLAINED, VALUE
from extradeep.report.plots import COLORS, _figure

BREAKDOWN_PARTS = PARTS  # stacked in this order: computation, communication, memory, idle


def breakdown_parts(table: pd.DataFrame, x: str) -> pd.DataFrame:
    """One row per x: the stacked parts (computation, communication, memory, idle; >= 0), the epoch
    time, the overlap (stack above the epoch time) and the unexplained gap (epoch time above it)."""
    wide = table.pivot_table(index=x, columns="quantity", values="T").sort_index()
    parts = pd.DataFrame({x: wide.index.to_numpy(float)})
    for part in BREAKDOWN_PARTS:
        if part in wide.columns:
            parts[part] = np.maximum(wide[part].to_numpy(float), 0)
    if EPOCH_TIME in wide.columns:
        total = parts[[p for p in BREAKDOWN_PARTS if p in parts.columns]].sum(axis=1).to_numpy()
        whole = wide[EPOCH_TIME].to_numpy(float)
        parts[OVERLAP], parts[UNEXPLAINED], parts[EPOCH_TIME] = (
            (total - whole).clip(min=0),
            (whole - total).clip(min=0),
            whole,
        )
    return parts


def breakdown_panel(
    ax,
    table: pd.DataFrame,
    x: str,
    per: str,
    measured_max: float | None = None,
    *,
    areas: bool = False,
    measured: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Computation, communication, memory and idle per epoch stacked from a long table (quantity,
    x, T), the epoch time on top and the difference made visible: the stack above the epoch time
    hatched as overlap (GPU work on concurrent streams counts once per stream), epoch time above the
    stack as time in no category. As bars at the table's points, or (``areas``) as continuous areas
    along the model, with ``measured`` (x, value) epoch times as points. Returns the parts drawn."""
    parts = breakdown_parts(table, x)
    names = [p for p in BREAKDOWN_PARTS if p in parts.columns]
    stack = [parts[p].to_numpy(float) for p in names]
    total = np.sum(stack, axis=0) if stack else np.zeros(len(parts))
    xs = parts[x].to_numpy(float)
    if areas:
        ax.stackplot(xs, *stack, labels=[f"{p} (model)" for p in names], colors=[COLORS[p] for p in names], alpha=0.85)
        where = xs
    else:
        where = np.arange(len(parts))
        bottom = np.zeros(len(parts))
        for name, values in zip(names, stack):
            ax.bar(where, values, bottom=bottom, color=COLORS[name], label=name, width=0.6)
            bottom += values
    if EPOCH_TIME in parts.columns:
        _difference(ax, where, total, parts, areas)
    if measured is not None and not measured.empty:
        ax.plot(measured[x], measured[VALUE], "ko", ms=5, label=f"{EPOCH_TIME} (measured)")
    _breakdown_axes(ax, parts, x, per, measured_max, areas)
    return parts


# How the two differences between the stack and the epoch time look, as areas or as bars.
OVERLAP_STYLE = {
    "facecolor": "none",
    "hatch": "///",
    "edgecolor": "0.15",
    "lw": 0,
    "label": "overlap (concurrent streams)",
}
UNEXPLAINED_STYLE = {"facecolor": "white", "hatch": "..", "edgecolor": "0.5", "lw": 0, "label": "not in any category"}


def _difference(ax, where, total, parts: pd.DataFrame, areas: bool) -> None:
    whole, overlap, unexplained = (parts[c].to_numpy(float) for c in (EPOCH_TIME, OVERLAP, UNEXPLAINED))
    if areas:
        if (overlap > 0).any():
            ax.fill_between(where, whole, total, where=overlap > 0, **OVERLAP_STYLE)
        if (unexplained > 0).any():
            ax.fill_between(where, total, whole, where=unexplained > 0, **UNEXPLAINED_STYLE)
        ax.plot(where, whole, color="k", lw=1.6, label=f"{EPOCH_TIME} (model)")
        return
    if (overlap > 0).any():
        ax.bar(where, overlap, bottom=whole, width=0.6, **OVERLAP_STYLE)
    if (unexplained > 0).any():
        ax.bar(where, unexplained, bottom=total, width=0.6, **UNEXPLAINED_STYLE)
    ax.plot(where, whole, "k_", ms=28, mew=2, label=EPOCH_TIME)


def _breakdown_axes(ax, parts: pd.DataFrame, x: str, per: str, measured_max: float | None, areas: bool) -> None:
    xs = parts[x].to_numpy(float)
    ax.set_xlabel(x)
    if areas and len(xs):
        if measured_max is not None and xs[-1] > measured_max:
            ax.axvline(measured_max, color="0.4", ls=":", lw=1)
            ax.annotate(
                " extrapolation →",
                (measured_max, 0.98),
                xycoords=("data", "axes fraction"),
                va="top",
                fontsize=8,
                color="0.3",
            )
        ax.set_xlim(xs[0], xs[-1])
    elif not areas:
        ax.set_xticks(np.arange(len(xs)), [f"{v:g}" for v in xs])
        if measured_max is not None and (xs > measured_max).any() and (xs <= measured_max).any():
            ax.axvline(int((xs <= measured_max).sum()) - 0.5, color="#888888", ls="--", lw=1)
            ax.set_xlabel(f"{x}  (left of the dashed line: measured; right: predicted)")
    ax.set_ylabel(f"seconds per {per}")
    ax.set_title(
        f"Where the time per {per} goes. GPU work is summed over streams, so work on concurrent\n"
        f"streams counts more than once: stack minus hatched overlap = {EPOCH_TIME}",
        fontsize=9,
    )
    ax.grid(alpha=0.3, axis="y" if not areas else "both")


def breakdown_figure(predictions: pd.DataFrame, x: str, per: str, measured_max: float | None = None) -> Figure:
    """Stacked computation, communication, memory and idle per epoch, with the measured-step epoch
    time; a dashed line separates measured configurations (<= ``measured_max``) from predictions."""
    fig, (ax,) = _figure(width=7.6)
    breakdown_panel(ax, predictions, x, per, measured_max)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig
