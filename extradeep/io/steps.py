"""Find epochs and training/validation steps in the NVTX events of one profile (an nsys export's NVTX
table, or a Kineto trace's CPU ranges written as NVTX ranges), with NumPy on the NVTX columns: a small
export's steps are found in about a millisecond.

Conventions recognised by default, per level (epoch, train, val), first match wins:
1. Extra-Deep ranges: NVTX ranges whose registered category (eventType 33) is `epoch`,
   `training_step` or `testing_step`;
2. Extra-Deep marks: instant marks (eventType 34) `epoch:N,type:started|ended` and
   `step:N,type:started|ended` in categories `epoch`, `training step`, `testing step`;
3. plain range names such as `epoch 3`, `train_step 4`, `val_step 1`, `validation_step` (also what
   `extradeep.capture.marks` emits in the `extradeep` domain);
4. PyTorch `ProfilerStep#N` ranges (training steps; a ProfilerStep inside an `eval`/`validation`
   range is a validation step).
A user pattern replaces the defaults of its level. The conventions themselves (which NVTX ranges and
marks are epochs and steps) live in `io.step_conventions`; this module turns what they find into the
StepTable: ranges left open, overlap, epochs, step numbers, warm-up and the measured windows.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import EPOCH, NAME, PHASE, STEP, TRAIN, VAL
from extradeep.errors import InputError
from extradeep.io.frames import NULL_INT, NVTX_RANGE_TYPES, Table
from extradeep.io.settings import ReaderSettings
from extradeep.io.step_conventions import END, PHASE_NAMES, START, Found, Nvtx, default_kinds, find_level

LEVELS = (EPOCH, TRAIN, VAL)
STEP_COLUMNS = [EPOCH, PHASE, STEP, START, END]


class StepTable:
    """The steps of one export (kept and warm-up), the measured window and what was recognised.

    `steps`: kept steps, columns epoch, phase ("train"/"val"), step, start, end (ns), sorted by
    start. `warmup`: excluded warm-up steps (same columns). `windows`: epoch, start, end of each kept
    epoch (events there but outside every step are "between"). `convention`: level -> what matched.
    `mark_rows`: positions (in the NVTX frame) of the ranges/marks used, so they are not counted as
    user regions. `warnings`: one-line notes for the user. The frames are built on first use; `kept`,
    `warm` and `window` hold the same columns as NumPy arrays (what the per-step sums read).
    """

    def __init__(self, kept: dict, warm: dict, window: dict, convention: dict, mark_rows, warnings: list):
        self.kept, self.warm, self.window = kept, warm, window
        self.convention, self.mark_rows, self.warnings = convention, mark_rows, warnings

    @functools.cached_property
    def steps(self) -> pd.DataFrame:
        return _step_frame(self.kept)

    @functools.cached_property
    def warmup(self) -> pd.DataFrame:
        return _step_frame(self.warm)

    @functools.cached_property
    def windows(self) -> pd.DataFrame:
        return pd.DataFrame({c: self.window[c] for c in (EPOCH, START, END)})


def _step_frame(columns: dict) -> pd.DataFrame:
    return pd.DataFrame({c: columns[c] for c in STEP_COLUMNS}, index=columns["index"])


# ---------------------------------------------------------------------------------------------
# Step table


@dataclass
class _Steps:
    """The steps found (both phases), sorted by start: plain arrays until the StepTable is built."""

    start: np.ndarray
    end: np.ndarray
    number: np.ndarray
    phase: np.ndarray  # object: "train" / "val"
    epoch: np.ndarray | None = None
    step: np.ndarray | None = None

    def columns(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """STEP_COLUMNS of the steps at positions `rows`, and the positions as "index"."""
        columns = {EPOCH: self.epoch[rows], PHASE: self.phase[rows], STEP: self.step[rows]}
        return {**columns, START: self.start[rows], END: self.end[rows], "index": rows}


def find_steps(nvtx, settings=None, source=None) -> StepTable:
    """The StepTable of one profile's NVTX events: an export's (`extradeep.io.nsys.events.nvtx`, or
    its Table) or a Kineto trace's CPU ranges (`extradeep.io.kineto.tables.nvtx_table`).

    Raises InputError (naming `source`) when no steps are found (listing the most frequent NVTX
    names), when marks are unbalanced, when steps overlap, or when every epoch is warm-up.
    """
    settings = ReaderSettings.from_any(settings)
    patterns = {"epoch": settings.epoch_pattern, "train": settings.train_step_pattern, "val": settings.val_step_pattern}
    nv = Nvtx(nvtx)
    try:
        kinds = default_kinds(nv)
        found = {level: find_level(nv, kinds, level, patterns[level]) for level in LEVELS}
    except InputError as exc:
        raise InputError(source, exc.problem) from None
    warnings = _close_open_ranges(found)
    unmatched = [
        f"{level} pattern {patterns[level]!r} matched no NVTX range name{closest_names(_frame(nvtx), patterns[level])}"
        for level in LEVELS
        if patterns[level] and found[level] is None
    ]
    if found[TRAIN] is None and found[VAL] is None:
        raise InputError(
            source, "; ".join(unmatched) if unmatched and len(nv.ranges) else no_steps_message(_frame(nvtx))
        )
    steps = _steps_of(found)
    _check_overlap(steps, source)
    epochs = _epoch_frame(found[EPOCH])
    steps.epoch = _assign_epochs(steps, epochs, warnings) if found[EPOCH] else _infer_epochs(steps)
    steps.step = _step_numbers(steps)
    warnings += unmatched
    warm = _warmup(steps, settings, warnings, source)
    convention = {
        level: (f"{found[level].how} ({len(found[level].start)})" if found[level] else "none") for level in LEVELS
    }
    if found[EPOCH] is None:
        n = len(np.unique(steps.epoch))
        convention[EPOCH] = (
            f"inferred: a validation phase ends each epoch ({n})" if n > 1 else "none (one epoch assumed)"
        )
    rows = np.concatenate([f.rows for f in found.values() if f is not None]).astype(np.int64)
    kept = np.flatnonzero(~warm)
    windows = _windows(steps, kept, epochs)
    return StepTable(steps.columns(kept), steps.columns(np.flatnonzero(warm)), windows, convention, rows, warnings)


def _frame(nvtx) -> pd.DataFrame:
    return nvtx.frame() if isinstance(nvtx, Table) else nvtx


def _steps_of(found: dict) -> _Steps:
    levels = [level for level in (TRAIN, VAL) if found[level]]
    start = np.concatenate([found[level].start for level in levels])
    order = np.argsort(start, kind="stable")
    return _Steps(
        start[order],
        np.concatenate([found[level].end for level in levels])[order],
        np.concatenate([found[level].number for level in levels])[order],
        np.concatenate([np.full(len(found[level].start), level, dtype=object) for level in levels])[order],
    )


def _close_open_ranges(found: dict) -> list[str]:
    """Ranges still open when the capture stopped (end NULL): an epoch runs to the end of the
    capture; a step is left out (its work is incomplete) and a warning says so."""
    warnings = []
    if found[EPOCH] is not None:
        found[EPOCH].end = np.where(found[EPOCH].end == NULL_INT, np.iinfo(np.int64).max, found[EPOCH].end)
    for level in (TRAIN, VAL):
        f = found[level]
        if f is None or not (f.end == NULL_INT).any():
            continue
        keep = f.end != NULL_INT
        warnings.append(
            f"{int((~keep).sum())} {PHASE_NAMES[level]} step range(s) never ended (capture stopped inside); left out"
        )
        found[level] = Found(f.how, f.start[keep], f.end[keep], f.number[keep], f.rows[keep]) if keep.any() else None
    return warnings


def _check_overlap(steps: _Steps, source) -> None:
    start, end = steps.start, steps.end
    bad = np.flatnonzero(start[1:] < np.maximum.accumulate(end)[:-1])
    if len(bad):
        a, b = bad[0], bad[0] + 1
        raise InputError(
            source,
            f"{len(bad)} step(s) overlap an earlier step (first: {PHASE_NAMES[steps.phase[b]]} step "
            f"{steps.number[b]} at {start[b]} ns inside {PHASE_NAMES[steps.phase[a]]} step {steps.number[a]}); "
            "steps must not overlap (one export per rank; several processes in one export are not supported)",
        )


def _epoch_frame(found: Found | None) -> dict[str, np.ndarray]:
    """Epochs sorted by start (epoch, start, end arrays), numbered by their marks where those are
    unique, else by time order."""
    if found is None:
        return {EPOCH: np.empty(0, np.int64), START: np.empty(0, np.int64), END: np.empty(0, np.int64)}
    order = np.argsort(found.start, kind="stable")
    numbers = found.number[order]
    usable = (numbers >= 0).all() and len(np.unique(numbers)) == len(numbers)
    return {
        EPOCH: numbers if usable else np.arange(len(numbers)),
        START: found.start[order],
        END: found.end[order],
    }


def _assign_epochs(steps: _Steps, epochs: dict, warnings: list[str]) -> np.ndarray:
    """Epoch of each step: the epoch range containing its start (the preceding one if none does)."""
    if not len(epochs[EPOCH]):
        return np.zeros(len(steps.start), dtype=np.int64)
    start = steps.start
    idx = np.searchsorted(epochs[START], start, side="right") - 1
    inside = (idx >= 0) & (start < epochs[END][np.maximum(idx, 0)])
    if not inside.all():
        warnings.append(
            f"{int((~inside).sum())} step(s) lie outside every epoch range; assigned to the preceding epoch"
        )
    number = epochs[EPOCH][np.maximum(idx, 0)]
    return np.where(idx >= 0, number, -1).astype(np.int64)


def _infer_epochs(steps: _Steps) -> np.ndarray:
    """Without epoch marks, a training step that follows a validation step starts a new epoch."""
    train = steps.phase == TRAIN
    after_val = np.concatenate(([False], ~train[:-1]))
    return np.cumsum(train & after_val).astype(np.int64)


def _step_numbers(steps: _Steps) -> np.ndarray:
    """The marks' numbers where they are unique within (epoch, phase), else 0, 1, ... in time order."""
    out = np.empty(len(steps.start), dtype=np.int64)
    for group in _groups(steps.epoch, steps.phase):
        numbers = steps.number[group]
        usable = (numbers >= 0).all() and len(np.unique(numbers)) == len(numbers)
        out[group] = numbers if usable else np.arange(len(group))
    return out


def _groups(*keys: np.ndarray) -> list[np.ndarray]:
    """Positions of the rows of each distinct key combination, each in row order."""
    inverse = [np.unique(k, return_inverse=True)[1].ravel() for k in keys]
    combined = inverse[0].astype(np.int64)
    for codes in inverse[1:]:
        combined = combined * (int(codes.max(initial=0)) + 1) + codes
    order = np.argsort(combined, kind="stable")
    bounds = np.flatnonzero(np.diff(combined[order])) + 1
    return np.split(order, bounds) if len(order) else []


def _warmup(steps: _Steps, settings: ReaderSettings, warnings: list[str], source) -> np.ndarray:
    """Which steps are warm-up: the first `warmup_epochs` epochs, or the first steps of a single epoch."""
    epochs, first = np.unique(steps.epoch, return_index=True)  # rows are in time order: first = earliest
    order = epochs[np.argsort(steps.start[first], kind="stable")]
    n_warm = settings.warmup_epochs
    if n_warm == 0:
        return np.zeros(len(steps.start), dtype=bool)
    if len(order) > n_warm:
        return np.isin(steps.epoch, order[:n_warm])
    if len(order) > 1:
        raise InputError(
            source, f"all {len(order)} epochs are warm-up (warm-up epochs = {n_warm}); nothing is left to measure"
        )
    warm = np.zeros(len(steps.start), dtype=bool)
    dropped = []
    for phase in sorted(set(steps.phase)):
        rows = np.flatnonzero(steps.phase == phase)
        if len(rows) > settings.warmup_steps:
            warm[rows[: settings.warmup_steps]] = True
            if settings.warmup_steps:
                dropped.append(f"{min(settings.warmup_steps, len(rows))} {PHASE_NAMES[phase]}")
    if settings.warmup_steps:
        warnings.append(
            f"only one epoch: excluded its first {settings.warmup_steps} step(s) per phase as warm-up "
            f"({', '.join(dropped) or 'none: too few steps'}) instead of a whole epoch"
        )
    return warm


def _windows(steps: _Steps, kept: np.ndarray, epochs: dict) -> dict[str, np.ndarray]:
    """Per kept epoch, the span whose events outside every step count as "between": the epoch range
    widened to cover its steps (or the span of its steps when epochs are not marked)."""
    epoch_of = steps.epoch[kept]
    numbers, inverse = np.unique(epoch_of, return_inverse=True)
    start = np.full(len(numbers), np.iinfo(np.int64).max, np.int64)
    end = np.full(len(numbers), np.iinfo(np.int64).min, np.int64)
    np.minimum.at(start, inverse, steps.start[kept])
    np.maximum.at(end, inverse, steps.end[kept])
    if len(epochs[EPOCH]):
        by_number = np.argsort(epochs[EPOCH], kind="stable")  # epoch numbers are unique
        at = np.minimum(np.searchsorted(epochs[EPOCH][by_number], numbers), len(by_number) - 1)
        pick = by_number[at]
        has = epochs[EPOCH][pick] == numbers  # else: steps outside every epoch range
        start = np.where(has, np.minimum(start, epochs[START][pick]), start)
        end = np.where(has, np.maximum(end, epochs[END][pick]), end)
    order = np.argsort(start, kind="stable")
    return {EPOCH: numbers[order], START: start[order], END: end[order]}


def _ranges(nvtx: pd.DataFrame) -> pd.DataFrame:
    return nvtx[nvtx["eventType"].isin(NVTX_RANGE_TYPES).to_numpy()]


def no_steps_message(nvtx: pd.DataFrame, top: int = 8) -> str:
    """Why no steps were found, with the most frequent NVTX range names to write a pattern from."""
    ranges = _ranges(nvtx)
    if ranges.empty:
        return (
            "no NVTX ranges, so no training steps to measure; profile with `nsys profile -t cuda,nvtx` and mark "
            "steps (extradeep.capture.marks, PyTorch's profiler, or your own NVTX ranges plus --train-step-pattern)"
        )
    counts = ranges[NAME].value_counts().head(top)
    names = ", ".join(f"{shorten(name)!r} x{n}" for name, n in counts.items())
    return (
        "no step marks found (Extra-Deep ranges or marks, ProfilerStep#N, or names like 'epoch 3', "
        f"'train_step 4', 'val_step 1'); most frequent NVTX ranges: {names}; "
        "give --train-step-pattern (and --epoch-pattern, --val-step-pattern)"
    )


def closest_names(nvtx: pd.DataFrame, pattern: str, n: int = 5) -> str:
    """'; closest names: ...' (the NVTX range names most like `pattern`), or '' when there are none."""
    import difflib

    names = [str(x) for x in _ranges(nvtx)[NAME].dropna().unique()]
    text = pattern.rpartition(":")[2] if ":" in pattern else pattern
    literal = re.sub(r"\\.|[()\[\]{}?*+^$|.]", " ", text).strip().lower()
    close = difflib.get_close_matches(literal, [x.lower() for x in names], n=n, cutoff=0.3)
    by_lower = {x.lower(): x for x in names}
    picked = [by_lower[c] for c in close]
    if not picked:
        words = [w for w in literal.split() if w]
        picked = [x for x in names if any(w in x.lower() for w in words)][:n]
    return f"; closest names: {', '.join(repr(shorten(x)) for x in picked)}" if picked else ""


def shorten(name: str, width: int = 60) -> str:
    """`name` cut to `width` characters (with an ellipsis) for one-line messages."""
    return name if len(name) <= width else name[: width - 3] + "..."
