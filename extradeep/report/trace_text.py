"""Terminal text of one run's replay (`extradeep predict`), its trace analyses and its strategy search
(`predict --optimize`, `inspect --analysis`): the front ends print what these return."""

from __future__ import annotations

from extradeep.columns import (
    GAIN,
    NAME,
    OVERHEAD_TYPE,
    OVERHEAD_TYPES,
    PATH,
    PHASE,
    PREDICTED,
    PROPOSED,
    PURE,
    REPLAYED,
    STAT_TOTAL,
    WAIT,
)

WIDTH = {"display.width": 160, "display.max_columns": 20, "display.max_colwidth": 70}
PREDICT_WIDTH = {"display.width": 160, "display.max_columns": 20, "display.max_colwidth": 60}


def overhead_legend(types=None, indent: str = "  ") -> str:
    """One line per host overhead type (all, or those in `types`), in order."""
    return "\n".join(f"{indent}{t}  {text}" for t, text in OVERHEAD_TYPES.items() if types is None or t in types)


def format_seconds(value) -> str:
    from extradeep.analysis.points import format_seconds as seconds  # pandas: not at `extradeep --help`

    return seconds(value)


def _options(width: dict) -> list:
    return [x for kv in width.items() for x in kv]


def prediction_text(pred, top: int, empirical=None) -> str:
    """The replay: measured against replayed step time, the critical path's shares and owners, the
    host overheads, the collectives, the what-if scenarios and (`empirical`) the PMNF step time."""
    import pandas as pd

    with pd.option_context(*_options(PREDICT_WIDTH)):
        return "\n".join(_prediction_lines(pred, top, empirical))


def _prediction_lines(pred, top: int, empirical) -> list[str]:
    from extradeep.predictor.critical_path import CLASSES

    f = pred.files
    lines = [f"run: {f[PATH].nunique()} export(s), {len(f)} rank(s)", *(f"note: {n}" for n in pred.notes)]
    s = pred.summary
    base = s[s["scenario"] == s["scenario"].iloc[0]]
    cols = ["phase", "steps", "measured", "replayed", "median_abs_error", "max_abs_error"]
    cols += ["kernel_sum_baseline"] if "kernel_sum_baseline" in base else []
    lines += ["\nStep time, median over steps of the slowest rank:", seconds_table(base[cols], cols[2:])]
    b = pred.breakdown
    shares = {c: b[c].sum() / b["span"].sum() for c in CLASSES}
    lines.append(
        "\nCritical path, share of the step time: "
        + ", ".join(f"{c} {100 * v:.1f}%" for c, v in shares.items())
        + f" (idle includes {100 * b['os_wait'].sum() / b['span'].sum():.1f}% in OS calls, e.g. data loading)"
    )
    lines += owner_lines(pred.owners, top)
    ov = pred.overheads.sort_values(STAT_TOTAL, ascending=False).head(top)
    ov = ov.assign(name=ov[NAME].astype(str).str.slice(0, 60))
    lines += [
        f"\nHost overheads T1-T5, top {top} by total:",
        seconds_table(ov, ["mean", "median", "std", "p95", "total"]),
    ]
    lines.append(overhead_legend(set(ov[OVERHEAD_TYPE])))
    if len(pred.collectives):
        c = pred.collectives
        lines.append(
            f"\nCollectives: {len(c)} matched; median pure {format_seconds(c[PURE].median())}, "
            f"median wait for the slowest rank {format_seconds(c[WAIT].median())}"
        )
    wi = s[s["scenario"] != s["scenario"].iloc[0]]
    if len(wi):
        what_if = wi[["scenario", PHASE, REPLAYED, PREDICTED, "speedup"]]
        shown = what_if.assign(speedup=[f"{v:.3g}x" for v in what_if["speedup"]])
        lines += ["\nWhat-if (each re-replayed):", seconds_table(shown, ["replayed", "predicted"])]
    if empirical is not None:
        lines.append(empirical_text(empirical))
    return lines


def empirical_text(empirical) -> str:
    """The empirical step-time model (fitted on several runs) at the replayed point, for comparison."""
    if empirical.seconds is None:
        return "\nempirical step-time model: none in the experiment"
    return (
        f"\nEmpirical PMNF step-time model at ranks={empirical.ranks}: "
        f"{format_seconds(empirical.seconds)}  ({empirical.formula})"
    )


def seconds_table(frame, seconds: list[str]) -> str:
    """A frame as text, its time columns as durations with units (850 us, 12.3 ms, 1.57 s)."""
    return frame.to_string(index=False, formatters={c: format_seconds for c in seconds})


def owner_lines(owners, top: int) -> list[str]:
    """The outermost owners of the critical path (they partition it), each with its hot path: the
    largest owner inside it, level by level, while that holds at least half of its parent."""
    from extradeep.predictor.critical_path import CLASSES
    from extradeep.predictor.owners import hot_path

    first = owners[owners["level"] == 1]
    if first.empty:
        return []
    shown = first.head(top)
    lines = [
        f"top {len(shown)} owners of the critical path (the operator or annotation around each piece; summed over steps):"
    ]
    for row in shown.itertuples(index=False):
        mix = ", ".join(
            f"{c} {100 * getattr(row, c) / row.seconds:.0f}%" for c in CLASSES if getattr(row, c) >= 0.05 * row.seconds
        )
        inside = " > ".join(f"{name[:50]} {100 * share:.1f}%" for name, share in hot_path(owners, row.owner))
        lines.append(
            f"  {100 * row.share:5.1f}%  {row.seconds:9.4f} s  {str(row.owner)[:60]}  [{mix}]"
            + (f"  > {inside}" if inside else "")
        )
    lines.append(
        f"these {len(shown)} owners hold {100 * shown['share'].sum():.1f}% of the critical path ({len(first)} in all)"
    )
    return lines


def analyses_text(analyses) -> str:
    """The trace analyses of one run (:class:`extradeep.workflows.trace_analyses.TraceAnalyses`)."""
    import pandas as pd

    with pd.option_context(*_options(WIDTH)):
        return "\n".join(_analyses_lines(analyses))


def _analyses_lines(a) -> list[str]:
    lines = [f"\n== {a.title}"] if a.title else []
    if a.idle is not None:
        lines += ["\nIdle time per GPU stream (s; host wait = the CPU did not enqueue work in time):", _table(a.idle)]
    if a.launch is not None:
        lines.append(
            f"\nKernel launches (short: GPU time < launch call; outliers: call > {a.runtime_cutoff * 1e6:g} us, "
            f"delay > {a.launch_delay_cutoff * 1e6:g} us):"
        )
        lines.append(_table(a.launch))
    if a.sequences is not None:
        lines += ["\nFrequent kernel sequences (fusion candidate: short kernels waiting for the host):"]
        lines.append(_table(a.sequences))
    if a.overlap is not None:
        lines += ["\nCommunication/computation overlap per rank:", _table(a.overlap)]
    if a.diff is not None:
        other = a.diff_against
        lines += [f"\nChanges against {other} (per step; test = this run, control = {other}):", _table(a.diff)]
    return lines


def strategies_text(search) -> str:
    """The strategy search's notes, its table, the settings to change and its verdict."""
    import pandas as pd

    table = search.strategies_
    lines = [f"note: {note}" for note in search.notes_]
    with pd.option_context(*_options(WIDTH)):
        if len(table):
            shown = table.assign(gain=(100 * table[GAIN]).round(2)).rename(columns={GAIN: "gain_%"})
            columns = ["strategy", "predicted_s", "lower_s", "upper_s", "gain_%", "critical_path", "proposed"]
            lines.append("\nStrategies (step time predicted on the replay; gain against the measured step):")
            lines.append(shown[columns].to_string(index=False, float_format=lambda v: f"{v:.5g}"))
            lines.append("\nSettings:")
            lines += [f"  {row.strategy}: {row.setting}" for row in table[table[PROPOSED]].itertuples(index=False)]
        lines.append(f"\n{search.verdict_}")
    return "\n".join(lines)


def _table(frame) -> str:
    if frame.empty:
        return "  (none)"
    return frame.to_string(index=False, float_format=lambda v: f"{v:.4g}")
