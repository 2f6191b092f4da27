"""Layouts per profile and per run: what the profiles tell, filled in from file names or a manifest.

`read_layout(path)` reads one profile (nsys export or Kineto trace, by content) and returns its
layout fields with their sources. `run_layouts(runs)` combines the files of each run (one point
and repetition of a runs table from `extradeep.io.discover`): fields the profiles agree on, then
the layout columns of the runs table (file-name tokens such as `tp2.pp2.dp2.mbs1.nmb8.zero1.rc0`,
or manifest columns of those names, after `--alias`), then what the world size implies. A profile
value wins over a name; a disagreement is noted. The result has one row per run with a value and a
`<field>_source` column per field.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from extradeep.columns import (
    CHUNKS,
    DP,
    FRAMEWORK,
    GPUS,
    LAYOUT_FIELDS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PASSES,
    PATH,
    PP,
    RECOMPUTE,
    SCHEDULE,
    SOURCE_SUFFIX,
    TP,
    ZERO,
)
from extradeep.errors import InputError
from extradeep.io.formats import KINETO, profile_format
from extradeep.io.parallel.facts import ProfileFacts
from extradeep.io.parallel.infer import Field, infer_layout

RECOMPUTE_CODES = ("none", "selective", "full")  # file-name token rc0 / rc1 / rc2
# file-name tokens (and manifest columns) of layout fields besides the fields' own names; --alias adds
# others. `ranks` is what the token p<N> stands for: the run's GPUs, also when only some were profiled
TOKEN_ALIASES = {"ranks": GPUS, "mbs": MICRO_BATCH, "nmb": MICRO_BATCHES, "vpp": CHUNKS, "rc": RECOMPUTE}
RUN_FIELDS = (GPUS, *LAYOUT_FIELDS)


def profile_facts(path, settings=None, trace=None) -> ProfileFacts:
    """The facts of one profile, read by the reader its first bytes call for (``trace``: a Kineto
    trace already read from ``path``)."""
    if trace is not None or profile_format(path) == KINETO:
        from extradeep.io.parallel.facts_kineto import kineto_facts

        return kineto_facts(path, settings, trace)
    from extradeep.io.parallel.facts_nsys import nsys_facts

    return nsys_facts(path, settings)


def read_layout(path, settings=None, model: dict | None = None, trace=None) -> dict[str, Field]:
    """Layout fields of one profile (InputError naming the file when it cannot be read; ``trace``:
    a Kineto trace already read from ``path``)."""
    return layout_fields(profile_facts(path, settings, trace), model)


def layout_fields(facts: ProfileFacts, model: dict | None = None) -> dict[str, Field]:
    """Layout fields of one profile's facts, with the reader's notes."""
    fields = infer_layout(facts, model)
    fields["notes"] = Field(list(facts.notes), "reader notes")
    return fields


def layout_json(fields: dict[str, Field]) -> dict:
    """The fields of `read_layout` as JSON: name -> {"value", "source"} (what `inspect --json` writes)."""
    return {name: field.to_dict() for name, field in fields.items()}


def run_layouts(
    runs: pd.DataFrame, settings=None, model: dict | None = None, named_by: str = "file name", facts: dict | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """One row per run of a runs table (columns path, app, <params>, rep, rank): its layout fields
    and their sources; plus problem lines for files that could not be read. ``facts`` may hold
    already-read ProfileFacts by path."""
    from extradeep.io.discover import one_format_per_run, param_columns

    runs, _ = one_format_per_run(runs)
    rows, problems = [], []
    keys = ["app", *param_columns(runs), "rep"]  # a run: one point (layout tokens included) and repetition
    for key, group in runs.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        per_file = []
        for path in group[PATH]:
            try:
                f = (facts or {}).get(path) or profile_facts(path, settings)
            except InputError as exc:
                problems.append(str(exc))
                continue
            per_file.append(infer_layout(f, model))
        row = {k: v for k, v in zip(keys, key) if k not in RUN_FIELDS}
        row["point"] = point_label(keys[1:-1], key[1:-1])
        row.update(combine(per_file, group, named_by))
        row["files"] = len(group)
        rows.append(row)
    return pd.DataFrame(rows), problems


def point_label(names, values) -> str:
    """`ranks=4 tp=2 pp=2 ...`: a run's parameters as its file name gives them (one run's key)."""
    return " ".join(f"{k}={_plain(v)}" for k, v in zip(names, values) if pd.notna(v))


def _plain(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


def combine(per_file: list[dict[str, Field]], group: pd.DataFrame, named_by: str) -> dict:
    """Fields of one run: the profiles' majority, else the names, else what the world size implies."""
    out: dict = {}
    for name in RUN_FIELDS:
        seen = [f[name] for f in per_file if name in f and f[name].value is not None]
        value, source = None, "not recorded"
        if seen:
            counts = Counter(f.value for f in seen)
            value, n = counts.most_common(1)[0]
            source = next(f.source for f in seen if f.value == value)
            if len(counts) > 1:
                source += (
                    f" (in {n} of {len(seen)} profiles; others say {', '.join(str(v) for v in counts if v != value)})"
                )
            elif len(seen) > 1:
                source += f" (all {len(seen)} profiles)"
        named, column = _named(group, name)
        if named is not None:
            if value is None:
                value, source = named, f"{named_by} ({column} {named})"
            elif named != value:
                source += f"; the {named_by} says {named}"
        out[name], out[name + SOURCE_SUFFIX] = value, source
    passes = Counter(f[PASSES].value for f in per_file if PASSES in f and f[PASSES].value is not None)
    if out[MICRO_BATCHES] is None and passes and out[CHUNKS]:
        n = passes.most_common(1)[0][0]
        out[MICRO_BATCHES] = n // out[CHUNKS]
        out[MICRO_BATCHES + SOURCE_SUFFIX] = f"{n} backward passes per step / vpp {out[CHUNKS]}"
    _from_world(out, len(group))
    return out


def _named(group: pd.DataFrame, name: str) -> tuple:
    """(value, column) a layout column of the runs table gives (one value for the run), or (None, None)."""
    columns = [name] + [token for token, field in TOKEN_ALIASES.items() if field == name]
    column = next((c for c in columns if c in group and not group[c].isna().all()), None)
    if column is None:
        return None, None
    values = group[column].dropna().unique()
    if len(values) != 1:
        return None, None
    value = values[0]
    if name == RECOMPUTE:
        if isinstance(value, str):
            return (value, column) if value in RECOMPUTE_CODES else (None, None)
        ok = float(value).is_integer() and 0 <= value < 3
        return (RECOMPUTE_CODES[int(value)], column) if ok else (None, None)
    if name in (SCHEDULE, FRAMEWORK):
        return str(value), column
    return (int(value) if float(value).is_integer() else value), column


def _from_world(out: dict, files: int) -> None:
    """World from the number of rank files when neither a profile nor the name records it; a missing
    degree from the world and the other two; the schedule from vpp."""
    if out[GPUS] is None and files:
        out[GPUS], out[GPUS + SOURCE_SUFFIX] = files, f"{files} rank files in the run"
    world = out[GPUS]
    degrees = {r: out[r] for r in (TP, PP, DP)}
    missing = [r for r, v in degrees.items() if v is None]
    if world and len(missing) == 1:
        rest = 1
        for v in degrees.values():
            rest *= v if v is not None else 1
        if world % rest == 0:
            out[missing[0]] = world // rest
            out[missing[0] + SOURCE_SUFFIX] = f"world {world} / the other degrees ({rest})"
    if out[CHUNKS] and out[SCHEDULE] is None:
        schedule = "interleaved" if out[CHUNKS] > 1 else "1f1b"
        out[SCHEDULE], out[SCHEDULE + SOURCE_SUFFIX] = schedule, f"vpp {out[CHUNKS]} ({out[CHUNKS + SOURCE_SUFFIX]})"
    if all(degrees[r] is not None for r in (TP, PP, DP)) and world and degrees[TP] * degrees[PP] * degrees[DP] != world:
        out[GPUS + SOURCE_SUFFIX] += f"; tp x pp x dp = {degrees[TP] * degrees[PP] * degrees[DP]} differs"
    for name in (ZERO, MICRO_BATCH):
        out.setdefault(name, None)
