"""What every profile format's summary shows the same way: the most frequent ranges, the step marks
found, kernels per device, and the lines `extradeep inspect` prints for them.

`extradeep.io.nsys.inspect` and `extradeep.io.kineto.inspect` build their dicts with these.
"""

from __future__ import annotations

import pandas as pd

from extradeep.columns import CATEGORY, EPOCH, NAME, PHASE
from extradeep.errors import InputError
from extradeep.io.frames import NVTX_RANGE_TYPES
from extradeep.io.settings import ReaderSettings
from extradeep.io.steps import find_steps


def top_ranges(nvtx: pd.DataFrame, top: int) -> list[list]:
    ranges = nvtx[nvtx["eventType"].isin(NVTX_RANGE_TYPES).to_numpy()]
    counts = ranges[NAME].value_counts().head(top)
    return [[str(name), int(n)] for name, n in counts.items() if n > 0]


def step_summary(nvtx: pd.DataFrame, settings: ReaderSettings, path) -> dict:
    try:
        table = find_steps(nvtx, settings, path)
    except InputError as exc:
        return {"found": False, "problem": exc.problem}
    kept = table.steps
    return {
        "found": True,
        "convention": table.convention,
        "epochs": len(set(kept[EPOCH]) | set(table.warmup[EPOCH])),
        "measured_epochs": int(kept[EPOCH].nunique()),
        "train_steps": int((kept[PHASE] == "train").sum()),
        "val_steps": int((kept[PHASE] == "val").sum()),
        "warmup_steps": len(table.warmup),
        "warnings": list(table.warnings),
    }


def kernels_by_device(kernels: pd.DataFrame) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    if kernels.empty:
        return out
    grouped = kernels.groupby(["deviceId", CATEGORY], observed=True).size()
    for (device, category), n in grouped.items():
        out.setdefault(str(int(device)), {})[str(category)] = int(n)
    return out


def summary_lines(info: dict) -> list[str]:
    """GPUs, steps, events by category and kernels per device: the lines every profile format shows."""
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
