"""Figures of a layout search (matplotlib, no pyplot): shared by the HTML report and the GUI.

- :func:`heatmap_cells`: the heat map's data. One row per tensor- and pipeline-parallel pair (t, p;
  per GPU type when the search ranged over several), one column per GPU count; a cell holds the
  search's best time among the layouts of that pair and count that fit in memory (over micro-batch
  size, ZeRO stage, recomputation and schedule), which of them it is, and its rank. A cell where no
  layout fits is infeasible, with the reason of the layout that needs the least memory; a cell
  without any valid layout (t p does not divide the count, or the global batch does not split) is
  empty.
- :func:`heatmap_figure`, :func:`pareto_figure`: the heat map and the Pareto plot of time against
  cost, with the limits and the best layout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from extradeep.columns import (
    CHUNKS,
    COST,
    DP,
    FITS,
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
    TP,
    ZERO,
)

FEASIBLE, INFEASIBLE, NO_LAYOUT = "fits", "infeasible", "no layout"
INFEASIBLE_COLOR = "#d9d9d9"
BEST_COLOR = "#c44e52"
PLAIN = FuncFormatter(lambda v, _: f"{v:g}")  # 20, not 2 x 10^1
# Minor ticks of a log axis labelled at 2 and 5 only: labelling all eight ran them into each other
# ("0.050.060.07") on a Pareto plot spanning 1.5 decades.
PLAIN_MINOR = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")
MAX_ANNOTATED = 240  # cells; beyond this the numbers crowd the map and only the colours remain


def row_label(t, p, hardware: str | None = None) -> str:
    return (f"{hardware}: " if hardware else "") + f"t={int(t)} p={int(p)}"


def option_label(r) -> str:
    """The choices within a cell: micro-batch size x count, ZeRO stage, recomputation, schedule."""
    schedule = str(r[SCHEDULE]) + (f" x{int(r[CHUNKS])}" if r[SCHEDULE] == "interleaved" else "")
    return f"mb {int(r[MICRO_BATCH])}x{int(r[MICRO_BATCHES])}, ZeRO {int(r[ZERO])}, {r[RECOMPUTE]} rc, {schedule}"


def heatmap_cells(table: pd.DataFrame, value: str = "time") -> pd.DataFrame:
    """One row per (layout row, GPU count) cell of the heat map: ``row`` (label), ``hardware``,
    ``tp``, ``pp``, ``gpus``, ``state`` (fits / infeasible / no layout), ``value`` (the best
    ``value`` column among the layouts that fit; NaN otherwise), ``option`` (its choices),
    ``rank`` (its rank in the search; 0 when outside the limits), ``best`` and ``reason`` (why
    nothing fits)."""
    several = table[HARDWARE].nunique() > 1
    rows = []
    gpus = sorted(table[GPUS].unique())
    pairs = table[[HARDWARE, TP, PP]].drop_duplicates().sort_values([HARDWARE, TP, PP])
    groups = {key: g for key, g in table.groupby([HARDWARE, TP, PP, GPUS], sort=False)}
    for hardware, t, p in pairs.itertuples(index=False):
        label = row_label(t, p, hardware if several else None)
        for n in gpus:
            cell = {"row": label, "hardware": hardware, TP: int(t), PP: int(p), GPUS: int(n)}
            group = groups.get((hardware, t, p, n))
            if group is None:
                rows.append({**cell, "state": NO_LAYOUT, "value": np.nan, "option": "", "rank": 0, "best": False})
                rows[-1]["reason"] = "no valid layout (t p does not divide the GPUs, or the batch does not split)"
                continue
            fits = group[group[FITS]]
            if fits.empty:
                smallest = group.loc[group[PEAK_MEMORY].idxmin()]
                rows.append({**cell, "state": INFEASIBLE, "value": np.nan, "option": option_label(smallest)})
                rows[-1].update({"rank": 0, "best": False, "reason": str(smallest["reason"])})
                continue
            top = fits.loc[fits[value].idxmin()]
            rows.append({**cell, "state": FEASIBLE, "value": float(top[value]), "option": option_label(top)})
            rows[-1].update({"rank": int(top[RANK]), "best": bool(fits["best"].any()), "reason": ""})
    return pd.DataFrame(rows)


def _grid(cells: pd.DataFrame):
    labels = list(dict.fromkeys(cells["row"]))
    gpus = sorted(cells[GPUS].unique())
    index = {label: i for i, label in enumerate(labels)}
    column = {n: j for j, n in enumerate(gpus)}
    values = np.full((len(labels), len(gpus)), np.nan)
    for r in cells.itertuples(index=False):
        values[index[r.row], column[getattr(r, GPUS)]] = r.value
    return labels, gpus, index, column, values


def heatmap_figure(table: pd.DataFrame, value: str = "time", figure: Figure | None = None) -> Figure:
    """The layouts (t, p rows) against the GPU counts, coloured by the best time per cell (log
    scale); infeasible cells grey and hatched with the memory they need, the best layout framed."""
    cells = heatmap_cells(table, value)
    labels, gpus, index, column, values = _grid(cells)
    height = min(2.0 + 0.32 * len(labels), 14.0)
    fig = figure or Figure(figsize=(max(7.0, 2.5 + 1.1 * len(gpus)), height), layout="constrained")
    ax = fig.add_subplot()
    finite = values[np.isfinite(values)]
    norm = LogNorm(finite.min(), finite.max()) if len(finite) and finite.max() > finite.min() else None
    image = ax.imshow(np.ma.masked_invalid(values), aspect="auto", cmap="viridis_r", norm=norm)
    if len(finite):
        unit = table.attrs.get("time_unit", "s per step") if value == "time" else value
        bar = fig.colorbar(image, ax=ax, label=f"best {value} ({unit})" if value == "time" else value)
        bar.ax.yaxis.set_major_formatter(PLAIN)
        bar.ax.yaxis.set_minor_formatter(PLAIN_MINOR)
    annotate = values.size <= MAX_ANNOTATED
    for r in cells.itertuples(index=False):
        i, j = index[r.row], column[getattr(r, GPUS)]
        if r.state == INFEASIBLE:
            ax.add_patch(_box(j, i, INFEASIBLE_COLOR, hatch="xx"))
            if annotate:
                ax.text(j, i, _short_need(r.reason), ha="center", va="center", fontsize=6.5, color="#333333")
        elif r.state == FEASIBLE:
            if r.best:
                ax.add_patch(_box(j, i, "none", edge=BEST_COLOR, width=2.5))
            if annotate:
                color = "white" if norm is not None and norm(r.value) > 0.6 else "black"
                ax.text(j, i, f"{r.value:.3g}", ha="center", va="center", fontsize=7, color=color)
        elif annotate:
            ax.text(j, i, "-", ha="center", va="center", fontsize=7, color="#999999")
    ax.set_xticks(range(len(gpus)), [str(int(n)) for n in gpus])
    ax.set_yticks(range(len(labels)), labels, fontsize=8 if len(labels) < 30 else 6)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("tensor-parallel t, pipeline stages p")
    ax.set_title(
        "best layout per cell (over micro-batch, ZeRO, recomputation, schedule);\n"
        "grey hatched: does not fit in GPU memory; '-': no valid layout; red frame: recommended",
        fontsize=8,
    )
    return fig


def _box(x, y, face, hatch=None, edge="#777777", width=0.5):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=face, edgecolor=edge, hatch=hatch, linewidth=width)


def _short_need(reason: str) -> str:
    """'needs 95.3 GiB per GPU, has 80 GiB (76 usable)' -> 'needs 95.3 GiB'."""
    if not reason.startswith("needs "):
        return "does not fit"
    need = reason.split(" per GPU")[0].split()[1]
    return f"needs {float(need):.0f} GiB" if need.replace(".", "", 1).isdigit() else "does not fit"


def pareto_figure(table: pd.DataFrame, figure: Figure | None = None) -> Figure:
    """Every layout that fits as time against cost (log-log), the Pareto front as a line, the
    layouts that do not fit as crosses, the limits as dashed lines and the recommended layout."""
    fig = figure or Figure(figsize=(7.0, 4.6), layout="constrained")
    ax = fig.add_subplot()
    unit, cost_unit = table.attrs.get("time_unit", "s per step"), table.attrs.get("cost_unit", "GPU-hours")
    fits, unfit = table[table[FITS]], table[~table[FITS]]
    if len(unfit):
        ax.scatter(unfit[RUN_TIME], unfit[COST], marker="x", s=14, color="#bbbbbb", label="does not fit in memory")
    for hardware, group in fits.groupby(HARDWARE, sort=True):
        label = "layouts that fit" + (f" ({hardware})" if fits[HARDWARE].nunique() > 1 else "")
        ax.scatter(group[RUN_TIME], group[COST], s=12, alpha=0.55, label=label)
    front = table[table[PARETO]].sort_values(RUN_TIME)
    if len(front):
        ax.plot(front[RUN_TIME], front[COST], "-o", color="black", ms=4, lw=1.2, label="Pareto front")
    limit = table.attrs.get("max_time")
    if limit is not None:
        ax.axvline(limit, color=BEST_COLOR, ls="--", lw=1, label=f"max time {limit:g} s")
    limit = table.attrs.get("max_cost")
    if limit is not None:
        ax.axhline(limit, color="#dd8452", ls="--", lw=1, label=f"max cost {limit:g}")
    best = table[table["best"]]
    if len(best):
        b = best.iloc[0]
        ax.scatter([b[RUN_TIME]], [b[COST]], marker="*", s=220, color=BEST_COLOR, zorder=5, label="recommended")
        text = f"{int(b[GPUS])} GPUs, t={int(b[TP])} p={int(b[PP])} d={int(b[DP])}"
        ax.annotate(text, (b[RUN_TIME], b[COST]), xytext=(8, 8), textcoords="offset points", fontsize=8)
    if (table[RUN_TIME] > 0).all() and (table[COST] > 0).all():
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(PLAIN)
            axis.set_minor_formatter(PLAIN_MINOR)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel(f"cost ({cost_unit})")
    ax.set_title("time against cost: the Pareto front (no layout is both faster and cheaper)", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return fig
