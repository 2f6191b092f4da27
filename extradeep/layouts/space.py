"""The layout space: one row per way to train a model on N GPUs.

A layout is the tensor-parallel degree t (within a node), pipeline stages p, data-parallel degree d
(N = t p d), the micro-batch size and count (global batch = d x micro-batch x count), the ZeRO/FSDP
stage (0: none, 1: optimizer states sharded (Megatron's distributed optimizer), 2: + gradients,
3: + parameters), activation recomputation (none, selective: the attention core, full: every layer)
and the pipeline schedule (1f1b, interleaved with `chunks` model chunks per GPU, gpipe). Ranks are
ordered as Megatron-LM orders them: t innermost, then d, then p, so a tensor-parallel group shares a
node and the stages of a pipeline lie t x d GPUs apart.

:func:`layout_frame` completes and checks a table of layouts (measured or asked for);
:func:`enumerate_layouts` lists every valid layout for some GPU counts, vectorised.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from extradeep.columns import (
    CHUNKS,
    DP,
    GLOBAL_BATCH,
    GPUS,
    HEADS,
    HIDDEN,
    LAYERS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PP,
    RECOMPUTE,
    SCHEDULE,
    SEQ_LEN,
    TP,
    VOCAB,
    ZERO,
)
from extradeep.errors import InputError
from extradeep.layouts.workload import LARGEST_WHOLE, TransformerShape

SHAPE_COLUMNS = [LAYERS, HIDDEN, HEADS, SEQ_LEN, VOCAB]
LAYOUT_COLUMNS = [GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, GLOBAL_BATCH, ZERO, RECOMPUTE, SCHEDULE, CHUNKS]
RECOMPUTE_KINDS = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved", "gpipe")
DEFAULTS = {ZERO: 0, RECOMPUTE: "full", SCHEDULE: "1f1b", CHUNKS: 1, VOCAB: 51200}


def layout_frame(frame: pd.DataFrame, shape: TransformerShape | None = None, source=None) -> pd.DataFrame:
    """The layouts of ``frame`` with every layout and shape column, checked: the degrees and batch
    sizes whole and positive, N = t p d, global batch = d x micro-batch x count, t dividing the heads
    and p the layers. Shape columns come from ``shape`` where the frame lacks them. One-line
    InputError (naming ``source`` and the first bad row) otherwise."""
    out = frame.copy()
    if shape is not None:
        for column in SHAPE_COLUMNS:
            if column not in out:
                out[column] = getattr(shape, column)
    for column, value in DEFAULTS.items():
        if column not in out:
            out[column] = value
    _complete_degrees(out, source)
    missing = [c for c in SHAPE_COLUMNS if c not in out]
    if missing:
        raise InputError(source, f"the model's shape is missing: {', '.join(missing)} (give a model description)")
    _check_whole(out, [GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, GLOBAL_BATCH, CHUNKS, *SHAPE_COLUMNS], source)
    out[ZERO] = out[ZERO].astype(int)
    out[RECOMPUTE] = out[RECOMPUTE].astype(str).str.lower()
    out[SCHEDULE] = out[SCHEDULE].astype(str).str.lower()
    _check_rules(out, source)
    return out


def _complete_degrees(out: pd.DataFrame, source) -> None:
    """Fill GPUS, DP and MICRO_BATCHES/GLOBAL_BATCH from the others."""
    for column in (TP, PP):
        if column not in out:
            raise InputError(source, f"no {column} column (tensor- and pipeline-parallel degrees are required)")
    if DP not in out:
        if GPUS not in out:
            raise InputError(source, "give the data-parallel degree (dp) or the GPU count (gpus)")
        out[DP] = out[GPUS] / (out[TP] * out[PP])
    if GPUS not in out:
        out[GPUS] = out[TP] * out[PP] * out[DP]
    if MICRO_BATCH not in out:
        raise InputError(source, "no micro_batch column")
    if MICRO_BATCHES not in out:
        if GLOBAL_BATCH not in out:
            raise InputError(source, "give the global batch (global_batch) or the micro-batch count (micro_batches)")
        out[MICRO_BATCHES] = out[GLOBAL_BATCH] / (out[DP] * out[MICRO_BATCH])
    if GLOBAL_BATCH not in out:
        out[GLOBAL_BATCH] = out[DP] * out[MICRO_BATCH] * out[MICRO_BATCHES]


def _check_whole(out: pd.DataFrame, columns, source) -> None:
    for column in columns:
        values = pd.to_numeric(out[column], errors="coerce").to_numpy(float)
        bad = (
            ~np.isfinite(values) | (values < 1) | (values > LARGEST_WHOLE) | (np.abs(values - np.round(values)) > 1e-9)
        )
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(
                source,
                f"row {row + 1}: {column} must be a whole number from 1 to {LARGEST_WHOLE}, got {_shown(out[column].iloc[row])}",
            )
        out[column] = np.round(values).astype(np.int64)


def _shown(value) -> str:
    """A cell as the user wrote it: 1.5, not np.float64(1.5)."""
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return repr(value)


def _check_rules(out: pd.DataFrame, source) -> None:
    rules = [
        (out[GPUS] != out[TP] * out[PP] * out[DP], "gpus is not tp x pp x dp"),
        (
            out[GLOBAL_BATCH] != out[DP] * out[MICRO_BATCH] * out[MICRO_BATCHES],
            "global_batch is not dp x micro_batch x count",
        ),
        (out[HEADS] % out[TP] != 0, "tp does not divide the attention heads"),
        (out[LAYERS] % (out[PP] * out[CHUNKS]) != 0, "pp x chunks does not divide the layers"),
        (~out[ZERO].isin([0, 1, 2, 3]), "zero must be 0, 1, 2 or 3"),
        (~out[RECOMPUTE].isin(RECOMPUTE_KINDS), f"recompute must be one of {', '.join(RECOMPUTE_KINDS)}"),
        (~out[SCHEDULE].isin(SCHEDULES), f"schedule must be one of {', '.join(SCHEDULES)}"),
        ((out[SCHEDULE] == "interleaved") & (out[PP] < 2), "an interleaved schedule needs pp >= 2"),
    ]
    for bad, problem in rules:
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(source, f"row {row + 1}: {problem}")


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending; up to sqrt(n) steps, so that a count of millions of GPUs is quick."""
    n = int(n)
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in reversed(small) if k * k != n]


def enumerate_layouts(
    shape: TransformerShape,
    gpus,
    global_batch: int,
    gpus_per_node: int,
    micro_batches=(1, 2, 4, 8, 16),
    zero=(0, 1),
    recompute=("full",),
    schedules=("1f1b",),
    chunks=(2,),
) -> pd.DataFrame:
    """Every valid layout of ``shape`` on each GPU count in ``gpus`` with the given global batch:
    t within a node dividing the heads, p dividing the layers, d = N / (t p) dividing the global
    batch with each micro-batch size, and each ZeRO stage, recomputation and schedule asked for
    (ZeRO 2 and 3 only without pipelining, as DeepSpeed allows; with one data-parallel rank only
    the lowest stage asked for, since there is nothing to shard and the stages are the same run; the
    interleaved schedule with each chunk count that divides the layers per stage and a micro-batch
    count that p divides)."""
    rows = []
    for n in sorted({int(g) for g in np.atleast_1d(gpus)}):
        for t in divisors(n):
            if t > gpus_per_node or shape.heads % t:
                continue
            for p in divisors(n // t):
                if shape.layers % p:
                    continue
                d = n // (t * p)
                for mb in micro_batches:
                    if global_batch % (d * mb):
                        continue
                    rows.append((n, t, p, d, mb, global_batch // (d * mb)))
    base = pd.DataFrame(rows, columns=[GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES])
    base[GLOBAL_BATCH] = global_batch
    options = _options(zero, recompute, schedules, chunks)
    frame = base.merge(options, how="cross")
    keep = ((frame[ZERO] < 2) | (frame[PP] == 1)) & (frame[SCHEDULE] != "interleaved") | (
        (frame[SCHEDULE] == "interleaved")
        & (frame[PP] > 1)
        & (frame[ZERO] < 2)
        & ((shape.layers // frame[PP]) % frame[CHUNKS] == 0)
        & (frame[MICRO_BATCHES] % frame[PP] == 0)
    )
    keep &= (frame[DP] > 1) | (frame[ZERO] == frame[ZERO].min())
    frame = frame[keep].reset_index(drop=True)
    for column in SHAPE_COLUMNS:
        frame[column] = getattr(shape, column)
    return frame


def _options(zero, recompute, schedules, chunks) -> pd.DataFrame:
    rows = []
    for z in zero:
        for r in recompute:
            for s in schedules:
                for v in chunks if s == "interleaved" else (1,):
                    rows.append((int(z), str(r), str(s), int(v)))
    return pd.DataFrame(rows, columns=[ZERO, RECOMPUTE, SCHEDULE, CHUNKS])
