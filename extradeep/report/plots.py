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
from matplotlib.patches import Patch

from extradeep.analysis.core import Analysis, primary_quantity
from extradeep.analysis.epoch import EPOCH_TIME
from extradeep.analysis.points import point_grid
from extradeep.columns import CATEGORY, COMMUNICATION, COMPUTATION, NAME, RANK, REGION, ROLE, VALUE

COLORS = {
    "computation": "#4c72b0",
    "communication": "#dd8452",
    "memory": "#55a868",
    "idle": "#c0c0c0",
    "epoch time": "#222222",
    "gpu total": "#8172b3",
}
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


def extrapolation_marker(ax, measured_max: float, x_end: float | None = None) -> None:
    """A dotted line at the largest measured (modeled) configuration; with ``x_end`` beyond it, the
    extrapolated range up to ``x_end`` shaded."""
    ax.axvline(measured_max, color="#888888", ls=":", lw=1)
    if x_end is not None and x_end > measured_max:
        ax.axvspan(measured_max, x_end, color="0.5", alpha=0.10, lw=0, label="extrapolation")


def model_curve(ax, x, y, lo, hi, color, label: str, band_label: str | None = None) -> None:
    """A model's curve over ``x`` with its prediction band [lo, hi] (clipped at 0: no negative times)."""
    ax.fill_between(
        x,
        np.maximum(np.asarray(lo, float).reshape(-1), 0.0),
        np.maximum(np.asarray(hi, float).reshape(-1), 0.0),
        color=color,
        alpha=0.15,
        lw=0,
        label=band_label,
    )
    ax.plot(x, np.asarray(y, float).reshape(-1), color=color, lw=1.6, label=label)


def measured_points(ax, x, y, low, high, color, label: str | None, marker: str = "o", hollow: bool = False) -> None:
    """Measured medians with bars from the smallest to the largest repetition (hollow: evaluation
    points that modeling did not use)."""
    y = np.asarray(y, float)
    if not len(y):
        return
    err = np.vstack([y - np.asarray(low, float), np.asarray(high, float) - y]).clip(min=0)
    ax.errorbar(
        x,
        y,
        yerr=err,
        fmt=marker,
        color=color,
        ms=5,
        capsize=3,
        mfc="white" if hollow else color,
        label=label,
        zorder=3,
    )


def model_panel(
    ax,
    analysis: Analysis,
    quantity: str,
    x_max: float,
    evaluation: pd.DataFrame | None = None,
    fixed: dict | None = None,
    level: float = 0.95,
    transform=None,
    ylabel: str = "",
) -> None:
    """Measured medians with repetition range, the model curve, its prediction band and any
    evaluation points (measured, not used for modeling) on one axis (paper Fig. 3)."""
    transform = transform or (lambda frame, y: y)
    model = analysis.model(quantity)
    x = analysis.ranks_param
    color = COLORS.get(quantity, "#222222")
    if model is not None:
        line = line_grid(analysis, x_max, fixed)
        lo, hi = model.interval(_X(line, analysis.params), level=level)
        y = model.predict(_X(line, analysis.params))
        model_curve(
            ax,
            line[x],
            transform(line, y),
            transform(line, np.maximum(lo, 0.0)),
            transform(line, np.maximum(hi, 0.0)),
            color,
            f"model: {quantity}",
            f"{level:.0%} prediction interval",
        )
    app_points = analysis.application_points
    measured = _on_line(app_points[app_points["quantity"] == quantity], analysis, fixed)
    _measured_rows(ax, measured, x, transform, color, "measured (modeling)", "o")
    if evaluation is not None and not evaluation.empty:
        ev = _on_line(evaluation[evaluation["quantity"] == quantity], analysis, fixed)
        _measured_rows(ax, ev, x, transform, EVAL_COLOR, "measured (evaluation)", "s")
    extrapolation_marker(ax, float(analysis.points[x].max()))
    mark_node_boundaries(ax, analysis, *ax.get_xlim())
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    zero_floor(ax)
    ax.grid(alpha=0.3)


def _measured_rows(ax, rows: pd.DataFrame, x: str, transform, color, label, marker) -> None:
    if rows.empty:
        return
    measured_points(
        ax,
        rows[x],
        transform(rows, rows[VALUE].to_numpy(float)),
        transform(rows, rows["rep_min"].to_numpy(float)),
        transform(rows, rows["rep_max"].to_numpy(float)),
        color,
        label,
        marker,
    )


def epoch_figure(
    analysis: Analysis,
    x_max: float,
    evaluation: pd.DataFrame | None = None,
    cost_of=None,
    cost_label: str = "cost",
    fixed: dict | None = None,
    level: float = 0.95,
) -> Figure:
    """Time per epoch (and, with ``cost_of(points, seconds)``, cost per epoch) vs ranks."""
    quantity = primary_quantity(analysis)
    fig, axes = _figure(ncols=2 if cost_of else 1)
    model_panel(axes[0], analysis, quantity, x_max, evaluation, fixed, level, ylabel=f"seconds per {analysis.per}")
    axes[0].set_title(f"time per {analysis.per}" if quantity == EPOCH_TIME else f"{quantity} per {analysis.per}")
    axes[0].legend(fontsize=8, loc="best")
    if cost_of:
        model_panel(
            axes[1],
            analysis,
            quantity,
            x_max,
            evaluation,
            fixed,
            level,
            transform=cost_of,
            ylabel=f"{cost_label} per {analysis.per}",
        )
        axes[1].set_title(f"{cost_label} per {analysis.per}")
        if analysis.gpus_per_node:
            axes[1].legend(fontsize=8, loc="best")
    return fig


def scaling_panels(
    ax_speedup,
    ax_efficiency,
    table: pd.DataFrame,
    x: str,
    measured_max: float,
    *,
    by: str = "quantity",
    highlight: str = EPOCH_TIME,
    ideal_speedup: bool = True,
    x_end: float | None = None,
    layout=None,
) -> None:
    """Speedup and efficiency of each ``by`` series of a scaling table (extradeep.analysis.scaling)
    vs ``x``, with the ideal lines; either axis may be None. The ``highlight`` series is drawn
    thicker; with ``x_end``, the extrapolated range is shaded (else a dotted line marks it); with a
    ``layout`` (see :func:`mark_node_boundaries`), the node boundaries are marked."""
    mode = table.attrs.get("scaling", "strong")
    xs = np.sort(table[x].unique())
    panels = [(ax, col) for ax, col in ((ax_speedup, "speedup"), (ax_efficiency, "efficiency")) if ax is not None]
    for ax, col in panels:
        extrapolation_marker(ax, measured_max, x_end)
        for n, (name, rows) in enumerate(table.groupby(by, sort=False)):
            if name == "idle":
                continue
            rows = rows.sort_values(x)
            ax.plot(
                rows[x],
                rows[col],
                color=COLORS.get(name, f"C{n % 10}"),
                lw=2.2 if name == highlight else 1.2,
                label=name,
            )
        if len(xs) and (col == "efficiency" or ideal_speedup):  # on top: a series may follow it exactly
            ideal = np.ones_like(xs, dtype=float) if col == "efficiency" else xs / xs[0]
            ax.plot(xs, ideal, color="#555555", ls="--", lw=1, label="ideal")
        if len(xs):
            mark_node_boundaries(ax, layout, *ax.get_xlim())
        title = f"{'scaled ' if mode == 'weak' and col == 'speedup' else ''}{col}"
        base = f", baseline {x} = {xs[0]:g}" if len(xs) else ""
        ax.set_title(f"{title} ({mode} scaling{base})", fontsize=10)
        ax.set_xlabel(x)
        ax.set_ylabel(col)
        ax.grid(alpha=0.3)
        zero_floor(ax)
        ax.legend(fontsize=8)


def scaling_figure(scaling: pd.DataFrame, x: str, measured_max: float, layout=None) -> Figure:
    """Speedup and efficiency vs ranks for the quantities in ``scaling`` (a scaling/prediction
    table); with a ``layout`` (see :func:`mark_node_boundaries`) the node boundaries are marked."""
    fig, (ax_s, ax_e) = _figure(ncols=2)
    scaling_panels(ax_s, ax_e, scaling.sort_values("quantity"), x, measured_max, layout=layout)
    return fig


def time_unit(longest: float) -> tuple[float, str]:
    """(divisor, name) that shows times up to ``longest`` seconds in readable numbers."""
    return (1.0, "seconds") if longest < 120 else (60.0, "minutes") if longest < 7200 else (3600.0, "hours")


def tradeoff_panels(
    ax_time,
    ax_cost,
    table: pd.DataFrame,
    x: str,
    max_time: float | None,
    max_cost: float | None,
    cost_label: str,
    epochs: float = 1.0,
    *,
    per: str = "epoch",
    twin: bool = False,
    best: pd.Series | None = None,
    layout=None,
) -> None:
    """Time and cost vs ``x`` (paper Fig. 4b) from a budget table (total_time, total_cost, and with
    limits time_ok, cost_ok, valid): the deadline and budget as dashed lines, the configurations
    that meet each hatched, those that meet both shaded, and ``best`` starred. ``twin``: the cost
    axis is a twin of the time axis (one plot), so the shading is drawn once. With a ``layout`` (see
    :func:`mark_node_boundaries`) the node boundaries are marked."""
    table = table.sort_values(x)
    xs = table[x].to_numpy(float)
    scale, unit = time_unit(float(np.nanmax(table["total_time"])) if len(table) else 0.0)
    span = f"for {epochs:g} epoch(s)" if per == "epoch" else f"per {per}"
    for ax, col, limit, name, color, divisor in (
        (ax_time, "total_time", max_time, "deadline", COLORS[COMPUTATION], scale),
        (ax_cost, "total_cost", max_cost, "budget", COLORS[COMMUNICATION], 1.0),
    ):
        ax.plot(xs, table[col] / divisor, color=color, lw=2, label="training time" if ax is ax_time else "cost")
        if limit is not None:
            ax.axhline(limit / divisor, color=color, ls="--", lw=1, label=name)
        if best is not None:
            ax.plot(
                [best[x]],
                [best[col] / divisor],
                marker="*",
                ms=16,
                color="#ffb000",
                mec="k",
                ls="none",
                zorder=5,
                label="best (efficiency)" if ax is ax_time or not twin else None,
            )
        ax.set_xlabel(x)
        ax.set_ylabel(f"{unit if ax is ax_time else cost_label} {span}", color=color)
        if not twin:
            zero_floor(ax)
            ax.grid(alpha=0.3)
    if max_time is not None or max_cost is not None:
        _shade(ax_time, xs, table["time_ok"].to_numpy(bool), "//", COLORS[COMPUTATION], "meets the deadline")
        _shade(
            ax_time if twin else ax_cost,
            xs,
            table["cost_ok"].to_numpy(bool),
            "\\\\",
            COLORS[COMMUNICATION],
            "meets the budget",
        )
        for ax in (ax_time,) if twin else (ax_time, ax_cost):
            _shade(ax, xs, table["valid"].to_numpy(bool), None, "#55a868", "meets both", alpha=0.25)
    if len(xs):
        for ax in (ax_time,) if twin else (ax_time, ax_cost):
            mark_node_boundaries(ax, layout, *ax.get_xlim())
    if twin:
        ax_time.grid(alpha=0.3)


def tradeoff_figure(
    table: pd.DataFrame,
    x: str,
    max_time: float | None,
    max_cost: float | None,
    cost_label: str,
    epochs: float = 1.0,
    layout=None,
) -> Figure:
    """Time and cost vs ranks with the deadline, budget and overlap regions shaded (paper Fig. 4);
    without limits, the two curves only (``table`` then needs total_time and total_cost). With a
    ``layout`` (see :func:`mark_node_boundaries`) the node boundaries are marked."""
    fig, (ax,) = _figure(width=7.2, height=4.2)
    ax2 = ax.twinx()
    tradeoff_panels(ax, ax2, table, x, max_time, max_cost, cost_label, epochs, twin=True, layout=layout)
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=min(len(handles), 4))
    ax.set_title("time/cost trade-off")
    return fig


def _shade(ax, xs, ok, hatch, color, label, alpha=0.0) -> None:
    step = np.min(np.diff(xs)) / 2 if len(xs) > 1 else 0.5
    first = True
    for start, end in _runs(ok):
        ax.axvspan(
            xs[start] - step,
            xs[end] + step,
            hatch=hatch,
            facecolor=color if alpha else "none",
            edgecolor=color,
            alpha=alpha or 0.35,
            lw=0,
            label=label if first else None,
        )
        first = False


def _runs(mask: np.ndarray):
    start = None
    for i, flag in enumerate(list(mask) + [False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            yield start, i - 1
            start = None


BOTTLENECK_VALUES = {"predicted": "predicted seconds per {per}", "share_of_total": "predicted share of GPU time [%]"}


def bottleneck_panel(
    ax, table: pd.DataFrame, per: str, top: int = 10, value: str = "predicted", where: str = ""
) -> int:
    """Bars of the ``top`` regions of a bottleneck table (extradeep.analysis.bottlenecks), first on
    top, coloured by category: their predicted time (``value="predicted"``) or share of all GPU work
    (``"share_of_total"``, in %) at the target point ``where``. Returns the number of bars."""
    rows = table.head(top).iloc[::-1]
    y = np.arange(len(rows))
    scale = 100.0 if value.startswith("share") else 1.0
    ax.barh(y, scale * rows[value].to_numpy(float), color=[COLORS.get(c, "#999999") for c in rows[CATEGORY]])
    ax.set_yticks(
        y, [f"#{r} {_short(n, 40)}  [{g}]" for r, n, g in zip(rows[RANK], rows[REGION], rows["growth"])], fontsize=8
    )
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    ax.set_xlabel(BOTTLENECK_VALUES[value].format(per=per))
    ax.set_title("top regions by growth, then share" + (f" at {where}" if where else ""), fontsize=10)
    shown = [c for c in ("computation", "communication", "memory") if (rows[CATEGORY] == c).any()]
    ax.legend(handles=[Patch(color=COLORS[c], label=c) for c in shown], fontsize=8, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    return len(rows)


BAR_INCHES = 0.3  # height per bar of the bottleneck chart, so labels never squeeze


def bottleneck_figure(table: pd.DataFrame, per: str, top: int = 10) -> Figure:
    """Predicted time of the top regions at the target point, coloured by category."""
    fig, (ax,) = _figure(width=7.2, height=BAR_INCHES * max(min(len(table), top), 3) + 1.4)
    bottleneck_panel(ax, table, per, top)
    return fig


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def evaluation_figure(errors: pd.DataFrame, x: str, quantity: str = "epoch time") -> Figure:
    """Percentage error of the time-per-epoch model at modeling and evaluation points (paper Fig. 5)."""
    rows = errors[(errors["model_type"] == "application") & (errors[NAME] == quantity)].sort_values(x)
    fig, (ax,) = _figure()
    colors = [EVAL_COLOR if role == "evaluation" else COLORS[COMPUTATION] for role in rows[ROLE]]
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


def zero_floor(ax) -> None:
    """Times and costs start at zero on a linear axis; a log axis (the GUI's log-y toggle) keeps
    its positive range (a zero limit there is ignored with a warning on the user's terminal)."""
    if ax.get_yscale() == "linear":
        ax.set_ylim(bottom=0)
