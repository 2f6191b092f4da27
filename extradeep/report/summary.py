"""The terminal report of `extradeep model`: epoch models, breakdown, predictions, bottlenecks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.analysis.core import Analysis, primary_quantity
from extradeep.analysis.epoch import BREAKDOWN, EPOCH_TIME, QUANTITIES, SKIP_WARN, quantity_label
from extradeep.analysis.points import format_point
from extradeep.columns import CATEGORY, COST, METRIC, PART_IDLE, PREDICTED, RANK, REGION, VALUE
from extradeep.report.text import (
    format_interval,
    format_pct,
    format_value,
    points_text,
    render_table,
    section,
    shorten,
    wrap_formula,
)

NAME_WIDTH = 44
FORMULA_WIDTH = 80  # a longer model wraps at its terms (the epoch-time formula runs to 300 characters)


def header(analysis: Analysis, n_exports: int | None = None) -> str:
    points = analysis.points
    reps = int(analysis.application_points["n_reps"].max()) if not analysis.application_points.empty else None
    lines = [
        f"{len(points)} configurations ({points_text(points, analysis.params)})"
        + (f", {reps} repetition(s) each" if reps else "")
        + (f", {n_exports} exports" if n_exports else "")
        + f"; {analysis.scaling} scaling"
    ]
    ds = analysis.dataset
    if ds is not None:
        lines.append(
            f"Values per epoch: {ds.train_samples:,.0f} training + {ds.val_samples:,.0f} validation "
            f"samples, batch {ds.batch_per_rank} per rank, G = {ds.gpus_param}, M = {ds.model_parallel}"
            + (", data sets grow with G (weak scaling)" if ds.weak_scaling else "")
        )
        n_t, n_v = ds.steps_per_epoch(points, analysis.fixed)
        first, last = format_point(points.iloc[0], analysis.params), format_point(points.iloc[-1], analysis.params)
        lines.append(
            f"Steps per epoch n_t = floor((D_t/(G/M))/B), n_v likewise: n_t = {n_t[0]}, n_v = {n_v[0]} at "
            f"{first} .. n_t = {n_t[-1]}, n_v = {n_v[-1]} at {last}"
        )
    elif analysis.per == "step":
        lines.append("Values per training step (give --train-samples and --batch-size for per-epoch values)")
    else:
        lines.append("Values as measured (a plain measurement table)")
    return "\n".join(lines) + "\n"


def primary_line(analysis: Analysis) -> str:
    """Which model gives the time per epoch (step) in every answer, and why (one line)."""
    primary = analysis.primary
    return "" if primary is None else f"Time per {analysis.per} from one model: {primary.text}\n"


def application_section(analysis: Analysis) -> str:
    rows = []
    for quantity in QUANTITIES:
        found = analysis.application_models[analysis.application_models["quantity"] == quantity]
        if found.empty:
            continue
        row = found.iloc[0]
        if row["model"] is None:
            rows.append([quantity_label(quantity, analysis.per), f"(no model: {row['reason']})", "", ""])
        else:
            rows.append(
                [
                    quantity_label(quantity, analysis.per),
                    wrap_formula(row["formula"], FORMULA_WIDTH),
                    row["growth"],
                    format_pct(row["smape"], 2),
                ]
            )
    title = (
        f"Application models per {analysis.per} (seconds; p = {analysis.ranks_param}"
        + ("; fitted per step, times the steps per epoch n_t, n_v" if analysis.per == "epoch" else "")
        + (
            f"; parts kept within the {quantity_label(EPOCH_TIME, analysis.per)}"
            if analysis.model(EPOCH_TIME) is not None
            else ""
        )
        + ")"
    )
    return section(title, render_table(["quantity", "model", "growth", "SMAPE"], rows, "llll"))


def measured_section(analysis: Analysis, level: float) -> str:
    """Measured medians (repetition range) next to the model at every modeled point."""
    quantity = primary_quantity(analysis)
    model = analysis.model(quantity)
    pts = analysis.application_points
    wide = pts.pivot_table(index=analysis.params, columns="quantity", values=VALUE)
    rows = []
    for _, r in pts[pts["quantity"] == quantity].iterrows():
        X = r[analysis.params].to_numpy(float)
        X = X[0] if len(analysis.params) == 1 else X.reshape(1, -1)
        predicted = float(np.asarray(model.predict(X)).reshape(-1)[0])
        key = tuple(r[analysis.params]) if len(analysis.params) > 1 else r[analysis.params[0]]
        share = (
            wide.loc[key, PART_IDLE] / wide.loc[key, EPOCH_TIME]
            if {"idle", EPOCH_TIME} <= set(wide.columns)
            else np.nan
        )
        rows.append(
            [
                format_point(r, analysis.params),
                format_value(r[VALUE]),
                f"{format_value(r['rep_min'])} .. {format_value(r['rep_max'])}",
                format_value(predicted),
                format_pct((predicted - r[VALUE]) / r[VALUE] * 100, 2),
                *[format_value(wide.loc[key, c]) if c in wide.columns else "n/a" for c in BREAKDOWN],
                format_pct(share * 100),
            ]
        )
    headers = [
        "point",
        f"{quantity_label(quantity, analysis.per)} measured",
        "repetitions",
        "model",
        "error",
        *BREAKDOWN,
        "idle share",
    ]
    return section(f"Measured (median of repetitions) vs model, per {analysis.per}", render_table(headers, rows))


def prediction_section(analysis: Analysis, predictions: pd.DataFrame, level: float, cost_unit: str | None) -> str:
    quantity = primary_quantity(analysis)
    main = predictions[predictions["quantity"] == quantity].reset_index(drop=True)
    wide = predictions.pivot_table(index=analysis.params, columns="quantity", values="T")
    measured_idle = analysis.application_points.loc[analysis.application_points["quantity"] == "idle", VALUE]
    # Idle that was 0 at every measured point has no model; it stays 0 rather than unknown.
    no_idle = 0.0 if len(measured_idle) and not (measured_idle > 0).any() else np.nan
    rows = []
    for _, r in main.iterrows():
        key = tuple(r[analysis.params]) if len(analysis.params) > 1 else r[analysis.params[0]]
        idle = wide.loc[key, PART_IDLE] / r["T"] if PART_IDLE in wide.columns and r["T"] > 0 else no_idle
        row = [
            format_point(r, analysis.params),
            *([nodes_text(r["nodes"])] if "nodes" in main.columns else []),
            format_interval(r["T"], r["T_lo"], r["T_hi"]),
            f"{r['speedup']:.2f}",
            f"{r['efficiency']:.2f}",
            format_pct(r["runtime_change_pct"]),
            format_pct(idle * 100),
        ]
        if "samples" in main.columns:
            row.append(samples_text(r))
        if cost_unit:
            row.append(f"{r[COST]:.4g}")
        rows.append(row)
    headers = [
        "point",
        *(["nodes"] if "nodes" in main.columns else []),
        f"{quantity_label(quantity, analysis.per)} [{level:.0%} interval]",
        "speedup",
        "efficiency",
        "runtime change",
        "idle share",
    ]
    if "samples" in main.columns:
        headers.append("samples/epoch")
    if cost_unit:
        headers.append(f"{cost_unit}/{analysis.per}")
    title = (
        f"Predictions per {analysis.per} ({analysis.scaling} scaling; baseline "
        f"{format_point(analysis.baseline, analysis.params)}"
        + (f"; nodes of {analysis.gpus_per_node} GPUs" if "nodes" in main.columns else "")
        + ")"
    )
    return section(title, render_table(headers, rows))


def nodes_text(nodes: float) -> str:
    """The nodes a predicted point spans ("-" when unknown)."""
    return "-" if not np.isfinite(nodes) else f"{nodes:.0f}"


def samples_text(row) -> str:
    """Training samples one epoch processes, with the share floor() in n_t leaves out when that is
    more than SKIP_WARN (``!`` marks it)."""
    text = f"{row['samples']:,.0f}"
    return text + f" (! {row['skipped_share']:.1%} skipped)" if row["skipped_share"] > SKIP_WARN else text


def derived_section(analysis: Analysis, derived: pd.DataFrame) -> str:
    """Models of speedup and efficiency of the primary quantity (paper Eq. 12)."""
    quantity = primary_quantity(analysis)
    rows = [
        [
            r["derived"].replace("_pct", " %").replace("_", " "),
            wrap_formula(r["formula"], FORMULA_WIDTH) if r["formula"] else f"(no model: {r['reason']})",
            r["growth"],
            format_pct(r["smape"], 2),
        ]
        for _, r in derived[derived["quantity"] == quantity].iterrows()
    ]
    if not rows:
        return ""
    at = derived["at"].iloc[0] if "at" in derived.columns else ""
    title = (
        f"Models of the {analysis.scaling}-scaling speedup and efficiency of {quantity_label(quantity, analysis.per)} "
        f"(paper Eq. 12; fitted to the values of the table above at the measured {analysis.ranks_param}"
        + (f", {at}" if at else "")
        + ")"
    )
    return section(title, render_table(["quantity", "model", "growth", "SMAPE"], rows, "llll"))


def bottleneck_section(table: pd.DataFrame, target: dict, params: list[str], per: str) -> str:
    if table.empty:
        return section("Top regions by growth", "  (no region could be modeled)")
    rows = [
        [
            int(r[RANK]),
            shorten(r[REGION], NAME_WIDTH),
            r[CATEGORY],
            r["growth"],
            wrap_formula(r["formula"], 60),
            format_value(r[PREDICTED]),
            format_pct(r["share_of_category"] * 100),
        ]
        for _, r in table.iterrows()
    ]
    title = f"Top regions by growth, then by share at {format_point(target, params)} (GPU time per {per})"
    headers = ["#", "region", "category", "growth", "model", "predicted", "of category"]
    return section(title, render_table(headers, rows, "rllllrr"))


def region_section(models: pd.DataFrame, top: int) -> str:
    """Models of plain region tables (Extra-P text input): every region and metric."""
    rows = [
        [
            shorten(str(r[REGION]), NAME_WIDTH),
            r[METRIC],
            wrap_formula(r["formula"], FORMULA_WIDTH) if r["formula"] else f"(no model: {r['reason']})",
            r["growth"],
            format_pct(r["smape"], 2),
        ]
        for _, r in models.head(top).iterrows()
    ]
    return section(
        f"Region models ({len(models)} in all)",
        render_table(["region", "metric", "model", "growth", "SMAPE"], rows, "lllll"),
    )


def notes_section(notes: list[str]) -> str:
    return section("Notes", "\n".join(f"  - {n}" for n in notes)) if notes else ""
