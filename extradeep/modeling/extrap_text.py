"""Extra-P text input (PARAMETER, POINTS, REGION, METRIC, DATA lines): read, write and model.

Semantics follow Extra-P 4.2.5's text reader: POINTS lines accumulate coordinates; each DATA line
holds all repetitions of the next coordinate; REGION and METRIC restart the coordinate count.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import CATEGORY, EPOCH, KIND, METRIC, PHASE, RANK, REGION, REP, STEP, VALUE
from extradeep.errors import InputError, require_regular_file

FIELDS = ("PARAMETER", "POINTS", "REGION", "METRIC", "DATA")
# The tidy frame's own columns, and those the analysis adds beside the parameters (a plain table's
# kind and category, a point summary's spread): a parameter of the same name gets the column
# "parameter NAME" instead (attrs["names"] maps it back for formulas), so no user name can
# overwrite one of them.
RESERVED = frozenset(
    {REGION, KIND, CATEGORY, METRIC, PHASE, EPOCH, STEP, REP, RANK, VALUE, "rep_min", "rep_max", "n_reps"}
)
MAX_PARAMETERS = 4  # as Extra-P's text format
EXTRAP_MIN_POINTS = 2  # Extra-P models fewer than 5 values of a parameter too, with a warning


def _numbers(path, lineno: int, text: str) -> list[float]:
    try:
        return [float(t) for t in text.split()]
    except ValueError:
        raise InputError(path, f"line {lineno}: not a number in {text!r}") from None


def _points(path, lineno: int, text: str, n_params: int) -> list[tuple[float, ...]]:
    if n_params == 0:
        raise InputError(path, f"line {lineno}: POINTS before any PARAMETER line")
    if "(" in text:
        groups = re.findall(r"\(([^()]*)\)", text)
        coords = [tuple(_numbers(path, lineno, g)) for g in groups]
    else:
        values = _numbers(path, lineno, text)
        if n_params != 1:
            raise InputError(path, f"line {lineno}: {n_params} parameters need points written as (a b ...)")
        coords = [(v,) for v in values]
    bad = [c for c in coords if len(c) != n_params]
    if bad:
        raise InputError(path, f"line {lineno}: point {bad[0]} does not have {n_params} coordinates")
    return coords


class _Parse:
    """The state of one pass over the lines (Extra-P's semantics: REGION and METRIC restart the point count)."""

    def __init__(self, path: Path):
        self.path = path
        self.params: list[str] = []
        self.coords: list[tuple[float, ...]] = []
        self.first_seen: dict[tuple[float, ...], int] = {}  # point -> line of its POINTS
        self.region, self.metric, self.coord_id = "", "", 0
        self.labels: list[tuple[str, str, int, int]] = []  # per DATA line: region, metric, point, line
        self.chunks: list[list[str]] = []

    def line(self, lineno: int, field: str, rest: str) -> None:
        path = self.path
        if field == "PARAMETER":
            self.params += rest.split()
            if len(self.params) > MAX_PARAMETERS:
                raise InputError(
                    path, f"line {lineno}: {len(self.params)} parameters; Extra-P's text format has 1 to 4"
                )
        elif field == "POINTS":
            for point in _points(path, lineno, rest, len(self.params)):
                if point in self.first_seen:
                    shown = "(" + " ".join(f"{v:g}" for v in point) + ")"
                    first = self.first_seen[point]
                    where = "twice on this line" if first == lineno else f"twice (first on line {first})"
                    raise InputError(
                        path,
                        f"line {lineno}: point {shown} is listed {where}; each point's values belong on one DATA line",
                    )
                self.first_seen[point] = lineno
                self.coords.append(point)
        elif field in ("REGION", "METRIC"):
            self.region, self.metric = (rest, self.metric) if field == "REGION" else (self.region, rest)
            self.coord_id = 0
        else:
            if self.coord_id >= len(self.coords):
                raise InputError(path, f"line {lineno}: more DATA lines than the {len(self.coords)} POINTS")
            tokens = rest.split()
            if not tokens:
                raise InputError(path, f"line {lineno}: DATA line without values")
            self.labels.append((self.region, self.metric, self.coord_id, lineno))
            self.chunks.append(tokens)
            self.coord_id += 1


def read_extrap_text(path) -> pd.DataFrame:
    """Tidy frame (region, metric, <params...>, rep, value) of an Extra-P text file.

    attrs['params'] lists the parameter columns; attrs['names'] maps a column to the file's name
    where the two differ (a parameter named like one of the frame's own columns, see RESERVED).
    Fields are separated by any whitespace (spaces or tabs), as in Extra-P.
    """
    path = Path(path)
    require_regular_file(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read Extra-P text input ({exc.__class__.__name__})") from None
    parse = _Parse(path)
    for lineno, raw in enumerate(lines, start=1):
        fields = raw.split(None, 1)
        if not fields or fields[0].startswith("#"):
            continue
        field, rest = fields[0], " ".join(fields[1].split()) if len(fields) > 1 else ""
        if field not in FIELDS:
            raise InputError(path, f"line {lineno}: unknown field {field!r} (expected one of {', '.join(FIELDS)})")
        parse.line(lineno, field, rest)
    params = parse.params
    if not params or not parse.chunks:
        raise InputError(path, "no PARAMETER or no DATA lines: not an Extra-P text input")
    if len(set(params)) != len(params):
        raise InputError(path, f"parameter names repeat: {' '.join(params)}")
    columns = [f"parameter {p}" if p in RESERVED else p for p in params]
    df = _frame(path, parse.labels, parse.chunks, parse.coords, columns)
    _check_complete(path, parse)
    df.attrs["names"] = {c: p for c, p in zip(columns, params) if c != p}
    return df


def _check_complete(path, parse: _Parse) -> None:
    """Every region's metric has one DATA line per point, as Extra-P requires (it refuses the file
    otherwise): fewer lines would silently model the first points only."""
    counts: dict[tuple[str, str], list[int]] = {}
    for region, metric, _, lineno in parse.labels:
        counts.setdefault((region, metric), []).append(lineno)
    for (region, metric), linenos in counts.items():
        if len(linenos) < len(parse.coords):
            raise InputError(
                path,
                f"region {region!r} metric {metric!r} (DATA from line {linenos[0]}): {len(linenos)} DATA line(s) "
                f"for {len(parse.coords)} POINTS; each point needs its DATA line",
            )


def _frame(path, labels, chunks, coords, params) -> pd.DataFrame:
    """Tidy frame from DATA lines (token lists): one row per repetition value."""
    try:  # one conversion for the whole file; find the culprit only when it fails
        values = np.array([t for c in chunks for t in c], dtype=float)
    except ValueError:
        for (*_, lineno), tokens in zip(labels, chunks):
            _numbers(path, lineno, " ".join(tokens))
        raise
    counts = np.array([len(c) for c in chunks])
    line = np.repeat(np.arange(len(chunks)), counts)
    starts = np.cumsum(counts) - counts
    lines = pd.DataFrame(labels, columns=[REGION, METRIC, "_c", "_line"]).drop(columns="_line")
    df = lines.iloc[line].reset_index(drop=True)
    point = np.asarray(coords, dtype=float)[df.pop("_c").to_numpy()]
    df = pd.concat([df, pd.DataFrame(point, columns=params)], axis=1)
    df[REP] = np.arange(len(line)) - starts[line]
    df[VALUE] = values
    df.attrs["params"] = list(params)
    return df


def _coordinate(v: float) -> str:
    """A coordinate as short as it stays exact (4, not 4.0; 1000001, not 1e+06)."""
    short = f"{v:g}"
    return short if float(short) == v else repr(float(v))


def write_extrap_text(path, df: pd.DataFrame, params, value=VALUE, region=REGION, metric=METRIC) -> None:
    """Write a tidy frame as Extra-P text input (every region/metric must have every point).

    A column renamed by the reader (df.attrs['names']) is written under the file's name again."""
    params = list(params)
    names = [df.attrs.get("names", {}).get(p, p) for p in params]
    spaced = [n for n in names if len(str(n).split()) != 1]
    if spaced:
        raise InputError(path, f"parameter name {spaced[0]!r} is empty or holds whitespace, which Extra-P cannot read")
    points = sorted(set(map(tuple, df[params].to_numpy(float))))
    index = {p: k for k, p in enumerate(points)}
    out = [f"PARAMETER {p}" for p in names]
    if len(params) == 1:
        out.append("POINTS " + " ".join(_coordinate(p[0]) for p in points))
    else:
        out.append("POINTS " + " ".join("(" + " ".join(_coordinate(v) for v in p) + ")" for p in points))
    for (reg, met), part in df.groupby([region, metric], sort=False):
        slots: list[list[float]] = [[] for _ in points]
        for coord, v in zip(map(tuple, part[params].to_numpy(float)), part[value].to_numpy(float)):
            slots[index[coord]].append(v)
        if any(not s for s in slots):
            raise InputError(path, f"region {reg!r} metric {met!r} lacks some points; Extra-P needs all")
        out += [f"REGION {reg}", f"METRIC {met}"] + ["DATA " + " ".join(repr(float(v)) for v in s) for s in slots]
    Path(path).write_text("\n".join(out) + "\n")


def text_model_options(options, table: pd.DataFrame):
    """Modeler options for an Extra-P text input: its formulas show the file's parameter names (see
    read_extrap_text), and, unless the options set min_points, a region with fewer than 5 values of
    a parameter is modeled anyway, as Extra-P does; its model carries a warning (modeler.fit_models)."""
    if options is not None and not isinstance(options, dict):
        return options  # a configured PMNFModeler is used as it is
    options = dict(options or {})
    options.setdefault("min_points", EXTRAP_MIN_POINTS)
    names = table.attrs.get("names") or {}
    if names:
        options["names"] = {**names, **options.get("names", {})}
    return options


def model_extrap_text(path, options=None) -> pd.DataFrame:
    """Read an Extra-P text input and model every region/metric (what `extradeep model file.txt` calls)."""
    from extradeep.modeling.modeler import fit_models

    df = read_extrap_text(path)
    params = df.attrs["params"]
    if not np.isfinite(df[params].to_numpy(float)).all():
        raise InputError(path, "a POINTS coordinate is not finite")
    return fit_models(df, params, rep=REP, options=text_model_options(options, df))
