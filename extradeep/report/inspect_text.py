"""What `extradeep inspect` prints: each profile's summary (an nsys export or a Kineto trace), its
node signals and the parallel layout it shows, the cluster layout of files named like a study, and
each run's parallel layout.

Everything here formats the data `extradeep.workflows.inspect_profiles` returns (each profile's
JSON-ready ``info``, the cluster layout dict, the runs' layout table); nothing reads a file.
"""

from __future__ import annotations

import pandas as pd

from extradeep.analysis.layout_text import layout_text
from extradeep.columns import (
    CHUNKS,
    DP,
    DP_RANK,
    FRAMEWORK,
    GPUS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PASSES,
    PP,
    RECOMPUTE,
    SCHEDULE,
    SOURCE_SUFFIX,
    STAGE,
    TP,
    TP_RANK,
    ZERO,
)
from extradeep.io.formats import KINETO
from extradeep.io.steps import shorten

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
PLATFORMS = {"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU only"}  # a Kineto trace's platform as people name it
RANGE_NAME_WIDTH = 100  # characters of a range name shown; longer names are shortened in the middle


def inspect_text(result) -> str:
    """Everything `inspect` prints on stdout for an `InspectResult` before the trace analyses: each
    profile's block, the cluster layout, each run's layout ("" when there is nothing to show)."""
    blocks = [profile_text(p.info) + "\n\n" for p in result.profiles]
    if result.layout is not None:
        blocks.append(cluster_text(result.layout, len(result.profiles)) + "\n\n")
    if result.runs is not None and len(result.runs):
        blocks.append("\n".join(run_lines(result.runs, result.run_params)) + "\n")
    return "".join(blocks)


def profile_text(info: dict) -> str:
    """One profile's summary (`inspect_export`'s or `inspect_trace`'s dict), then the parallel layout
    it shows when the dict has one (``parallel_layout``, added by `inspect_profiles`)."""
    lines = kineto_lines(info) if info.get("format") == KINETO else nsys_lines(info)
    if "parallel_layout" in info:
        lines += parallel_layout_lines(info["parallel_layout"])
    return "\n".join(lines)


def nsys_lines(info: dict) -> list[str]:
    """The summary of `extradeep.io.nsys.inspect.inspect_export`'s dict."""
    version = f"  nsys version: {info['nsys_version'] or 'not recorded (export older than 2022.1)'}" + (
        f", schema {info['schema_version']}" if info["schema_version"] else ""
    )
    domains = ", ".join(f"{k} ({v:,})" for k, v in info["nvtx_domains"].items())
    lines = _common_lines(info, version, f"  NVTX domains: {domains or 'none'}", "NVTX ranges")
    lines.append("  tables (rows):")
    enums = [name for name in info["tables"] if name.startswith("ENUM_")]
    lines += [f"    {n:>10,}  {name}" for name, n in info["tables"].items() if not name.startswith("ENUM_")]
    if enums:
        lines.append(f"    {len(enums):>10,}  ENUM_* lookup tables (listed with --json)")
    return lines + _note_lines(info)


def kineto_lines(info: dict) -> list[str]:
    """The summary of `extradeep.io.kineto.inspect.inspect_trace`'s dict."""
    rank = "not recorded" if info["rank"] is None else str(info["rank"])
    world = "" if info["world_size"] is None else f" of {info['world_size']}"
    backend = f" ({info['backend']})" if info["backend"] else ""
    platform = PLATFORMS.get(info["platform"], info["platform"])
    trace = f"  PyTorch profiler (Kineto) trace, {platform}; rank {rank}{world}{backend}"
    by_cat = ", ".join(f"{k} {v:,}" for k, v in info["trace_categories"].items())
    events = f"  events in the trace by cat: {by_cat}"
    return _common_lines(info, trace, events, "annotations (record_function ranges)") + _note_lines(info)


def _common_lines(info: dict, kind: str, events: str, ranges: str) -> list[str]:
    """The file, the line of its ``kind``, the summary both formats show, the format's ``events``
    line and the most frequent ``ranges``: the order both formats print."""
    lines = [f"{info['path']}  ({info['size']:,} bytes)", kind, *summary_lines(info), events]
    if info["top_ranges"]:
        lines.append(f"  most frequent {ranges}:")
        lines += [f"    {n:>8,}  {shorten(name, RANGE_NAME_WIDTH)}" for name, n in info["top_ranges"]]
    return lines


def _note_lines(info: dict) -> list[str]:
    return [f"  note: {w}" for w in info["notes"]]


def summary_lines(info: dict) -> list[str]:
    """GPUs, node, steps, events by category and kernels per device: the lines both formats show."""
    gpu_text = ", ".join(f"{g['id']}: {g['name']}" for g in info["gpus"]) or "none recorded"
    lines = [f"  GPUs: {gpu_text}"]
    lines.append("  node: " + node_text(info.get("placement")))
    steps = info["steps"]
    if steps["found"]:
        lines.append(
            f"  steps: {steps['epochs']} epoch(s), {steps['measured_epochs']} measured; "
            f"{steps['train_steps']} training and {steps['val_steps']} validation steps measured, "
            f"{steps['warmup_steps']} warm-up step(s) excluded"
        )
        lines += [f"    {level}: {how}" for level, how in steps["convention"].items()]
        lines += [f"    note: {w}" for w in steps["warnings"]]
    else:
        lines.append(f"  steps: none found: {steps['problem']}")
    counts = ", ".join(f"{k} {v:,}" for k, v in info["counts_by_category"].items() if v)
    lines.append(f"  events by category: {counts or 'none'}")
    for device, by_cat in info["kernels_by_device"].items():
        lines.append(f"  kernels on device {device}: " + ", ".join(f"{k} {v:,}" for k, v in by_cat.items()))
    return lines


def node_text(place: dict | None) -> str:
    """Every node signal of one profile and where it was read, or that it has none."""
    if not place:
        return "not read"
    parts = []
    if place.get("host"):
        parts.append(f"host {place['host']} ({place['host_from']})")
    gpus = place.get("node_gpus")
    if place.get("gpu_set"):
        parts.append(f"{gpus or '?'} GPU(s) with UUIDs ({place['gpus_from']})")
    elif gpus:
        parts.append(f"{gpus} GPU(s) listed, without UUIDs")
    if place.get("recorded_rank") is not None:
        world = f" of {place['world_size']}" if place.get("world_size") is not None else ""
        parts.append(f"rank {place['recorded_rank']}{world}")
    if place.get("device") is not None:
        parts.append(f"on device {place['device']}" + (f" (UUID {place['uuid']})" if place.get("uuid") else ""))
    if place.get("local_ranks"):
        parts.append(f"{place['local_ranks']} ranks per node ({place['launcher_from']})")
    if place.get("export_host"):
        parts.append(f"exported on {place['export_host']} (EXPORT_HOST)")
    if not parts:
        return "no node signal recorded (no host name, GPU UUIDs or export host): give --system to set the layout"
    return "; ".join(parts)


def parallel_layout_lines(layout: dict) -> list[str]:
    """One profile's parallel layout (`io.parallel.layout.layout_json`: field -> value and source),
    or the line saying why it was not read (``{"problem": ...}``)."""
    if "problem" in layout:
        return [f"  parallel layout: not read ({layout['problem']})"]
    lines = ["  parallel layout (what this profile shows; file names or a manifest can fill the rest):"]
    for name in ORDER:
        if name in layout:
            value = layout[name]["value"]
            shown = "?" if value is None else str(value)
            lines.append(f"    {LABELS[name]:<30} {shown:<12} {layout[name]['source']}")
    coords = [(STAGE, "stage"), (TP_RANK, "tp rank"), (DP_RANK, "dp rank")]
    known = [f"{label} {layout[c]['value']}" for c, label in coords if layout.get(c, {}).get("value") is not None]
    if known:
        lines.append("    this rank: " + ", ".join(known))
    lines += [f"    note: {note}" for note in layout.get("notes", {}).get("value") or []]
    return lines


def cluster_text(layout: dict, profiles: int) -> str:
    """The cluster layout the file names of ``profiles`` inspected profiles give (`study_layout`)."""
    return f"cluster layout of the {profiles} profiles:\n" + "\n".join(f"  {line}" for line in layout_text(layout))


def run_lines(layouts: pd.DataFrame, params: list[str]) -> list[str]:
    """A folder's or a manifest's runs: one block per run with every field and its source."""
    lines = ["parallel layouts per run (profiles first, then file names or the manifest, then the world size):"]
    for _, row in layouts.iterrows():
        point = row.get("point") or " ".join(f"{p}={row[p]}" for p in params if p in row and pd.notna(row[p]))
        lines.append(f"  {row.get('app', '')} {point} rep {row.get('rep')} ({row.get('files')} files)")
        for name in ORDER:
            if name in row.index and name != PASSES:
                value = row[name]
                shown = "?" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
                lines.append(f"    {LABELS[name]:<30} {shown:<12} {row.get(name + SOURCE_SUFFIX, '')}")
    return lines
