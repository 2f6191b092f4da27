"""Simulator truth as a layout frame: one row per layout with the layout model's columns, so the
layout model, the power model and the profiling advisor can be checked against it without files."""

from __future__ import annotations

import pandas as pd

from extradeep.columns import (
    HEADS,
    HIDDEN,
    LAYERS,
    LAYOUT_PARTS,
    METRIC,
    PART,
    PART_MEMORY,
    PART_POWER,
    PART_STEP,
    PEAK_MEMORY,
    SEQ_LEN,
    STEP_TIME,
    TIME,
    VALUE,
    VOCAB,
    WORKLOAD,
)
from extradeep.simulate.gpt.config import GPTModel
from extradeep.simulate.gpt.study import gpt_truth


def truth_frame(layouts, model: GPTModel | None = None, gpu="a100-80gb", system="dgx-8-nvswitch") -> pd.DataFrame:
    """Per layout label (``"tp2.pp2.dp4.mbs1.nmb8"``): the layout columns, the model's shape
    (layers, hidden, heads, seq_len, vocab), ``workload`` (the model's name), ``step_time`` (s),
    the last stage's parts (s), ``power`` (W per GPU) and ``peak_memory`` (bytes)."""
    model = model or GPTModel()
    shape = {LAYERS: model.layers, HIDDEN: model.hidden, HEADS: model.heads, SEQ_LEN: model.seq, VOCAB: model.vocab}
    rows = []
    for label in layouts:
        truth = gpt_truth(label, model, gpu, system)
        rows.append(
            {
                **truth["layout"],
                **shape,
                WORKLOAD: model.name,
                STEP_TIME: truth[STEP_TIME],
                **truth["parts"],
                "power": truth[PART_POWER],
                "peak_memory": truth[PEAK_MEMORY],
            }
        )
    return pd.DataFrame(rows)


def truth_parts(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`truth_frame` as per-part observations (what profiles give the layout model): one row
    per layout and part of LAYOUT_PARTS, metric time (seconds per step) or bytes (memory)."""
    timed = [p for p in LAYOUT_PARTS if p != PART_MEMORY]
    layout = frame.drop(columns=[c for c in [STEP_TIME, *timed, "power", "peak_memory"] if c in frame])
    rows = []
    for i, row in layout.iterrows():
        for part in timed:
            value = frame.at[i, STEP_TIME] if part == PART_STEP else frame.at[i, part]
            rows.append({**row, PART: part, METRIC: TIME, VALUE: float(value)})
        rows.append({**row, PART: PART_MEMORY, METRIC: "bytes", VALUE: float(frame.at[i, PEAK_MEMORY])})
    return pd.DataFrame(rows)
