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
A user pattern replaces the defaults of its level.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import EPOCH, NAME, PHASE, STEP, TRAIN, VAL
from extradeep.errors import InputError
from extradeep.io.frames import NULL_INT, NVTX_MARK, NVTX_RANGE_TYPES, Names, Table, is_range
from extradeep.io.settings import ReaderSettings

LEVELS = (EPOCH, TRAIN, VAL)
PHASE_NAMES = {TRAIN: "training", VAL: "validation"}
START, END = "start", "end"  # the integer-ns times of every table (extradeep.io.frames)

RANGE_CATEGORIES = {"epoch": ("epoch",), "train": ("training_step",), "val": ("testing_step", "validation_step")}
MARK_CATEGORIES = {"epoch": ("epoch",), "train": ("training step",), "val": ("testing step", "validation step")}
_MARK_TEXT = re.compile(r"\s*(epoch|step)\s*:\s*(\d+)\s*,\s*type\s*:\s*(started|ended)\s*", re.IGNORECASE)
_SEP = r"[\s_:#-]*"
PLAIN_NAMES = {
    "epoch": re.compile(rf"epoch{_SEP}(\d+)?", re.IGNORECASE),
    "train": re.compile(rf"(?:train(?:ing)?{_SEP}step|train(?:ing)?{_SEP}batch|step){_SEP}(\d+)?", re.IGNORECASE),
    "val": re.compile(
        rf"(?:val(?:idation)?|test(?:ing)?|eval(?:uation)?){_SEP}(?:step|batch){_SEP}(\d+)?", re.IGNORECASE
    ),
}
PROFILER_STEP = re.compile(r"ProfilerStep#(\d+)")
EVAL_RANGE = re.compile(r"(?:eval(?:uation)?|val(?:idation)?|test(?:ing)?)", re.IGNORECASE)
_DEFAULT_NAMES = re.compile(
    "|".join(
        f"(?P<{k}>{p.pattern})" for k, p in {**PLAIN_NAMES, "profiler": PROFILER_STEP, "eval": EVAL_RANGE}.items()
    ),
    re.IGNORECASE,
)
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


@dataclass
class _Found:
    """Intervals of one level from one convention."""

    how: str
    start: np.ndarray
    end: np.ndarray
    number: np.ndarray  # -1 where the mark carries no number
    rows: np.ndarray


class _Nvtx:
    """The NVTX table as arrays (from a Table or a DataFrame): what the conventions look at."""

    def __init__(self, nvtx):
        table = Table.of(nvtx)
        self.n = len(table)
        self.start, self.end = table[START].astype(np.int64, copy=False), table[END].astype(np.int64, copy=False)
        self.type = table["eventType"]
        self.name, self.domain, self.category = (Names.of(table[c]) for c in ("name", "domain", "category"))
        # row labels: positions for a Table, the frame's index for a DataFrame
        self.labels = np.arange(self.n) if isinstance(nvtx, Table) else nvtx.index.to_numpy()
        self.ranges = np.flatnonzero(is_range(self.type))

    def found(self, rows: np.ndarray, how: str, pattern: re.Pattern | None) -> _Found | None:
        """The intervals of the rows `rows` (positions), numbered from their names."""
        if not len(rows):
            return None
        number = _numbers(self.name.take(rows), pattern)
        return _Found(how, self.start[rows], self.end[rows], number, self.labels[rows])


# ---------------------------------------------------------------------------------------------
# Conventions


def _number_of(name: str, pattern: re.Pattern | None) -> int:
    m = pattern.search(name) if pattern is not None else None
    group = m.group(1) if m is not None and m.re.groups else None
    digits = group if group and group.isdigit() else (re.findall(r"\d+", name) or [None])[-1]
    return -1 if digits is None else int(digits)


def _numbers(names: Names, pattern: re.Pattern | None) -> np.ndarray:
    """The first capture group of `pattern` when it holds digits, else the last integer in the name;
    -1 when there is none (the mark carries no number). Evaluated once per distinct name."""
    codes, inverse = np.unique(names.codes, return_inverse=True)
    texts = [str(names.categories[c]) for c in codes]
    found = _each_text(texts, _LAST_NUMBER) if pattern is None else None
    if found is not None:  # thousands of numbered step names: one scan instead of a search per name
        per_code = np.full(len(texts), -1, np.int64)
        for i, m in found:
            per_code[i] = int(m.group(0))
    else:
        per_code = np.array([_number_of(text, pattern) for text in texts], dtype=np.int64)
    return per_code[inverse] if len(codes) else np.empty(0, np.int64)


_GAP = "\x00"  # joins texts for one scan: no pattern scanned that way matches it, so no match spans two
_LAST_NUMBER = re.compile(r"\d+(?=[^\d\x00]*\x00)")  # the last run of digits before the gap


def _each_text(texts: list[str], regex: re.Pattern) -> list[tuple[int, re.Match]] | None:
    """(index of the text, match) of each match of `regex` in the texts joined by `_GAP` (each text
    followed by one): one scan in C instead of a Python call per text. None when a text holds the gap,
    or for a few texts (then the caller matches them one by one)."""
    if len(texts) < 64:  # a few texts: the calls cost less than the scan's set-up
        return None
    joined = _GAP.join(texts) + _GAP
    if joined.count(_GAP) != len(texts):
        return None
    starts = np.cumsum([0] + [len(t) + 1 for t in texts[:-1]])
    matches = list(regex.finditer(joined))
    index = np.searchsorted(starts, [m.start() for m in matches], side="right") - 1
    return list(zip(index.tolist(), matches))


def _category_ranges(nv: _Nvtx, level: str) -> _Found | None:
    mask = nv.category.take(nv.ranges).flags(lambda c: c.lower() in RANGE_CATEGORIES[level])
    label = "/".join(RANGE_CATEGORIES[level])
    return nv.found(nv.ranges[mask], f"Extra-Deep ranges (category {label})", None)


def _name_ranges(nv: _Nvtx, pattern: re.Pattern, how: str, domain: str | None = None) -> _Found | None:
    # search, not fullmatch: "iteration" finds "iteration 12" and "myapp:iteration 3"; anchor with
    # ^...$ for whole names (docs/usage.md, "Step marks")
    mask = nv.name.take(nv.ranges).flags(lambda n: pattern.search(n) is not None)
    if domain is not None:
        mask &= nv.domain.take(nv.ranges).flags(lambda d: d == domain)
    return nv.found(nv.ranges[mask], how, pattern)


def _default_kinds(nv: _Nvtx) -> np.ndarray:
    """Which built-in name each range has (epoch, train, val, profiler, eval or ""), decided by one
    regular expression per distinct name: exports with a million distinct NVTX names stay fast."""
    texts = [str(n) for n in nv.name.categories]
    found = _each_text(texts, _WHOLE_DEFAULT_NAME)  # the full matches of all names in one scan
    if found is None:
        kinds = np.array([_kind(text) for text in texts] + [""], dtype=object)
    else:
        kinds = np.full(len(texts) + 1, "", dtype=object)
        for i, m in found:  # the kind's group encloses the others, so it closes last
            kinds[i] = m.lastgroup
    return kinds[nv.name.codes[nv.ranges]]


# `_DEFAULT_NAMES.fullmatch` of each text joined by `_each_text`: from a text's start to its end
_WHOLE_DEFAULT_NAME = re.compile(f"(?<![^\\x00])(?:{_DEFAULT_NAMES.pattern})(?=\\x00)", re.IGNORECASE)


def _kind(name: str) -> str:
    m = _DEFAULT_NAMES.fullmatch(name)
    return next((k for k, v in m.groupdict().items() if v is not None), "") if m else ""


def _marks(nv: _Nvtx, level: str) -> _Found | None:
    """Pair Extra-Deep started/ended marks per (level, number) in time order."""
    marks = np.flatnonzero(nv.type == NVTX_MARK)
    if not len(marks):
        return None
    category = np.array([str(c).lower() for c in nv.category.categories] + ["nan"], dtype=object)
    category = category[nv.category.codes[marks]]
    parsed = [_MARK_TEXT.search(str(n)) for n in nv.name.categories] + [None]
    parts = [(m.group(1).lower(), int(m.group(2)), m.group(3).lower()) if m else ("", -1, "") for m in parsed]
    kind, number, state = (np.array([p[i] for p in parts], dtype=object)[nv.name.codes[marks]] for i in range(3))
    if level == "epoch":
        mask = (kind == "epoch") & (np.isin(category, MARK_CATEGORIES[EPOCH]) | (category == ""))
    else:
        mask = (kind == "step") & np.isin(category, MARK_CATEGORIES[level])
    if not mask.any():
        return None
    picked = marks[mask]
    order = np.argsort(nv.start[picked], kind="stable")
    picked, number, state = picked[order], number[mask][order].astype(np.int64), state[mask][order]
    starts, ends, numbers, rows = [], [], [], []
    for value in np.unique(number):
        mine = number == value
        states, times = state[mine], nv.start[picked[mine]]
        expected = np.where(np.arange(len(states)) % 2 == 0, "started", "ended")
        if len(states) % 2 or (states != expected).any():
            what = "epoch" if level == "epoch" else f"{PHASE_NAMES[level]} step"
            raise InputError(
                None,
                f"unbalanced Extra-Deep marks for {what} {value}: found {', '.join(states)}; "
                "every 'started' mark needs one 'ended' mark",
            )
        starts.append(times[0::2])
        ends.append(times[1::2])
        numbers.append(np.full(len(states) // 2, value))
        rows.append(nv.labels[picked[mine]])
    label = "/".join(MARK_CATEGORIES[level])
    return _Found(
        f"Extra-Deep marks (category {label})",
        np.concatenate(starts),
        np.concatenate(ends),
        np.concatenate(numbers).astype(np.int64),
        np.concatenate(rows),
    )


def _profiler_steps(nv: _Nvtx, kinds: np.ndarray, level: str) -> _Found | None:
    """PyTorch ProfilerStep#N; those that start inside an eval/validation range are validation steps."""
    found = nv.found(nv.ranges[kinds == "profiler"], "PyTorch ProfilerStep#N", PROFILER_STEP)
    if found is None or level == "epoch":
        return None
    evals = nv.found(nv.ranges[kinds == "eval"], "eval", EVAL_RANGE)
    in_eval = np.zeros(len(found.start), bool) if evals is None else _inside(found.start, evals.start, evals.end)
    keep = in_eval if level == "val" else ~in_eval
    if not keep.any():
        return None
    found.how += " inside eval ranges" if level == "val" else ""
    return _Found(found.how, found.start[keep], found.end[keep], found.number[keep], found.rows[keep])


def _inside(t: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether each time lies in any of the (possibly nested) intervals [start, end)."""
    order = np.argsort(start, kind="stable")
    start, reach = start[order], np.maximum.accumulate(end[order])
    i = np.searchsorted(start, t, side="right") - 1
    return (i >= 0) & (t < reach[np.maximum(i, 0)])


def parse_pattern(pattern: str, domains: set[str]) -> tuple[re.Pattern, str | None]:
    """`DOMAIN:REGEX` -> (regex, domain) when DOMAIN names an NVTX domain of the export, else (pattern, None)."""
    head, sep, rest = pattern.partition(":")
    domain = head if sep and head in domains else None
    text = rest if domain is not None else pattern
    try:
        return re.compile(text), domain
    except re.error as exc:
        raise InputError(None, f"invalid step pattern {pattern!r}: {exc}") from None


def _find_level(nv: _Nvtx, kinds: np.ndarray, level: str, user_pattern: str | None) -> _Found | None:
    if user_pattern:
        regex, domain = parse_pattern(user_pattern, {str(d) for d in nv.domain.categories})
        where = f" in domain {domain!r}" if domain else ""
        return _name_ranges(nv, regex, f"user pattern {regex.pattern!r}{where}", domain)
    candidates = (
        lambda: _category_ranges(nv, level),
        lambda: _marks(nv, level),
        lambda: nv.found(nv.ranges[kinds == level], "plain range names", PLAIN_NAMES[level]),
        lambda: _profiler_steps(nv, kinds, level),
    )
    for find in candidates:
        found = find()
        if found is not None:
            return found
    return None


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
    nv = _Nvtx(nvtx)
    try:
        kinds = _default_kinds(nv)
        found = {level: _find_level(nv, kinds, level, patterns[level]) for level in LEVELS}
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
        found[level] = _Found(f.how, f.start[keep], f.end[keep], f.number[keep], f.rows[keep]) if keep.any() else None
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


def _epoch_frame(found: _Found | None) -> dict[str, np.ndarray]:
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
