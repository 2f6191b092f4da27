"""Extra-P text input (PARAMETER, POINTS, REGION, METRIC, DATA lines): read, write and model.

Semantics follow Extra-P 4.2.5's text reader: POINTS lines accumulate coordinates; each DATA line
holds all repetitions of the next coordinate; REGION and METRIC restart the coordinate count.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.errors import InputError

FIELDS = ("PARAMETER", "POINTS", "REGION", "METRIC", "DATA")


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


def read_extrap_text(path) -> pd.DataFrame:
    """Tidy frame (region, metric, <params...>, rep, value) of an Extra-P text file; attrs['params']."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read Extra-P text input ({exc.__class__.__name__})") from None
    params: list[str] = []
    coords: list[tuple[float, ...]] = []
    region, metric, coord_id = "", "", 0
    labels: list[tuple[str, str, int]] = []  # per DATA line: region, metric, coordinate index
    chunks: list[list[float]] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        field, _, rest = line.partition(" ")
        rest = " ".join(rest.split())
        if field not in FIELDS:
            raise InputError(path, f"line {lineno}: unknown field {field!r} (expected one of {', '.join(FIELDS)})")
        if field == "PARAMETER":
            params += rest.split()
        elif field == "POINTS":
            coords += _points(path, lineno, rest, len(params))
        elif field in ("REGION", "METRIC"):
            region, metric = (rest, metric) if field == "REGION" else (region, rest)
            coord_id = 0
        else:
            if coord_id >= len(coords):
                raise InputError(path, f"line {lineno}: more DATA lines than the {len(coords)} POINTS")
            tokens = rest.split()
            if not tokens:
                raise InputError(path, f"line {lineno}: DATA line without values")
            labels.append((region, metric, coord_id, lineno))
            chunks.append(tokens)
            coord_id += 1
    if not params or not chunks:
        raise InputError(path, "no PARAMETER or no DATA lines: not an Extra-P text input")
    if len(set(params)) != len(params):
        raise InputError(path, f"parameter names repeat: {' '.join(params)}")
    return _frame(path, labels, chunks, coords, params)


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
    lines = pd.DataFrame(labels, columns=["region", "metric", "_c", "_line"]).drop(columns="_line")
    df = lines.iloc[line].reset_index(drop=True)
    point = np.asarray(coords, dtype=float)[df.pop("_c").to_numpy()]
    for k, name in enumerate(params):
        df[name] = point[:, k]
    df["rep"] = np.arange(len(line)) - starts[line]
    df["value"] = values
    df.attrs["params"] = params
    return df


def write_extrap_text(path, df: pd.DataFrame, params, value="value", region="region", metric="metric") -> None:
    """Write a tidy frame as Extra-P text input (every region/metric must have every point)."""
    params = list(params)
    points = sorted(set(map(tuple, df[params].to_numpy(float))))
    index = {p: k for k, p in enumerate(points)}
    out = [f"PARAMETER {p}" for p in params]
    if len(params) == 1:
        out.append("POINTS " + " ".join(f"{p[0]:g}" for p in points))
    else:
        out.append("POINTS " + " ".join("(" + " ".join(f"{v:g}" for v in p) + ")" for p in points))
    for (reg, met), part in df.groupby([region, metric], sort=False):
        slots: list[list[float]] = [[] for _ in points]
        for coord, v in zip(map(tuple, part[params].to_numpy(float)), part[value].to_numpy(float)):
            slots[index[coord]].append(v)
        if any(not s for s in slots):
            raise InputError(path, f"region {reg!r} metric {met!r} lacks some points; Extra-P needs all")
        out += [f"REGION {reg}", f"METRIC {met}"] + ["DATA " + " ".join(repr(float(v)) for v in s) for s in slots]
    Path(path).write_text("\n".join(out) + "\n")


def model_extrap_text(path, options=None) -> pd.DataFrame:
    """Read an Extra-P text input and model every region/metric (what `extradeep model file.txt` calls)."""
    from extradeep.modeling.modeler import fit_models

    df = read_extrap_text(path)
    params = df.attrs["params"]
    if len(params) > 3:
        raise InputError(path, f"{len(params)} parameters; at most 3 can be modeled")
    if not np.isfinite(df[params].to_numpy(float)).all():
        raise InputError(path, "a POINTS coordinate is not finite")
    return fit_models(df, params, rep="rep", options=options)
