"""The plan file: the runs `extradeep plan` proposes, which `extradeep profile-cmd --plan` turns into jobs.

A CSV file, one row per configuration: ``app, ranks, <other parameters...>, reps, first_rep``
(repetitions first_rep .. first_rep + reps - 1, so follow-up runs never overwrite earlier ones),
then the advisor's explanation columns (nodes, action, gpu_hours, cost, interval_before_pct,
interval_after_pct, shrink_pct, reason), which reading ignores.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from extradeep.capture.profile_cmd import ProfileRun
from extradeep.errors import InputError, require_regular_file
from extradeep.io.naming import NAME, NUMBER, RESERVED_NAMES

REQUIRED = ("app", "ranks", "reps", "first_rep")
EXPLANATION = (
    "nodes",
    "action",
    "gpu_hours",
    "cost",
    "interval_before_pct",
    "interval_after_pct",
    "shrink_pct",
    "reason",
)


@dataclass
class PlannedRuns:
    """What a plan file asks for: the application, its other parameters, the runs, skipped rows."""

    app: str
    params: dict = field(default_factory=dict)  # name -> values (strings), for profile-cmd
    runs: list[ProfileRun] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def write_plan(path, plan: pd.DataFrame, app: str | None = None, fixed: dict | None = None) -> Path:
    """Write the advisor's plan (``MeasurementAdvisor.propose()``) as a plan file."""
    path = Path(path)
    app = app or plan.attrs.get("app", "app")
    fixed = dict(plan.attrs.get("fixed", {}) if fixed is None else fixed)
    frame = plan.copy()
    frame.insert(0, "app", app)
    for k, (name, value) in enumerate(fixed.items()):
        frame.insert(2 + k, name, int(value) if float(value).is_integer() else value)  # 64, not 64.0, in names
    order = ["app", "ranks", *fixed, "reps", "first_rep", *[c for c in EXPLANATION if c in frame]]
    try:
        frame[order].to_csv(path, index=False, float_format="%.6g")
    except OSError as exc:
        raise InputError(path, f"cannot write the plan ({exc.strerror or exc})") from None
    return path


def read_plan(path) -> PlannedRuns:
    """The runs of a plan file; a bad row is skipped with a line in `.problems`."""
    path = Path(path)
    require_regular_file(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, f"cannot read the plan ({getattr(exc, 'strerror', None) or exc})") from None
    if not rows:
        raise InputError(path, "the plan has no rows")
    missing = [c for c in REQUIRED if c not in rows[0]]
    if missing:
        raise InputError(path, f"not a plan file: no column {', '.join(missing)} (write one with `extradeep plan`)")
    names = [c for c in rows[0] if c and c not in REQUIRED and c not in EXPLANATION]
    for name in names:
        if not NAME.match(name) or name in RESERVED_NAMES:
            taken = ", ".join(RESERVED_NAMES)
            raise InputError(path, f"parameter column {name!r}: use letters and '_' only, not {taken}")
    planned = PlannedRuns(app="")
    for line, row in enumerate(rows, start=2):
        try:
            planned.runs += _runs_of(row, names)
        except ValueError as exc:
            planned.problems.append(f"{path} (line {line}): {exc}; skipped")
            continue
        app = (row.get("app") or "").strip()
        if planned.app and app != planned.app:
            raise InputError(path, f"line {line}: app {app!r} differs from {planned.app!r}; one application per plan")
        planned.app = app
    if not planned.runs:
        raise InputError(path, "no usable row: " + "; ".join(p.split(": ", 1)[1] for p in planned.problems[:3]))
    planned.params = {n: sorted({r.params[n] for r in planned.runs}, key=float) for n in names}
    return planned


def _runs_of(row: dict, names: list[str]) -> list[ProfileRun]:
    numbers = {}
    for column in ("ranks", "reps", "first_rep"):
        text = (row.get(column) or "").strip()
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{column} must be a whole number >= 1, got {text!r}")
        numbers[column] = int(text)
    params = {}
    for name in names:
        text = (row.get(name) or "").strip()
        if not NUMBER.match(text):
            raise ValueError(f"{name} must be a number, got {text!r}")
        params[name] = text
    first = numbers["first_rep"]
    return [ProfileRun(numbers["ranks"], rep, params) for rep in range(first, first + numbers["reps"])]
