"""Budget search (paper section 3.3, Q5): which configurations meet a deadline and/or a budget.

The epoch-time model is evaluated at every candidate point; cost follows from
:mod:`extradeep.analysis.cost` and efficiency from :mod:`extradeep.analysis.scaling`. A candidate
is valid when its predicted time and cost for the requested number of epochs are within the
limits; the table also says whether it stays valid at the upper end of the prediction interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.analysis.cost import CostSettings, amount_text, cost_table
from extradeep.analysis.epoch import SKIP_WARN, skipped_data_note, work_samples
from extradeep.analysis.points import format_point, format_seconds
from extradeep.analysis.scaling import add_scaling_columns, design
from extradeep.columns import COST
from extradeep.errors import InputError


@dataclass
class BudgetLimits:
    """The user's limits: wall time in seconds and/or cost, both for ``epochs`` epochs."""

    max_time: float | None = None
    max_cost: float | None = None
    epochs: float = 1.0

    def __post_init__(self):
        if self.max_time is None and self.max_cost is None:
            raise InputError(None, "give a time limit (max_time) and/or a cost limit (max_cost)", field="max_time")
        for name in ("max_time", "max_cost", "epochs"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise InputError(None, f"must be a positive number, got {value!r}", field=name)


@dataclass
class BudgetResult:
    """Outcome of :func:`budget_search`; ``table`` has one row per candidate configuration."""

    table: pd.DataFrame
    intervals: pd.DataFrame
    best: pd.DataFrame
    limits: BudgetLimits
    scaling: str
    cost_unit: str
    failure: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.failure is None


def budget_search(
    epoch_model,
    candidates: pd.DataFrame,
    params: list[str],
    limits: BudgetLimits,
    cost: CostSettings,
    baseline: dict,
    scaling: str = "strong",
    level: float = 0.95,
) -> BudgetResult:
    """Evaluate ``epoch_model`` (seconds per epoch) at ``candidates`` and check the limits."""
    if candidates.empty:
        raise InputError("budget", "there are no candidate configurations to search")
    table = _candidate_table(epoch_model, candidates, params, baseline, limits, cost, scaling, level)
    along = cost.ranks_param if cost.ranks_param in params else params[0]
    intervals = valid_intervals(table, params, along)
    best = best_configurations(table, params)
    failure = None if table["valid"].any() else explain_failure(table, limits, cost.unit, params)
    notes = _varied_note(candidates, params, along) + _skipped_notes(table, params)
    if table["valid"].any() and not table["valid_upper"].any():
        notes.append(
            "every valid configuration fails a limit at the upper end of the "
            f"{level:.0%} prediction interval: plan with a margin"
        )
    return BudgetResult(table, intervals, best, limits, scaling, cost.unit, failure, notes)


def _varied_note(candidates: pd.DataFrame, params: list[str], along: str) -> list[str]:
    """Say which parameters the search holds fixed (a two-parameter model is searched along ranks)."""
    held = [p for p in params if p != along and candidates[p].nunique() == 1]
    if not held:
        return []
    return [
        f"the search varies {along} only; {format_point(candidates.iloc[0], held)} stays fixed "
        "(give other values with --at)"
    ]


def _skipped_notes(table: pd.DataFrame, params: list[str]) -> list[str]:
    if "skipped_share" not in table.columns:
        return []
    notes = skipped_data_note(table, params)
    valid = table[table["valid"]]
    if notes and (valid["skipped_share"] > SKIP_WARN).any() and (valid["skipped_share"] <= SKIP_WARN).any():
        notes.append(
            f"the best configurations are picked among those that skip at most {SKIP_WARN:.0%} of the "
            "training samples per epoch (those listed above look faster and cheaper than the work they stand for)"
        )
    return notes


def _candidate_table(model, candidates, params, baseline, limits, cost, scaling, level) -> pd.DataFrame:
    points = candidates[params].astype(float).reset_index(drop=True)
    X = design(points, params)
    table = points.copy()
    table["T"] = np.asarray(model.predict(X), dtype=float).reshape(-1)
    lo, hi = model.interval(X, level=level)
    # a time is never negative, however wide its uncertainty
    table["T_lo"], table["T_hi"] = (np.maximum(np.asarray(v, float).reshape(-1), 0.0) for v in (lo, hi))
    table["T_base"] = float(np.asarray(model.predict(design(pd.DataFrame([baseline])[params], params))).reshape(-1)[0])
    dataset = getattr(model, "dataset", None)  # an EpochModel knows its steps per epoch
    if dataset is not None:
        counts = dataset.samples_per_epoch(points, model.fixed)
        table[list(counts.columns)] = counts
        if (scaling == "weak") == bool(dataset.weak_scaling):  # compare time per sample (docs/analysis.md)
            base = pd.DataFrame([baseline])[params].astype(float)
            table["samples"] = work_samples(dataset, points, model.fixed)
            table["samples_base"] = float(work_samples(dataset, base, model.fixed)[0])
    table = add_scaling_columns(table, baseline, scaling, cost.ranks_param)
    table = cost_table(table, cost, params)
    table["total_time"] = table["T"] * limits.epochs
    table["total_time_hi"] = table["T_hi"] * limits.epochs
    table["total_cost"] = table[COST] * limits.epochs
    table["total_cost_hi"] = table["cost_hi"] * limits.epochs
    table["time_ok"] = _within(table["total_time"], limits.max_time) & (table["T"] > 0)
    table["cost_ok"] = _within(table["total_cost"], limits.max_cost) & (table["T"] > 0)
    table["valid"] = table["time_ok"] & table["cost_ok"]
    table["valid_upper"] = (
        _within(table["total_time_hi"], limits.max_time)
        & _within(table["total_cost_hi"], limits.max_cost)
        & table["valid"]
    )
    return table


def _within(values: pd.Series, limit: float | None) -> pd.Series:
    return pd.Series(True, index=values.index) if limit is None else values <= limit


def valid_intervals(table: pd.DataFrame, params: list[str], along: str) -> pd.DataFrame:
    """Runs of consecutive valid candidates along ``along`` (other parameters held fixed)."""
    rows = []
    others = [p for p in params if p != along]
    groups = table.groupby(others, sort=True) if others else [((), table)]
    for key, group in groups:
        group = group.sort_values(along)
        run_id = (group["valid"] != group["valid"].shift()).cumsum()
        for _, run in group[group["valid"]].groupby(run_id[group["valid"]]):
            fixed = dict(zip(others, key if isinstance(key, tuple) else (key,)))
            rows.append({**fixed, "from": run[along].iloc[0], "to": run[along].iloc[-1], "candidates": len(run)})
    return pd.DataFrame(rows, columns=[*others, "from", "to", "candidates"])


def best_configurations(table: pd.DataFrame, params: list[str]) -> pd.DataFrame:
    """The valid configuration with the highest efficiency, the lowest cost and the shortest time,
    among those whose epochs skip at most SKIP_WARN of the data when there are any."""
    valid = table[table["valid"]]
    columns = ["criterion", *params, "T", "total_time", "total_cost", "efficiency", "speedup", "valid_upper"]
    if valid.empty:
        return pd.DataFrame(columns=columns)
    if "skipped_share" in valid.columns and (valid["skipped_share"] <= SKIP_WARN).any():
        # An epoch that leaves out data looks faster and cheaper than the work it stands for.
        valid = valid[valid["skipped_share"] <= SKIP_WARN]
    picks = {
        # Ties go to the cheaper, then the faster configuration.
        "efficiency": valid.sort_values(["efficiency", "total_cost", "T"], ascending=[False, True, True]).iloc[0],
        "cost": valid.sort_values(["total_cost", "T"]).iloc[0],
        "time": valid.sort_values(["T", "total_cost"]).iloc[0],
    }
    rows = [{"criterion": name, **{c: row[c] for c in columns[1:]}} for name, row in picks.items()]
    return pd.DataFrame(rows, columns=columns)


def explain_failure(table: pd.DataFrame, limits: BudgetLimits, unit: str, params: list[str]) -> str:
    """Say which limit no candidate meets, and by how much the closest candidate misses it."""
    epochs = f"{limits.epochs:g} epoch{'s' if limits.epochs != 1 else ''}"
    checks = (
        ("time", limits.max_time, "total_time", "fastest", "needs", format_seconds),
        ("cost", limits.max_cost, "total_cost", "cheapest", "costs", lambda v: amount_text(v, unit)),
    )
    problems = []
    for name, limit, column, closest, verb, show in checks:
        if limit is not None and not table[f"{name}_ok"].any():
            row = table.loc[table[column].idxmin()]
            problems.append(
                f"{name} limit: the {closest} configuration ({format_point(row, params)}) {verb} "
                f"{show(row[column])} for {epochs}, {_over(row[column], limit)} over the "
                f"{show(limit)} limit"
            )
    if not problems:
        fast = table[table["time_ok"]]
        cheap = table[table["cost_ok"]]
        problems.append(
            "each limit can be met but never both at once: the time limit needs one of "
            f"{_span(fast, params)}, the cost limit one of {_span(cheap, params)}"
        )
    return "; ".join(problems)


def _over(value: float, limit: float) -> str:
    return f"{(value / limit - 1) * 100:.1f}%"


def _span(rows: pd.DataFrame, params: list[str]) -> str:
    first, last = rows.iloc[0], rows.iloc[-1]
    return (
        format_point(first, params)
        if len(rows) == 1
        else f"{format_point(first, params)} .. {format_point(last, params)}"
    )
