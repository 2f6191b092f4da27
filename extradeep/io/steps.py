"""Find epochs and training/validation steps in the NVTX events of one export.

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

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.io.frames import NULL_INT, NVTX_MARK, NVTX_RANGE_TYPES, per_category
from extradeep.io.settings import ReaderSettings

LEVELS = ("epoch", "train", "val")
PHASE_NAMES = {"train": "training", "val": "validation"}

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
STEP_COLUMNS = ["epoch", "phase", "step", "start", "end"]


@dataclass
class StepTable:
    """The steps of one export (kept and warm-up), the measured window and what was recognised.

    `steps`: kept steps, columns epoch, phase ("train"/"val"), step, start, end (ns), sorted by
    start. `warmup`: excluded warm-up steps (same columns). `windows`: epoch, start, end of each kept
    epoch (events there but outside every step are "between"). `convention`: level -> what matched.
    `mark_rows`: positions (in the NVTX frame) of the ranges/marks used, so they are not counted as
    user regions. `warnings`: one-line notes for the user.
    """

    steps: pd.DataFrame
    warmup: pd.DataFrame
    windows: pd.DataFrame
    convention: dict[str, str]
    mark_rows: np.ndarray
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Found:
    """Intervals of one level from one convention."""

    how: str
    start: np.ndarray
    end: np.ndarray
    number: np.ndarray  # -1 where the mark carries no number
    rows: np.ndarray


# ---------------------------------------------------------------------------------------------
# Conventions


def _ranges(nvtx: pd.DataFrame) -> pd.DataFrame:
    return nvtx[nvtx["eventType"].isin(NVTX_RANGE_TYPES).to_numpy()]


def _number(names: pd.Series, pattern: re.Pattern | None) -> np.ndarray:
    """The first capture group of `pattern` when it holds digits, else the last integer in the name;
    -1 when there is none (the mark carries no number)."""
    out = np.full(len(names), -1, dtype=np.int64)
    for i, name in enumerate(names):
        m = pattern.search(name) if pattern is not None else None
        group = m.group(1) if m is not None and m.re.groups else None
        digits = group if group and group.isdigit() else (re.findall(r"\d+", name) or [None])[-1]
        if digits is not None:
            out[i] = int(digits)
    return out


def _from_ranges(ranges: pd.DataFrame, mask: np.ndarray, how: str, pattern: re.Pattern | None) -> _Found | None:
    picked = ranges[mask]
    if picked.empty:
        return None
    names = picked["name"].astype(str)
    number = _number(names, pattern)
    return _Found(how, picked["start"].to_numpy(), picked["end"].to_numpy(), number, picked.index.to_numpy())


def _category_ranges(ranges: pd.DataFrame, level: str) -> _Found | None:
    mask = per_category(ranges["category"], lambda c: c.lower() in RANGE_CATEGORIES[level])
    label = "/".join(RANGE_CATEGORIES[level])
    return _from_ranges(ranges, mask, f"Extra-Deep ranges (category {label})", None)


def _name_ranges(ranges: pd.DataFrame, pattern: re.Pattern, how: str, domain: str | None = None) -> _Found | None:
    # search, not fullmatch: "iteration" finds "iteration 12" and "myapp:iteration 3"; anchor with
    # ^...$ for whole names (docs/usage.md, "Step marks")
    mask = per_category(ranges["name"], lambda n: pattern.search(n) is not None)
    if domain is not None:
        mask &= per_category(ranges["domain"], lambda d: d == domain)
    return _from_ranges(ranges, mask, how, pattern)


def _default_kinds(ranges: pd.DataFrame) -> np.ndarray:
    """Which built-in name each range has (epoch, train, val, profiler, eval or ""), decided by one
    regular expression per distinct name: exports with a million distinct NVTX names stay fast."""
    names = ranges["name"].cat.categories.tolist()
    kinds = np.array([_kind(n) for n in names] + [""], dtype=object)
    return kinds[np.asarray(ranges["name"].cat.codes)]


def _kind(name: str) -> str:
    m = _DEFAULT_NAMES.fullmatch(name)
    return next((k for k, v in m.groupdict().items() if v is not None), "") if m else ""


def _marks(nvtx: pd.DataFrame, level: str) -> _Found | None:
    """Pair Extra-Deep started/ended marks per (level, number) in time order."""
    marks = nvtx[(nvtx["eventType"] == NVTX_MARK).to_numpy()]
    if marks.empty:
        return None
    category = marks["category"].astype(str).str.lower()
    parsed = marks["name"].astype(str).str.extract(_MARK_TEXT.pattern, flags=re.IGNORECASE)
    kind = parsed[0].str.lower()
    if level == "epoch":
        mask = (kind == "epoch") & (category.isin(MARK_CATEGORIES["epoch"]) | (category == ""))
    else:
        mask = (kind == "step") & category.isin(MARK_CATEGORIES[level])
    picked = marks[mask.to_numpy()].assign(
        number=parsed.loc[mask, 1].astype(int), state=parsed.loc[mask, 2].str.lower()
    )
    if picked.empty:
        return None
    picked = picked.sort_values("start", kind="stable")
    starts, ends, numbers, rows = [], [], [], []
    for number, group in picked.groupby("number", sort=True):
        states = group["state"].to_numpy()
        expected = np.where(np.arange(len(states)) % 2 == 0, "started", "ended")
        if len(states) % 2 or (states != expected).any():
            what = "epoch" if level == "epoch" else f"{PHASE_NAMES[level]} step"
            raise InputError(
                None,
                f"unbalanced Extra-Deep marks for {what} {number}: found {', '.join(states)}; "
                "every 'started' mark needs one 'ended' mark",
            )
        times = group["start"].to_numpy()
        starts.append(times[0::2])
        ends.append(times[1::2])
        numbers.append(np.full(len(states) // 2, number))
        rows.append(group.index.to_numpy())
    label = "/".join(MARK_CATEGORIES[level])
    return _Found(
        f"Extra-Deep marks (category {label})",
        np.concatenate(starts),
        np.concatenate(ends),
        np.concatenate(numbers).astype(np.int64),
        np.concatenate(rows),
    )


def _profiler_steps(ranges: pd.DataFrame, kinds: np.ndarray, level: str) -> _Found | None:
    """PyTorch ProfilerStep#N; those that start inside an eval/validation range are validation steps."""
    found = _from_ranges(ranges, kinds == "profiler", "PyTorch ProfilerStep#N", PROFILER_STEP)
    if found is None or level == "epoch":
        return None
    evals = _from_ranges(ranges, kinds == "eval", "eval", EVAL_RANGE)
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


def _find_level(
    nvtx: pd.DataFrame, ranges: pd.DataFrame, kinds: np.ndarray, level: str, user_pattern: str | None
) -> _Found | None:
    if user_pattern:
        regex, domain = parse_pattern(user_pattern, set(map(str, nvtx["domain"].cat.categories)))
        where = f" in domain {domain!r}" if domain else ""
        return _name_ranges(ranges, regex, f"user pattern {regex.pattern!r}{where}", domain)
    candidates = (
        lambda: _category_ranges(ranges, level),
        lambda: _marks(nvtx, level),
        lambda: _from_ranges(ranges, kinds == level, "plain range names", PLAIN_NAMES[level]),
        lambda: _profiler_steps(ranges, kinds, level),
    )
    for find in candidates:
        found = find()
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------------------------------------
# Step table


def find_steps(nvtx: pd.DataFrame, settings=None, source=None) -> StepTable:
    """The StepTable of one export's NVTX events (`extradeep.io.nsys.events.nvtx` or the Kineto reader's `tables.nvtx_table`).

    Raises InputError (naming `source`) when no steps are found (listing the most frequent NVTX
    names), when marks are unbalanced, when steps overlap, or when every epoch is warm-up.
    """
    settings = ReaderSettings.from_any(settings)
    patterns = {"epoch": settings.epoch_pattern, "train": settings.train_step_pattern, "val": settings.val_step_pattern}
    try:
        ranges = _ranges(nvtx)
        kinds = _default_kinds(ranges)
        found = {level: _find_level(nvtx, ranges, kinds, level, patterns[level]) for level in LEVELS}
    except InputError as exc:
        raise InputError(source, exc.problem) from None
    warnings = _close_open_ranges(found)
    unmatched = [
        f"{level} pattern {patterns[level]!r} matched no NVTX range name{closest_names(nvtx, patterns[level])}"
        for level in LEVELS
        if patterns[level] and found[level] is None
    ]
    if found["train"] is None and found["val"] is None:
        raise InputError(
            source, "; ".join(unmatched) if unmatched and not _ranges(nvtx).empty else no_steps_message(nvtx)
        )
    steps = pd.concat(
        [_interval_frame(found[level]).assign(phase=level) for level in ("train", "val") if found[level]],
        ignore_index=True,
    ).sort_values("start", kind="stable", ignore_index=True)
    _check_overlap(steps, source)
    epochs = _epoch_frame(found["epoch"])
    steps["epoch"] = _assign_epochs(steps, epochs, warnings) if found["epoch"] else _infer_epochs(steps)
    steps["step"] = _step_numbers(steps)
    warnings += unmatched
    kept, warmup = _split_warmup(steps, settings, warnings, source)
    convention = {
        level: (f"{found[level].how} ({len(found[level].start)})" if found[level] else "none") for level in LEVELS
    }
    if found["epoch"] is None:
        n = steps["epoch"].nunique()
        convention["epoch"] = (
            f"inferred: a validation phase ends each epoch ({n})" if n > 1 else "none (one epoch assumed)"
        )
    rows = np.concatenate([f.rows for f in found.values() if f is not None]).astype(np.int64)
    return StepTable(kept[STEP_COLUMNS], warmup[STEP_COLUMNS], _windows(kept, epochs), convention, rows, warnings)


def _close_open_ranges(found: dict) -> list[str]:
    """Ranges still open when the capture stopped (end NULL): an epoch runs to the end of the
    capture; a step is left out (its work is incomplete) and a warning says so."""
    warnings = []
    if found["epoch"] is not None:
        found["epoch"].end = np.where(found["epoch"].end == NULL_INT, np.iinfo(np.int64).max, found["epoch"].end)
    for level in ("train", "val"):
        f = found[level]
        if f is None or not (f.end == NULL_INT).any():
            continue
        keep = f.end != NULL_INT
        warnings.append(
            f"{int((~keep).sum())} {PHASE_NAMES[level]} step range(s) never ended (capture stopped inside); left out"
        )
        found[level] = _Found(f.how, f.start[keep], f.end[keep], f.number[keep], f.rows[keep]) if keep.any() else None
    return warnings


def _interval_frame(found: _Found) -> pd.DataFrame:
    return pd.DataFrame({"start": found.start, "end": found.end, "number": found.number})


def _check_overlap(steps: pd.DataFrame, source) -> None:
    start, end = steps["start"].to_numpy(), steps["end"].to_numpy()
    bad = np.flatnonzero(start[1:] < np.maximum.accumulate(end)[:-1])
    if len(bad):
        a, b = steps.iloc[bad[0]], steps.iloc[bad[0] + 1]
        raise InputError(
            source,
            f"{len(bad)} step(s) overlap an earlier step (first: {PHASE_NAMES[b.phase]} step {b.number} at "
            f"{b.start} ns inside {PHASE_NAMES[a.phase]} step {a.number}); steps must not overlap "
            "(one export per rank; several processes in one export are not supported)",
        )


def _epoch_frame(found: _Found | None) -> pd.DataFrame:
    """Epochs sorted by start, numbered by their marks where those are unique, else by time order."""
    if found is None:
        return pd.DataFrame(
            {"epoch": np.empty(0, np.int64), "start": np.empty(0, np.int64), "end": np.empty(0, np.int64)}
        )
    frame = _interval_frame(found).sort_values("start", kind="stable", ignore_index=True)
    numbers = frame["number"].to_numpy()
    usable = (numbers >= 0).all() and len(np.unique(numbers)) == len(numbers)
    frame["epoch"] = numbers if usable else np.arange(len(frame))
    return frame[["epoch", "start", "end"]]


def _assign_epochs(steps: pd.DataFrame, epochs: pd.DataFrame, warnings: list[str]) -> np.ndarray:
    """Epoch of each step: the epoch range containing its start (the preceding one if none does)."""
    if epochs.empty:
        return np.zeros(len(steps), dtype=np.int64)
    start = steps["start"].to_numpy()
    idx = np.searchsorted(epochs["start"].to_numpy(), start, side="right") - 1
    inside = (idx >= 0) & (start < epochs["end"].to_numpy()[np.maximum(idx, 0)])
    if not inside.all():
        warnings.append(
            f"{int((~inside).sum())} step(s) lie outside every epoch range; assigned to the preceding epoch"
        )
    number = epochs["epoch"].to_numpy()[np.maximum(idx, 0)]
    return np.where(idx >= 0, number, -1)


def _infer_epochs(steps: pd.DataFrame) -> np.ndarray:
    """Without epoch marks, a training step that follows a validation step starts a new epoch."""
    train = (steps["phase"] == "train").to_numpy()
    after_val = np.concatenate(([False], ~train[:-1]))
    return np.cumsum(train & after_val).astype(np.int64)


def _step_numbers(steps: pd.DataFrame) -> np.ndarray:
    """The marks' numbers where they are unique within (epoch, phase), else 0, 1, ... in time order."""
    out = np.empty(len(steps), dtype=np.int64)
    for _, group in steps.groupby(["epoch", "phase"], sort=False):
        numbers = group["number"].to_numpy()
        usable = (numbers >= 0).all() and len(np.unique(numbers)) == len(numbers)
        out[group.index.to_numpy()] = numbers if usable else np.arange(len(group))
    return out


def _split_warmup(steps: pd.DataFrame, settings: ReaderSettings, warnings: list[str], source):
    """(kept, warm-up) steps: the first `warmup_epochs` epochs, or the first steps of a single epoch."""
    order = steps.groupby("epoch", sort=False)["start"].min().sort_values(kind="stable").index.to_numpy()
    n_warm = settings.warmup_epochs
    if n_warm == 0:
        return steps, steps.iloc[:0]
    if len(order) > n_warm:
        warm = steps["epoch"].isin(order[:n_warm]).to_numpy()
        return steps[~warm], steps[warm]
    if len(order) > 1:
        raise InputError(
            source, f"all {len(order)} epochs are warm-up (warm-up epochs = {n_warm}); nothing is left to measure"
        )
    rank_in_phase = steps.groupby("phase").cumcount().to_numpy()
    per_phase = steps.groupby("phase")["start"].transform("size").to_numpy()
    warm = (rank_in_phase < settings.warmup_steps) & (per_phase > settings.warmup_steps)
    if settings.warmup_steps:
        dropped = ", ".join(f"{n} {PHASE_NAMES[p]}" for p, n in steps[warm].groupby("phase").size().items())
        warnings.append(
            f"only one epoch: excluded its first {settings.warmup_steps} step(s) per phase as warm-up "
            f"({dropped or 'none: too few steps'}) instead of a whole epoch"
        )
    return steps[~warm], steps[warm]


def _windows(kept: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """Per kept epoch, the span whose events outside every step count as "between": the epoch range
    widened to cover its steps (or the span of its steps when epochs are not marked)."""
    span = kept.groupby("epoch").agg(start=("start", "min"), end=("end", "max")).reset_index()
    if not epochs.empty:
        idx = pd.Index(epochs["epoch"]).get_indexer(span["epoch"])  # -1: steps outside every epoch range
        has, pick = idx >= 0, np.maximum(idx, 0)
        start, end = span["start"].to_numpy(np.int64), span["end"].to_numpy(np.int64)
        span["start"] = np.where(has, np.minimum(start, epochs["start"].to_numpy(np.int64)[pick]), start)
        span["end"] = np.where(has, np.maximum(end, epochs["end"].to_numpy(np.int64)[pick]), end)
    return span.sort_values("start", ignore_index=True)


def no_steps_message(nvtx: pd.DataFrame, top: int = 8) -> str:
    """Why no steps were found, with the most frequent NVTX range names to write a pattern from."""
    ranges = _ranges(nvtx)
    if ranges.empty:
        return (
            "no NVTX ranges, so no training steps to measure; profile with `nsys profile -t cuda,nvtx` and mark "
            "steps (extradeep.capture.marks, PyTorch's profiler, or your own NVTX ranges plus --train-step-pattern)"
        )
    counts = ranges["name"].value_counts().head(top)
    names = ", ".join(f"{shorten(name)!r} x{n}" for name, n in counts.items())
    return (
        "no step marks found (Extra-Deep ranges or marks, ProfilerStep#N, or names like 'epoch 3', "
        f"'train_step 4', 'val_step 1'); most frequent NVTX ranges: {names}; "
        "give --train-step-pattern (and --epoch-pattern, --val-step-pattern)"
    )


def closest_names(nvtx: pd.DataFrame, pattern: str, n: int = 5) -> str:
    """'; closest names: ...' (the NVTX range names most like `pattern`), or '' when there are none."""
    import difflib

    names = [str(x) for x in _ranges(nvtx)["name"].dropna().unique()]
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
