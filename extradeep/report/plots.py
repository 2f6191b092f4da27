"""Figures of the answers (matplotlib, no pyplot): shared by the HTML report and the GUI.

Every function returns a :class:`matplotlib.figure.Figure` built without a global state, so the
GUI can put it on a Qt canvas and the report can render it to PNG/SVG (Agg). The x axis is the
ranks parameter; with several parameters, the others are held at the values of ``fixed``
(default: the baseline).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from extradeep.analysis.core import Analysis, primary_quantity
from extradeep.analysis.epoch import BREAKDOWN, EPOCH_TIME
from extradeep.analysis.points import point_grid

COLORS = {"computation": "#4c72b0", "communication": "#dd8452", "memory": "#55a868", "idle": "#c0c0c0",
          "epoch time": "#222222", "gpu total": "#8172b3"}
EVAL_COLOR = "#c44e52"


def _figure(width=6.4, height=3.8, ncols=1) -> tuple[Figure, list]:
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


NODE_COLOR = "#7f7f7f"
MAX_BOUNDARIES = 16  # more lines than this hide the curves: then every 2nd, 4th, ... boundary


def mark_node_boundaries(ax, layout, x_lo: float, x_hi: float, *, label: str = "node boundary") -> list[float]:
    """Vertical lines where a run of that many ranks (one GPU each) fills whole nodes: at the
    multiples of GPUs per node strictly inside (``x_lo``, ``x_hi``); one legend entry. ``layout``:
    GPUs per node, a layout dict ({"gpus_per_node": g}) or an Analysis; nothing is drawn without a
    layout of two or more GPUs per node. With more than MAX_BOUNDARIES boundaries only every k-th
    (k a power of two) is drawn and the label says so. Returns the x positions drawn."""
    gpus = getattr(layout, "gpus_per_node", layout)
    gpus = gpus.get("gpus_per_node") if isinstance(gpus, dict) else gpus
    if not gpus or gpus < 2 or not np.isfinite([x_lo, x_hi]).all():
        return []
    first, last = max(int(np.floor(x_lo / gpus)) + 1, 1), int(np.ceil(x_hi / gpus)) - 1
    every = 1
    while (last - first) // every + 1 > MAX_BOUNDARIES:
        every *= 2
    nodes = [k for k in range(first, last + 1) if k % every == 0]
    text = f"{label} ({gpus:g} GPUs per node" + (f"; every {every} nodes)" if every > 1 else ")")
    for i, k in enumerate(nodes):
        ax.axvline(k * gpus, color=NODE_COLOR, ls="-.", lw=0.8, alpha=0.7, zorder=1, label=text if i == 0 else None)
    return [float(k * gpus) for k in nodes]


def line_grid(analysis: Analysis, x_max: float, fixed: dict | None = None, n: int = 200) -> pd.DataFrame:
    """Evenly spaced points along the ranks parameter, from the smallest modeled to ``x_max``."""
    x_min = float(analysis.points[analysis.ranks_param].min())
    values = np.linspace(x_min, max(x_max, x_min * 1.01), n)
    return point_grid(values, analysis.params, analysis.ranks_param, {**analysis.baseline, **(fixed or {})})


def _on_line(points: pd.DataFrame, analysis: Analysis, fixed: dict | None) -> pd.DataFrame:
    """Measured rows whose other parameters equal the plotted line's."""
    keep = np.ones(len(points), dtype=bool)
    for p in analysis.params:
        if p != analysis.ranks_param:
            keep &= np.isclose(points[p].astype(float), {**analysis.baseline, **(fixed or {})}[p])
    return points[keep].sort_values(analysis.ranks_param)


def _X(frame: pd.DataFrame, params: list[str]) -> np.ndarray:
    X = frame[params].to_numpy(float)
    return X[:, 0] if len(params) == 1 else X


def model_panel(ax, analysis: Analysis, quantity: str, x_max: float, evaluation: pd.DataFrame | None = None,
                fixed: dict | None = None, level: float = 0.95, transform=None, ylabel: str = "") -> None:
    """Measured medians with repetition range, the model curve, its prediction band and any
    evaluation points (measured, not used for modeling) on one axis (paper Fig. 3)."""
    transform = transform or (lambda frame, y: y)
    model = analysis.model(quantity)
    x = analysis.ranks_param
    color = COLORS.get(quantity, "#222222")
    if model is not None:
        line = line_grid(analysis, x_max, fixed)
        lo, hi = (np.maximum(v, 0.0) for v in model.interval(_X(line, analysis.params), level=level))
        y = model.predict(_X(line, analysis.params))
        ax.fill_between(line[x], transform(line, lo), transform(line, hi), color=color, alpha=0.15,
                        label=f"{level:.0%} prediction interval")
        ax.plot(line[x], transform(line, y), color=color, lw=1.6, label=f"model: {quantity}")
    measured = _on_line(analysis.application_points[analysis.application_points["quantity"] == quantity], analysis, fixed)
    _measured_points(ax, measured, x, transform, color, "measured (modeling)", "o")
    if evaluation is not None and not evaluation.empty:
        ev = _on_line(evaluation[evaluation["quantity"] == quantity], analysis, fixed)
        _measured_points(ax, ev, x, transform, EVAL_COLOR, "measured (evaluation)", "s")
    ax.axvline(float(analysis.points[x].max()), color="#888888", ls=":", lw=1)
    mark_node_boundaries(ax, analysis, *ax.get_xlim())
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def _measured_points(ax, rows: pd.DataFrame, x: str, transform, color, label, marker) -> None:
    if rows.empty:
        return
    y = transform(rows, rows["value"].to_numpy(float))
    low = y - transform(rows, rows["rep_min"].to_numpy(float))
    high = transform(rows, rows["rep_max"].to_numpy(float)) - y
    ax.errorbar(rows[x], y, yerr=[np.maximum(low, 0), np.maximum(high, 0)], fmt=marker, color=color, ms=5,
                capsize=3, label=label, zorder=3)


def epoch_figure(analysis: Analysis, x_max: float, evaluation: pd.DataFrame | None = None, cost_of=None,
                 cost_label: str = "cost", fixed: dict | None = None, level: float = 0.95) -> Figure:
    """Time per epoch (and, with ``cost_of(points, seconds)``, cost per epoch) vs ranks."""
    quantity = primary_quantity(analysis)
    fig, axes = _figure(ncols=2 if cost_of else 1)
    model_panel(axes[0], analysis, quantity, x_max, evaluation, fixed, level, ylabel=f"seconds per {analysis.per}")
    axes[0].set_title(f"time per {analysis.per}" if quantity == EPOCH_TIME else f"{quantity} per {analysis.per}")
    axes[0].legend(fontsize=8, loc="best")
    if cost_of:
        model_panel(axes[1], analysis, quantity, x_max, evaluation, fixed, level,
                    transform=cost_of, ylabel=f"{cost_label} per {analysis.per}")
        axes[1].set_title(f"{cost_label} per {analysis.per}")
        if analysis.gpus_per_node:
            axes[1].legend(fontsize=8, loc="best")
    return fig


def scaling_figure(scaling: pd.DataFrame, x: str, measured_max: float, layout=None) -> Figure:
    """Speedup and efficiency vs ranks for the quantities in ``scaling`` (a scaling/prediction
    table); with a ``layout`` (see :func:`mark_node_boundaries`) the node boundaries are marked."""
    fig, (ax_s, ax_e) = _figure(ncols=2)
    mode = scaling.attrs.get("scaling", "strong")
    for quantity, rows in scaling.groupby("quantity"):
        if quantity == "idle":
            continue
        rows = rows.sort_values(x)
        style = {"color": COLORS.get(quantity), "lw": 2.2 if quantity == "epoch time" else 1.2}
        ax_s.plot(rows[x], rows["speedup"], label=quantity, **style)
        ax_e.plot(rows[x], rows["efficiency"], label=quantity, **style)
    xs = np.sort(scaling[x].unique())
    if len(xs):
        ax_s.plot(xs, xs / xs[0], color="#999999", ls="--", lw=1, label="ideal")
        ax_e.axhline(1.0, color="#999999", ls="--", lw=1)
    for ax, title in ((ax_s, f"{'scaled ' if mode == 'weak' else ''}speedup"), (ax_e, f"{mode}-scaling efficiency")):
        ax.axvline(measured_max, color="#888888", ls=":", lw=1)
        if len(xs):
            mark_node_boundaries(ax, layout, *ax.get_xlim())
        ax.set_xlabel(x)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    ax_s.legend(fontsize=8)
    if ax_e.get_legend_handles_labels()[0]:
        ax_e.legend(fontsize=8)
    return fig


def breakdown_figure(predictions: pd.DataFrame, x: str, per: str, measured_max: float | None = None) -> Figure:
    """Stacked computation, communication, memory and idle per epoch, with the measured-step epoch
    time; a dashed line separates measured configurations (<= ``measured_max``) from predictions."""
    fig, (ax,) = _figure()
    wide = predictions.pivot_table(index=x, columns="quantity", values="T").sort_index()
    positions = np.arange(len(wide))
    bottom = np.zeros(len(wide))
    for part in (*BREAKDOWN, "idle"):
        if part in wide.columns:
            values = np.maximum(wide[part].to_numpy(float), 0)
            ax.bar(positions, values, bottom=bottom, color=COLORS[part], label=part, width=0.6)
            bottom += values
    if "epoch time" in wide.columns:
        ax.plot(positions, wide["epoch time"], "k_", ms=28, mew=2, label="epoch time (measured step)")
    ax.set_xticks(positions, [f"{v:g}" for v in wide.index])
    ax.set_xlabel(x)
    if measured_max is not None and (wide.index > measured_max).any() and (wide.index <= measured_max).any():
        ax.axvline(int((wide.index <= measured_max).sum()) - 0.5, color="#888888", ls="--", lw=1)
        ax.set_xlabel(f"{x}  (left of the dashed line: measured; right: predicted)")
    ax.set_ylabel(f"seconds per {per}")
    ax.set_title("breakdown (sums of GPU activity; streams may overlap)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return fig


def tradeoff_figure(table: pd.DataFrame, x: str, max_time: float | None, max_cost: float | None,
                    cost_label: str, epochs: float = 1.0, layout=None) -> Figure:
    """Time and cost vs ranks with the deadline, budget and overlap regions shaded (paper Fig. 4);
    without limits, the two curves only (``table`` then needs total_time and total_cost). With a
    ``layout`` (see :func:`mark_node_boundaries`) the node boundaries are marked."""
    fig, (ax,) = _figure(width=7.2, height=4.2)
    table = table.sort_values(x)
    xs = table[x].to_numpy(float)
    longest = float(np.nanmax(table["total_time"])) if len(table) else 0.0
    scale, unit = (1.0, "seconds") if longest < 120 else (60.0, "minutes") if longest < 7200 else (3600.0, "hours")
    ax.plot(xs, table["total_time"] / scale, color=COLORS["computation"], lw=2, label="training time")
    ax.set_xlabel(x)
    ax.set_ylabel(f"{unit} for {epochs:g} epoch(s)", color=COLORS["computation"])
    ax2 = ax.twinx()
    ax2.plot(xs, table["total_cost"], color=COLORS["communication"], lw=2, label="cost")
    ax2.set_ylabel(f"{cost_label} for {epochs:g} epoch(s)", color=COLORS["communication"])
    if max_time is not None:
        ax.axhline(max_time / scale, color=COLORS["computation"], ls="--", lw=1)
    if max_cost is not None:
        ax2.axhline(max_cost, color=COLORS["communication"], ls="--", lw=1)
    if max_time is not None or max_cost is not None:
        _shade(ax, xs, table["time_ok"].to_numpy(bool), "//", COLORS["computation"], "meets the deadline")
        _shade(ax, xs, table["cost_ok"].to_numpy(bool), "\\\\", COLORS["communication"], "meets the budget")
        _shade(ax, xs, table["valid"].to_numpy(bool), None, "#55a868", "meets both", alpha=0.25)
    if len(xs):
        mark_node_boundaries(ax, layout, *ax.get_xlim())
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=len(handles))
    ax.grid(alpha=0.3)
    ax.set_title("time/cost trade-off")
    return fig


def _shade(ax, xs, ok, hatch, color, label, alpha=0.0) -> None:
    step = np.min(np.diff(xs)) / 2 if len(xs) > 1 else 0.5
    first = True
    for start, end in _runs(ok):
        ax.axvspan(xs[start] - step, xs[end] + step, hatch=hatch, facecolor=color if alpha else "none",
                   edgecolor=color, alpha=alpha or 0.35, lw=0, label=label if first else None)
        first = False


def _runs(mask: np.ndarray):
    start = None
    for i, flag in enumerate(list(mask) + [False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            yield start, i - 1
            start = None


def bottleneck_figure(table: pd.DataFrame, per: str, top: int = 10) -> Figure:
    """Predicted time of the top regions at the target point, coloured by category."""
    rows = table.head(top).iloc[::-1]
    fig, (ax,) = _figure(width=7.2, height=0.35 * max(len(rows), 3) + 1.2)
    labels = [f"#{r['rank']} {_short(r['region'])}  {r['growth']}" for _, r in rows.iterrows()]
    ax.barh(np.arange(len(rows)), rows["predicted"], color=[COLORS.get(c, "#999999") for c in rows["category"]])
    ax.set_yticks(np.arange(len(rows)), labels, fontsize=8)
    ax.set_xlabel(f"predicted seconds per {per}")
    ax.set_title("top regions by growth (then share)")
    ax.grid(alpha=0.3, axis="x")
    return fig


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def evaluation_figure(errors: pd.DataFrame, x: str, quantity: str = "epoch time") -> Figure:
    """Percentage error of the time-per-epoch model at modeling and evaluation points (paper Fig. 5)."""
    rows = errors[(errors["model_type"] == "application") & (errors["name"] == quantity)].sort_values(x)
    fig, (ax,) = _figure()
    colors = [EVAL_COLOR if role == "evaluation" else COLORS["computation"] for role in rows["role"]]
    positions = np.arange(len(rows))
    ax.bar(positions, rows["error_pct"], color=colors)
    ax.plot(positions, rows["spread_pct"], "k_", ms=18, mew=1.5, label="measured repetition spread")
    ax.set_xticks(positions, [f"{v:g}" for v in rows[x]])
    ax.set_xlabel(f"{x}  (blue: modeling points, red: evaluation points)")
    ax.set_ylabel("percentage error")
    ax.set_title(f"{quantity}: model accuracy and predictive power")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return fig


def figure_bytes(fig: Figure, fmt: str = "png", dpi: int = 110) -> bytes:
    """The figure rendered with the Agg/SVG backends (no display needed)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi)
    return buffer.getvalue()


def save_figure(fig: Figure, directory, name: str, formats=("png", "svg")) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = directory / f"{name}.{fmt}"
        path.write_bytes(figure_bytes(fig, fmt))
        paths.append(path)
    return paths
