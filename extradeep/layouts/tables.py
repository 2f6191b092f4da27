"""Measured layouts as input: a CSV table of configurations and their step times, like the Extra-P
text input but for layouts, and the tidy per-part observations that profiles give.

A **layout table** has one row per run and a header naming its columns; names are matched loosely
(case, spaces and punctuation do not matter) against :data:`ALIASES`, so the published tables read
as they are: vTrain's ``# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence
length,tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)`` and
Megatron-LM's ``params_billion,heads,hidden,layers,t,p,gpus,batch,tflops_per_gpu,...``. Lines before
the header that start with ``#`` are comments. The measured value is a step time (``step_time`` in
seconds, ``iteration time (ms)``, ``time_ms``) or the achieved teraFLOP/s per GPU, turned into a step
time by the formula that defines it (Narayanan et al., SC'21, eq. 3). Columns a table lacks come
from ``defaults`` (a model description, a dict). A bad file gives one line naming it and the row.

**Per-part observations** (from profiles; :func:`check_part_observations`): one row per layout and
part with the layout and shape columns of :func:`extradeep.layouts.space.layout_frame`, ``part``
(one of :data:`extradeep.columns.LAYOUT_PARTS`), ``metric`` ("time": seconds per step on the rank
of the slowest stage, median over steps and ranks; "bytes": the peak memory per GPU, part "memory")
and ``value``.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    CHUNKS,
    DP,
    GLOBAL_BATCH,
    GPUS,
    HEADS,
    HIDDEN,
    IN_BACKWARD,
    LAYERS,
    LAYOUT_PARTS,
    METRIC,
    MICRO_BATCH,
    MICRO_BATCHES,
    PART,
    PART_DP,
    PP,
    RECOMPUTE,
    SCHEDULE,
    SEQ_LEN,
    STEP_TIME,
    TIME,
    TP,
    VALUE,
    VOCAB,
    WORKLOAD,
    ZERO,
)
from extradeep.errors import InputError, read_problem
from extradeep.layouts.space import layout_frame
from extradeep.layouts.workload import TransformerShape, training_flops

PARAMS_BILLION = "params_billion"
TIME_MS, TFLOPS = "time_ms", "tflops_per_gpu"

ALIASES = {
    GPUS: ("gpus", "numgpus", "ngpus", "ranks"),
    GLOBAL_BATCH: ("globalbatch", "globalbatchsize", "batch", "batchsize"),
    MICRO_BATCH: ("microbatch", "microbatchsize", "mbs"),
    MICRO_BATCHES: ("microbatches", "nummicrobatches", "gradientaccumulationsteps"),
    HIDDEN: ("hidden", "hiddensize"),
    HEADS: ("heads", "attentionheads", "numattentionheads"),
    LAYERS: ("layers", "numlayers"),
    SEQ_LEN: ("seqlen", "sequencelength", "seqlength", "maxlength"),
    VOCAB: ("vocab", "vocabulary", "vocabsize"),
    TP: ("tp", "t", "tensorparallelism", "tensorparallelsize", "tensormodelparallelsize"),
    DP: ("dp", "d", "dataparallelism", "dataparallelsize"),
    PP: ("pp", "p", "pipelineparallelism", "pipelineparallelsize", "pipelinemodelparallelsize"),
    ZERO: ("zero", "zerostage"),
    RECOMPUTE: ("recompute", "recomputation", "activationrecomputation"),
    SCHEDULE: ("schedule", "pipelineschedule"),
    CHUNKS: ("chunks", "virtualstages", "virtualpipelinestages"),
    STEP_TIME: ("steptime", "steptimes", "iterationtimes"),
    TIME_MS: ("iterationtimems", "steptimems", "timems", "iterationtime"),
    TFLOPS: ("tflopspergpu", "achievedteraflopspergpu", "teraflopspergpu"),
    PARAMS_BILLION: ("paramsbillion", "parametersbillion", "parameters"),
    WORKLOAD: ("workload", "model", "name"),
}
_LOOKUP = {alias: column for column, names in ALIASES.items() for alias in names}
TEXT_COLUMNS = (RECOMPUTE, SCHEDULE, WORKLOAD)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def read_layout_table(path, defaults: TransformerShape | dict | None = None, recompute: str = "full") -> pd.DataFrame:
    """A checked layout frame (see :func:`extradeep.layouts.space.layout_frame`) with ``step_time``
    in seconds and ``workload`` (a label per model shape) from a CSV table of measured layouts."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the layout table ({read_problem(exc)})") from None
    header, body = _split(path, text)
    rows = [r for r in csv.reader(io.StringIO(body)) if r and not r[0].lstrip().startswith("#")]
    if not rows:
        raise InputError(path, "no rows under the header")
    bad = next((i for i, r in enumerate(rows) if len(r) != len(header)), None)
    if bad is not None:
        raise InputError(path, f"row {bad + 1} has {len(rows[bad])} fields, the header {len(header)}")
    columns = [_LOOKUP.get(_key(h), h.strip()) for h in header]
    _check_unique(path, header, columns)
    frame = pd.DataFrame(rows, columns=columns)
    frame = frame[[c for c in dict.fromkeys(columns) if c in ALIASES]]
    for column in frame.columns:
        if column not in TEXT_COLUMNS:
            frame[column] = _numbers(path, frame[column], column)
    frame = _step_times(path, frame, defaults, recompute)
    if RECOMPUTE not in frame:
        frame[RECOMPUTE] = recompute
    shape = defaults if isinstance(defaults, TransformerShape) else None
    if isinstance(defaults, dict):
        for key, value in defaults.items():
            if key not in frame:
                frame[key] = value
    frame = layout_frame(frame, shape, source=path)
    if WORKLOAD not in frame:
        frame[WORKLOAD] = _labels(frame)
    return frame.drop(columns=[c for c in (TIME_MS, TFLOPS) if c in frame])


def _check_unique(path, header: list[str], columns: list[str]) -> None:
    """Two columns that give the same field (``tp`` and ``tensor parallelism``, or a repeated name)
    would leave it ambiguous which one counts."""
    for i, column in enumerate(columns):
        if column in ALIASES and column in columns[:i]:
            first = header[columns.index(column)].strip()
            raise InputError(path, f"columns {first!r} and {header[i].strip()!r} both give {column}; keep one")


def _split(path, text: str) -> tuple[list[str], str]:
    """The header's fields and the text below it: the first line that is not a comment, or the
    comment line just above it when that names the columns (vTrain writes its header as '# GPUs,...')."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")), None)
    if first is None:
        raise InputError(path, "empty layout table")
    for i in (first, first - 1):
        if i < 0:
            continue
        fields = [f.strip() for f in next(csv.reader([lines[i].lstrip("#").strip()]), [])]
        if sum(_key(f) in _LOOKUP for f in fields) >= 3:
            return fields, "\n".join(lines[i + 1 :])
    raise InputError(path, "no header naming the layout's columns (tp, pp, dp or gpus, micro batch, step time, ...)")


def _numbers(path, column: pd.Series, name: str) -> pd.Series:
    values = pd.to_numeric(column.str.strip(), errors="coerce")
    bad = values.isna() | ~np.isfinite(values) | (values <= 0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(path, f"row {row + 1}: {name} must be a number > 0, got {column.iloc[row]!r}")
    return values


def _step_times(path, frame: pd.DataFrame, defaults, recompute: str) -> pd.DataFrame:
    if STEP_TIME in frame:
        return frame
    if TIME_MS in frame:
        frame[STEP_TIME] = frame[TIME_MS] / 1e3
        return frame
    if TFLOPS not in frame:
        raise InputError(path, "no measured value: give step_time (s), iteration time (ms) or tflops_per_gpu")
    vocab = frame[VOCAB] if VOCAB in frame else _default(defaults, VOCAB, 51200)
    seq = frame[SEQ_LEN] if SEQ_LEN in frame else _default(defaults, SEQ_LEN, None)
    if seq is None:
        raise InputError(path, "turning teraFLOP/s into step times needs the sequence length (seq_len)")
    flops = training_flops(frame[GLOBAL_BATCH], seq, frame[LAYERS], frame[HIDDEN], vocab, recompute == "full")
    frame[STEP_TIME] = flops / (frame[TFLOPS] * 1e12 * frame[GPUS])
    return frame


def _default(defaults, key: str, fallback):
    if isinstance(defaults, TransformerShape):
        return getattr(defaults, key)
    if isinstance(defaults, dict):
        return defaults.get(key, fallback)
    return fallback


def _labels(frame: pd.DataFrame) -> pd.Series:
    """'3.6B' from a parameter count, else 'l x h' from the shape."""
    if PARAMS_BILLION in frame:
        return frame[PARAMS_BILLION].map(lambda v: f"{v:g}B")
    return frame[LAYERS].astype(str) + " x " + frame[HIDDEN].astype(str)


def check_part_observations(frame: pd.DataFrame, source="per-part observations") -> pd.DataFrame:
    """The per-part observations checked: part names known, metric time or bytes (bytes only for
    the memory part; dp_sync may also carry in_backward, a share in [0, 1]), values finite and >= 0,
    layouts valid. Returns the completed frame."""
    for column in (PART, METRIC, VALUE):
        if column not in frame:
            raise InputError(source, f"no {column} column")
    unknown = sorted(set(frame[PART]) - set(LAYOUT_PARTS))
    if unknown:
        raise InputError(source, f"unknown part(s) {', '.join(map(str, unknown))}; known: {', '.join(LAYOUT_PARTS)}")
    share = (frame[PART] == PART_DP) & (frame[METRIC] == IN_BACKWARD)
    metric_ok = np.where(frame[PART] == "memory", frame[METRIC] == BYTES, (frame[METRIC] == TIME) | share)
    if not metric_ok.all():
        row = int(np.flatnonzero(~metric_ok)[0])
        raise InputError(
            source,
            f"row {row + 1}: part memory is in bytes, every other part in time (seconds) or, for "
            f"{PART_DP}, {IN_BACKWARD} (a share)",
        )
    values = pd.to_numeric(frame[VALUE], errors="coerce").to_numpy(float)
    if not (np.isfinite(values) & (values >= 0)).all():
        raise InputError(source, "values must be finite and >= 0")
    if (values[share.to_numpy()] > 1).any():
        raise InputError(source, f"{IN_BACKWARD} is a share of the gradient reductions: between 0 and 1")
    return layout_frame(frame, source=source)
