"""Layouts as `extradeep inspect` prints them: each field, its value and where it was read."""

from __future__ import annotations

import pandas as pd

from extradeep.columns import (
    CHUNKS,
    DP,
    DP_RANK,
    FRAMEWORK,
    GPUS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PP,
    RECOMPUTE,
    SCHEDULE,
    STAGE,
    TP,
    TP_RANK,
    ZERO,
)
from extradeep.io.parallel.infer import PASSES, Field

LABELS = {
    GPUS: "GPUs (p)",
    TP: "tensor parallel (tp)",
    PP: "pipeline stages (pp)",
    DP: "data parallel (dp)",
    MICRO_BATCH: "micro-batch size (mbs)",
    MICRO_BATCHES: "micro-batches per step (nmb)",
    PASSES: "backward passes per step",
    SCHEDULE: "pipeline schedule",
    CHUNKS: "model chunks per stage (vpp)",
    ZERO: "ZeRO / FSDP stage",
    RECOMPUTE: "recomputation",
    FRAMEWORK: "framework",
}
ORDER = (GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, PASSES, SCHEDULE, CHUNKS, ZERO, RECOMPUTE, FRAMEWORK)


def layout_json(fields: dict[str, Field]) -> dict:
    return {name: field.to_dict() for name, field in fields.items()}


def layout_lines(fields: dict[str, Field]) -> list[str]:
    """Lines for one profile: what it tells of its run's layout, with sources."""
    lines = ["  parallel layout (what this profile shows; file names or a manifest can fill the rest):"]
    for name in ORDER:
        if name in fields:
            value = fields[name].value
            shown = "?" if value is None else str(value)
            lines.append(f"    {LABELS[name]:<30} {shown:<12} {fields[name].source}")
    coords = [(STAGE, "stage"), (TP_RANK, "tp rank"), (DP_RANK, "dp rank")]
    known = [f"{label} {fields[c].value}" for c, label in coords if c in fields and fields[c].value is not None]
    if known:
        lines.append("    this rank: " + ", ".join(known))
    for note in (fields.get("notes").value if "notes" in fields else []) or []:
        lines.append(f"    note: {note}")
    return lines


def run_lines(layouts: pd.DataFrame, params: list[str]) -> list[str]:
    """Lines for a folder: one block per run with every field and its source."""
    lines = ["parallel layouts per run (profiles first, then file names or the manifest, then the world size):"]
    for _, row in layouts.iterrows():
        point = row.get("point") or " ".join(f"{p}={row[p]}" for p in params if p in row and pd.notna(row[p]))
        lines.append(f"  {row.get('app', '')} {point} rep {row.get('rep')} ({row.get('files')} files)")
        for name in ORDER:
            if name in row.index and name != PASSES:
                value = row[name]
                shown = "?" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
                lines.append(f"    {LABELS[name]:<30} {shown:<12} {row.get(name + '_source', '')}")
    return lines
