"""The cost-per-epoch budgeting report: one self-contained HTML file (figures embedded as PNG)."""

from __future__ import annotations

import base64
import datetime as dt
import html
from dataclasses import dataclass, field

import pandas as pd

from extradeep import __version__
from extradeep.analysis.budget import BudgetResult
from extradeep.analysis.core import Analysis, extrapolation_notes, prediction_table, primary_quantity
from extradeep.analysis.cost import CostSettings, amount_text, cost_of
from extradeep.analysis.epoch import QUANTITIES, QUANTITY_HELP, quantity_label
from extradeep.analysis.layout_text import layout_source_text
from extradeep.analysis.points import format_point, format_seconds
from extradeep.columns import CATEGORY, COST, NAME, PREDICTED, RANK, REGION, VALUE
from extradeep.report import plots
from extradeep.report.breakdown_plot import breakdown_figure
from extradeep.report.budget_text import best_rows
from extradeep.report.evaluation_text import EVALUATION_HEADERS, evaluation_rows
from extradeep.report.plan import plan_section
from extradeep.report.summary import nodes_text, samples_text
from extradeep.report.text import format_pct, format_value

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em} h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em;max-width:100%}
td,th{border:1px solid #ddd;padding:.25em .6em;vertical-align:top;overflow-wrap:break-word}
td.wrap{overflow-wrap:anywhere;min-width:12em}
th{background:#f4f4f4;text-align:left} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.formula{font-family:ui-monospace,monospace;font-size:.85em;overflow-wrap:anywhere;min-width:16em}
code{background:#f4f4f4;padding:0 .2em} img{max-width:100%} .note{color:#7a4b00} .fail{color:#b00020}
@media print{body{max-width:none;margin:0;padding:0;font-size:10pt} table{font-size:8pt;width:100%}
tr,img{break-inside:avoid} h2{break-after:avoid}}
"""
CLIP = 70  # characters of a name or formula shown in a table cell; the full text is in its title


@dataclass
class ReportInputs:
    """Everything the report shows; optional parts (budget, evaluation) may be None."""

    analysis: Analysis
    predictions: pd.DataFrame
    bottlenecks: pd.DataFrame
    cost: CostSettings
    x_max: float
    level: float = 0.95
    provenance: pd.DataFrame | None = None
    budget: BudgetResult | None = None
    errors: pd.DataFrame | None = None
    evaluation_points: pd.DataFrame | None = None
    title: str = "Cost per epoch: budgeting report"
    figures: dict = field(default_factory=dict)  # name -> Figure, filled while building
    plan: pd.DataFrame | None = None  # MeasurementAdvisor.propose(): "What to profile next"
    optimization: object = None  # a fitted predictor.optimize.StrategySearch: the "Optimisation" section


def _table(
    headers: list[str],
    rows: list[list],
    numeric: set[int] | None = None,
    clip: set[int] = frozenset(),
    formula: set[int] = frozenset(),
) -> str:
    """An HTML table; columns in ``clip`` show at most CLIP characters (the full text in a tooltip),
    columns in ``formula`` are set in a monospace font. Long cells wrap (CSS) rather than widen the page."""
    numeric = numeric if numeric is not None else set(range(1, len(headers)))
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(_cell(str(c), i in numeric, i in clip, i in formula) for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(text: str, numeric: bool, clip: bool, formula: bool) -> str:
    classes = " ".join(c for c, on in (("num", numeric), ("wrap", clip and not formula), ("formula", formula)) if on)
    attrs = f' class="{classes}"' if classes else ""
    if clip and len(text) > CLIP:
        attrs += f' title="{html.escape(text)}"'
        text = text[: CLIP - 1] + "\u2026"
    return f"<td{attrs}>{html.escape(text)}</td>"


def _image(inputs: ReportInputs, name: str, fig, alt: str) -> str:
    inputs.figures[name] = fig
    data = base64.b64encode(plots.figure_bytes(fig, "png")).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def configuration_section(inputs: ReportInputs) -> str:
    a = inputs.analysis
    points = a.points
    rows = [[format_point(r, a.params)] for _, r in points.iterrows()]
    headers = ["configuration"]
    if a.dataset is not None:
        n_t, n_v = a.dataset.steps_per_epoch(points, a.fixed)
        headers += ["training steps n_t", "validation steps n_v"]
        rows = [r + [int(t), int(v)] for r, t, v in zip(rows, n_t, n_v)]
    if not a.application_points.empty:
        reps = a.application_points.groupby(a.params)["n_reps"].max()
        headers.append("repetitions")
        rows = [r + [int(n)] for r, n in zip(rows, reps.to_numpy())]
    if inputs.provenance is not None and not inputs.provenance.empty and set(a.params) <= set(inputs.provenance):
        files = inputs.provenance.groupby(a.params).size()
        keys = [tuple(r) if len(a.params) > 1 else r[0] for r in points[a.params].itertuples(index=False)]
        headers.append("exports")
        rows = [r + [int(files.get(k, 0))] for r, k in zip(rows, keys)]
    ds = a.dataset
    dataset = (
        "<p>Dataset: no sizes given, so every value is <b>per training step</b>.</p>"
        if ds is None
        else f"<p>Dataset: {ds.train_samples:,.0f} training and {ds.val_samples:,.0f} validation samples, "
        f"batch {html.escape(str(ds.batch_per_rank))} per rank, data-parallel degree G = "
        f"{html.escape(str(ds.gpus_param))}, model-parallel degree M = {html.escape(str(ds.model_parallel))}"
        f"{'; the data sets grow with G (weak scaling)' if ds.weak_scaling else ''}.</p>"
    )
    return (
        f"<h2>Configurations and dataset</h2>{_table(headers, rows)}{dataset}"
        f"<p>Cost: {html.escape(inputs.cost.describe())}.</p>"
    )


def epoch_section(inputs: ReportInputs) -> str:
    a = inputs.analysis
    params = a.params
    fig = plots.epoch_figure(
        a,
        inputs.x_max,
        inputs.evaluation_points,
        cost_of=lambda frame, y: cost_of(y, frame, inputs.cost, params),
        cost_label=inputs.cost.unit,
        level=inputs.level,
    )
    rows = []
    for q in QUANTITIES:
        found = a.application_models[a.application_models["quantity"] == q]
        if not found.empty:
            r = found.iloc[0]
            rows.append(
                [
                    quantity_label(q, a.per),
                    r["formula"] or f"no model: {r['reason']}",
                    r["growth"],
                    format_pct(r["smape"], 2),
                    QUANTITY_HELP[q],
                ]
            )
    quantity = primary_quantity(a)
    pred = inputs.predictions[inputs.predictions["quantity"] == quantity]
    extra = [] if inputs.cost.unit == "core-hours" else ["cost"]
    samples = "samples" in pred.columns
    nodes = "nodes" in pred.columns
    prow = [
        [
            format_point(r, params),
            *([nodes_text(r["nodes"])] if nodes else []),
            format_value(r["T"]),
            f"{format_value(r['T_lo'])} .. {format_value(r['T_hi'])}",
            *[f"{r[c]:.4g}" for c in (*extra, "core_hours", "gpu_hours")],
            *([samples_text(r)] if samples else []),
        ]
        for _, r in pred.iterrows()
    ]
    return (
        f"<h2>Time and cost per {a.per}</h2>"
        + _image(inputs, "epoch", fig, f"{quantity} and cost per {a.per} vs {a.ranks_param}")
        + "<p>Points: median of the repetitions, bars: their range; line: model; band: "
        f"{inputs.level:.0%} prediction interval; dotted line: largest modeled configuration"
        + (
            f"; dash-dotted lines: node boundaries ({a.gpus_per_node} GPUs per node, "
            f"from the {layout_source_text(a.layout.get('source'))})"
            if a.gpus_per_node
            else ""
        )
        + ("; red squares: evaluation points not used for modeling" if inputs.evaluation_points is not None else "")
        + ".</p>"
        + (f"<p><b>One model answers:</b> {html.escape(a.primary.text)}.</p>" if a.primary is not None else "")
        + _table(["quantity", "model", "growth", "SMAPE", "what it is"], rows, numeric={3}, formula={1})
        + _table(
            [
                "configuration",
                *([f"nodes ({a.gpus_per_node} GPUs each)"] if nodes else []),
                quantity_label(quantity, a.per),
                f"{inputs.level:.0%} interval",
                *([inputs.cost.unit] if extra else []),
                "core-hours",
                "GPU-hours",
                *(["training samples per epoch"] if samples else []),
            ],
            prow,
        )
    )


def scaling_section(inputs: ReportInputs) -> str:
    a = inputs.analysis
    dense = plots.line_grid(a, inputs.x_max, None, n=60)
    table = prediction_table(a, dense, None, inputs.level)
    fig = plots.scaling_figure(table, a.ranks_param, float(a.points[a.ranks_param].max()), layout=a)
    quantity = primary_quantity(a)
    pred = inputs.predictions[inputs.predictions["quantity"] == quantity]
    rows = [
        [
            format_point(r, a.params),
            f"{r['speedup']:.2f}",
            f"{r['efficiency']:.2f}",
            format_pct(r["runtime_change_pct"]),
        ]
        for _, r in pred.iterrows()
    ]
    definition = (
        "strong scaling: speedup S = T(x1)/T(xk), efficiency E = S * x1/xk"
        if a.scaling == "strong"
        else "weak scaling: efficiency E = T(x1)/T(xk), scaled speedup = E * xk/x1"
    )
    return (
        "<h2>Speedup and efficiency</h2>"
        + _image(inputs, "scaling", fig, "speedup and efficiency")
        + f"<p>Derived from the models, not refitted; baseline {format_point(a.baseline, a.params)}; "
        f"{definition}; runtime change = (T(x1) - T(xk)) / T(x1) x 100 (the paper's Eq. 11).</p>"
        + _table(["configuration", "speedup", "efficiency", "runtime change"], rows)
    )


def tradeoff_section(inputs: ReportInputs) -> str:
    result = inputs.budget
    if result is None:
        return _tradeoff_without_limits(inputs)
    limits = result.limits
    fig = plots.tradeoff_figure(
        result.table,
        inputs.analysis.ranks_param,
        limits.max_time,
        limits.max_cost,
        result.cost_unit,
        limits.epochs,
        layout=inputs.analysis,
    )
    parts = ["<h2>Time/cost trade-off</h2>", _image(inputs, "tradeoff", fig, "time and cost trade-off")]
    asked = [
        f"at most {format_seconds(limits.max_time)}" if limits.max_time else "",
        f"at most {amount_text(limits.max_cost, result.cost_unit)}" if limits.max_cost else "",
    ]
    parts.append(f"<p>Limits for {limits.epochs:g} epoch(s): {html.escape(' and '.join(a for a in asked if a))}.</p>")
    if result.failure:
        parts.append(f'<p class="fail">No configuration is valid: {html.escape(result.failure)}.</p>')
    else:
        spans = "; ".join(
            f"{r['from']:g}" if r["from"] == r["to"] else f"{r['from']:g} to {r['to']:g}"
            for _, r in result.intervals.iterrows()
        )
        parts.append(f"<p>Valid {inputs.analysis.ranks_param}: {html.escape(spans)}.</p>")
        rows = best_rows(result.best, inputs.analysis.params)
        parts.append(
            _table(
                ["best by", "configuration", "time", result.cost_unit, "efficiency", "valid at interval's upper end"],
                rows,
                numeric={2, 3, 4},
            )
        )
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in result.notes]
    return "".join(parts)


def _tradeoff_without_limits(inputs: ReportInputs) -> str:
    a = inputs.analysis
    table = inputs.predictions[inputs.predictions["quantity"] == primary_quantity(a)]
    table = table.assign(total_time=table["T"], total_cost=table[COST])
    fig = plots.tradeoff_figure(table, a.ranks_param, None, None, inputs.cost.unit, layout=a)
    return (
        "<h2>Time/cost trade-off</h2>"
        + _image(inputs, "tradeoff", fig, "time and cost per epoch")
        + "<p>Per epoch, at the predicted configurations. Give --max-time and/or --max-cost (with "
        "--epochs) to shade the configurations that meet a deadline or a budget.</p>"
    )


def breakdown_section(inputs: ReportInputs) -> str:
    a = inputs.analysis
    measured = a.application_points.rename(columns={VALUE: "T"})
    combined = pd.concat([measured, inputs.predictions], ignore_index=True)
    fig = breakdown_figure(combined, a.ranks_param, a.per, float(a.points[a.ranks_param].max()))
    return (
        "<h2>Where the time goes</h2>"
        + _image(inputs, "breakdown", fig, "category breakdown")
        + "<p>Measured configurations and predictions. Computation, communication and memory are sums of "
        "GPU activity (communication includes MPI calls); idle is the step time no GPU activity covers. "
        "GPU work on concurrent streams counts once per stream, so the parts can add up to more than the "
        "epoch time: that part is hatched (overlap), and the stack minus it is the epoch time.</p>"
    )


def bottleneck_section(inputs: ReportInputs, top: int = 10) -> str:
    table = inputs.bottlenecks
    if table.empty:
        return ""
    a = inputs.analysis
    fig = plots.bottleneck_figure(table, a.per, top)
    rows = [
        [
            r[RANK],
            r[REGION],
            r[CATEGORY],
            r["growth"],
            r["formula"],
            format_value(r[PREDICTED]),
            format_pct(r["share_of_category"] * 100),
        ]
        for _, r in table.head(top).iterrows()
    ]
    target = format_point(inputs.predictions.iloc[-1], a.params) if not inputs.predictions.empty else ""
    return (
        "<h2>Top bottlenecks</h2>"
        + _image(inputs, "bottlenecks", fig, "top regions")
        + f"<p>Ranked by asymptotic growth of the runtime model, then by predicted time at {target}.</p>"
        + _table(
            ["#", "region", "category", "growth", "model", f"at {target}", "share of category"],
            rows,
            numeric={0, 5, 6},
            clip={1, 4},
            formula={4},
        )
    )


def evaluation_section(inputs: ReportInputs) -> str:
    errors = inputs.errors
    if errors is None or errors.empty:
        return ""
    a = inputs.analysis
    quantity = primary_quantity(a)
    fig = plots.evaluation_figure(errors, a.ranks_param, quantity)
    rows = errors[(errors["model_type"] == "application") & (errors[NAME] == quantity)].sort_values(a.ranks_param)
    table = evaluation_rows(rows, a.params)
    return (
        "<h2>Accuracy and predictive power</h2>"
        + _image(inputs, "evaluation", fig, "percentage errors")
        + _table(EVALUATION_HEADERS, table)
    )


def methods_section(inputs: ReportInputs) -> str:
    a = inputs.analysis
    opts = ", ".join(f"{k}={v}" for k, v in a.options.items()) or "defaults"
    per_epoch = (
        "Per-step values are turned into per-epoch values with the exact step counts n_t = "
        "floor((D_t/(G/M))/B) and n_v = floor((D_v/(G/M))/B) (paper Eq. 2-3): each quantity is modeled "
        "per step and phase with PMNF, then F(x) = n_t(x) V_t(x) + n_v(x) V_v(x) (Eq. 4). "
        if a.per == "epoch"
        else "No dataset sizes were given, so all values are per training step. "
    )
    text = (
        "<h2>Methods</h2><p>Each export holds a few steps of two epochs; the first epoch is a warm-up and is left "
        "out. For every region (kernel, memcpy, memset, MPI call, NVTX range, ...) the values of its events are "
        "summed per step (paper Eq. 1); the median is taken over the steps of a rank, then over ranks, then over "
        "repetitions; the range over repetitions gives the error bars. The time per epoch is the measured NVTX step "
        "duration (so it includes GPU idle time and overlap); computation, communication and memory are sums of "
        "the per-region medians of their categories (Eq. 6-10); idle is the step time that the union of all GPU "
        "activity intervals does not cover. "
        + per_epoch
        + "Models are Extra-P performance model normal forms chosen by leave-one-out cross-validated SMAPE "
        f"(modeler options: {html.escape(opts)}); prediction intervals are {inputs.level:.0%} intervals for one new "
        "measurement. The training step time is also modeled as the step without communication plus the "
        "communication minus its hidden part: proportional to it, capped at the largest measured overlap, or "
        "falling as the replayed trace of the largest modeled run shows once the communication outgrows the computation "
        "that hides it. The replayed rule predicts unless leave-one-out clearly prefers another (then the "
        "epoch-time interval spans all rules); the parts (computation, communication, memory, idle) are kept "
        "within the epoch time: communication is the composition's, the others share the rest, and gpu total "
        "is their sum. "
        "Speedup, efficiency and runtime change are computed by evaluating these models against "
        f"the baseline {html.escape(format_point(a.baseline, a.params))} ({a.scaling} scaling), never by refitting"
        + (
            "; speedup and efficiency compare time per training sample, because floor() in n_t makes some "
            "epochs process fewer samples"
            if a.per == "epoch"
            else ""
        )
        + f". Cost: {html.escape(inputs.cost.describe())}.</p>"
    )
    notes = "".join(
        f'<p class="note">Note: {html.escape(n)}</p>' for n in a.notes + extrapolation_notes(a, inputs.predictions)
    )
    return text + notes


def build_html(inputs: ReportInputs) -> str:
    """The whole report as one HTML string."""
    sections = [
        configuration_section,
        epoch_section,
        scaling_section,
        tradeoff_section,
        breakdown_section,
        bottleneck_section,
        evaluation_section,
        methods_section,
    ]
    body = "".join(section(inputs) for section in sections)
    body += plan_section(inputs.plan)  # the plan next to the models it would improve
    if inputs.optimization is not None:
        from extradeep.report.optimisation import optimisation_section

        body += optimisation_section(inputs.optimization)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = html.escape(inputs.title)
    return (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1>"
        f"<p>Made by extradeep {__version__} on {stamp}.</p>{body}</body></html>"
    )
