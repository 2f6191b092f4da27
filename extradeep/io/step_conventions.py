"""The conventions that say which NVTX ranges and marks of one profile are epochs and steps.

Per level (epoch, train, val) each convention looks at the NVTX columns as arrays and returns the
intervals it recognises (`Found`): Extra-Deep ranges (registered categories), Extra-Deep
started/ended marks, plain range names, PyTorch `ProfilerStep#N` (validation inside an eval range),
or a user pattern (`DOMAIN:REGEX`), which replaces the defaults of its level; `find_level` tries
them in that order. Recognising marks is its own stage, apart from what `steps.find_steps` does with
the intervals afterwards (ranges left open, overlap, epochs, step numbers, warm-up, windows); the
names are matched once per distinct text, in one scan where there are many, so that exports with a
million distinct NVTX names stay fast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from extradeep.columns import EPOCH, TRAIN, VAL
from extradeep.errors import InputError
from extradeep.io.frames import NVTX_MARK, Names, Table, is_range

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


@dataclass
class Found:
    """Intervals of one level from one convention."""

    how: str
    start: np.ndarray
    end: np.ndarray
    number: np.ndarray  # -1 where the mark carries no number
    rows: np.ndarray


class Nvtx:
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

    def found(self, rows: np.ndarray, how: str, pattern: re.Pattern | None) -> Found | None:
        """The intervals of the rows `rows` (positions), numbered from their names."""
        if not len(rows):
            return None
        number = _numbers(self.name.take(rows), pattern)
        return Found(how, self.start[rows], self.end[rows], number, self.labels[rows])


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


def _category_ranges(nv: Nvtx, level: str) -> Found | None:
    mask = nv.category.take(nv.ranges).flags(lambda c: c.lower() in RANGE_CATEGORIES[level])
    label = "/".join(RANGE_CATEGORIES[level])
    return nv.found(nv.ranges[mask], f"Extra-Deep ranges (category {label})", None)


def _name_ranges(nv: Nvtx, pattern: re.Pattern, how: str, domain: str | None = None) -> Found | None:
    # search, not fullmatch: "iteration" finds "iteration 12" and "myapp:iteration 3"; anchor with
    # ^...$ for whole names (docs/usage.md, "Step marks")
    mask = nv.name.take(nv.ranges).flags(lambda n: pattern.search(n) is not None)
    if domain is not None:
        mask &= nv.domain.take(nv.ranges).flags(lambda d: d == domain)
    return nv.found(nv.ranges[mask], how, pattern)


def default_kinds(nv: Nvtx) -> np.ndarray:
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


def _marks(nv: Nvtx, level: str) -> Found | None:
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
    return Found(
        f"Extra-Deep marks (category {label})",
        np.concatenate(starts),
        np.concatenate(ends),
        np.concatenate(numbers).astype(np.int64),
        np.concatenate(rows),
    )


def _profiler_steps(nv: Nvtx, kinds: np.ndarray, level: str) -> Found | None:
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
    return Found(found.how, found.start[keep], found.end[keep], found.number[keep], found.rows[keep])


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


def find_level(nv: Nvtx, kinds: np.ndarray, level: str, user_pattern: str | None) -> Found | None:
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
