"""GPU memory for the strategy search: what the profile records, or a model description.

From the profile: the GPU's capacity (Kineto `deviceProperties.totalGlobalMem`, nsys
`TARGET_INFO_GPU.totalMemory`) and the peak allocated memory (Kineto `[memory]` events written
with `profile_memory=True`: the largest "Total Allocated"; nsys `CUDA_GPU_MEMORY_USAGE_EVENTS`
with `--cuda-memory-usage=true`: the running sum of allocations and frees).

A model description (a dict or a TOML file) gives what the profile lacks:

    parameters = 25.6e6          # trainable parameters
    bytes_per_parameter = 16     # weights + gradients + optimizer state (fp32 Adam: 4+4+8)
    activation_gb = 22.0         # activations of one step at the profiled batch per GPU
    buffers_gb = 1.0             # communication buckets, workspace, CUDA context
    gpu_memory_gb = 40           # capacity of one GPU

Peak = parameters x bytes_per_parameter + activations + buffers. When the peak exceeds the
capacity, activation recomputation (a share f of the model checkpointed: activations x (1 - f),
one more forward of that share) and gradient accumulation (k micro-batches: activations / k) are
offered, and strategies that keep the peak above the capacity are refused.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from extradeep.compat import tomllib
from extradeep.errors import InputError, require_regular_file

GB = 1e9
KEYS = ("parameters", "bytes_per_parameter", "activation_gb", "buffers_gb", "gpu_memory_gb")


@dataclass
class MemoryBudget:
    """Capacity and use of one GPU (bytes; None where unknown) and where they came from."""

    capacity: float | None
    peak: float | None
    activations: float | None
    source: str

    @property
    def known(self) -> bool:
        return self.capacity is not None and self.peak is not None

    @property
    def short(self) -> bool:
        return self.known and self.peak > self.capacity

    def peak_with(self, delta: float = 0.0, activation_factor: float = 1.0) -> float | None:
        """Peak after a strategy that adds `delta` bytes and keeps this share of the activations."""
        if self.peak is None:
            return None
        acts = self.activations or 0.0
        return self.peak + delta - acts * (1.0 - activation_factor)

    def fits(self, delta: float = 0.0, activation_factor: float = 1.0):
        if not self.known:
            return None
        return bool(self.peak_with(delta, activation_factor) <= self.capacity)


def memory_budget(paths, description=None, gpu_memory_gb: float | None = None) -> MemoryBudget:
    """The budget of a run: a description wins, then what the profiles record; `gpu_memory_gb`
    overrides the capacity."""
    desc = load_description(description)
    if desc is not None:
        params = float(desc.get("parameters", 0.0)) * float(desc.get("bytes_per_parameter", 16.0))
        acts = float(desc.get("activation_gb", 0.0)) * GB
        peak = params + acts + float(desc.get("buffers_gb", 0.0)) * GB
        cap = desc.get("gpu_memory_gb", gpu_memory_gb)
        if cap is None:
            cap_bytes = profile_memory(paths)[0]
        else:
            cap_bytes = float(cap) * GB
        if gpu_memory_gb is not None:
            cap_bytes = float(gpu_memory_gb) * GB
        return MemoryBudget(cap_bytes, peak, acts, "model description")
    capacity, peak, activations = profile_memory(paths)
    if gpu_memory_gb is not None:
        capacity = float(gpu_memory_gb) * GB
    source = "profile" if peak is not None else "none"
    return MemoryBudget(capacity, peak, activations, source)


def load_description(description) -> dict | None:
    """A model description from a dict or a TOML file (unknown keys are refused)."""
    if description is None:
        return None
    if isinstance(description, (str, Path)):
        path = Path(description)
        require_regular_file(path)  # a named pipe would block the read forever
        try:
            desc = tomllib.loads(path.read_text())
        except OSError as exc:
            raise InputError(path, f"cannot read the model description ({exc.strerror})") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(path, f"not a TOML model description ({exc})") from None
        where = path
    else:
        desc, where = dict(description), None
    unknown = sorted(set(desc) - set(KEYS))
    if unknown:
        raise InputError(
            where, f"unknown key(s) {', '.join(unknown)} in the model description (known: {', '.join(KEYS)})"
        )
    for k, v in desc.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise InputError(where, f"model description: {k} must be a number >= 0, not {v!r}")
    return desc


def profile_memory(paths) -> tuple[float | None, float | None, float | None]:
    """(capacity, peak allocated, activations) in bytes over the run's profiles (largest per GPU);
    activations: what a step frees again (peak minus the lowest level after it), where recorded."""
    caps, peaks, acts = [], [], []
    for path in [paths] if isinstance(paths, (str, Path)) else list(paths or ()):
        try:
            cap, peak, act = _kineto_memory(path) if str(path).endswith((".json", ".gz")) else _nsys_memory(path)
        except (OSError, ValueError, sqlite3.Error):
            continue
        caps += [cap] if cap else []
        peaks += [peak] if peak else []
        acts += [act] if act else []
    return (max(caps) if caps else None), (max(peaks) if peaks else None), (max(acts) if acts else None)


def _kineto_memory(path) -> tuple[float | None, float | None, float | None]:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    # the capacity sits in deviceProperties: read it without parsing the whole trace
    found = [float(x) for x in re.findall(rb'"totalGlobalMem"\s*:\s*(\d+)', raw)]
    cap = max(found) if found else None
    if b'"[memory]"' not in raw:
        return cap, None, None
    levels = []
    for e in json.loads(raw).get("traceEvents", []):
        if isinstance(e, dict) and e.get("name") == "[memory]":
            args = e.get("args") or {}
            total = args.get("Total Allocated")
            if (
                isinstance(total, (int, float))
                and args.get("Device Type", 1) != 0
                and isinstance(e.get("ts"), (int, float))
            ):
                levels.append((float(e["ts"]), float(total)))
    return cap, *_peak_and_freed(levels)


def _peak_and_freed(levels: list) -> tuple[float | None, float | None]:
    """Peak of a (time, bytes) series and how far it falls again after the peak."""
    if not levels:
        return None, None
    values = [v for _, v in sorted(levels)]
    k = max(range(len(values)), key=values.__getitem__)
    after = values[k:]
    return values[k], (values[k] - min(after)) if len(after) > 1 else None


def _nsys_memory(path) -> tuple[float | None, float | None, float | None]:
    uri = f"file:{Path(path)}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        cap = None
        if "TARGET_INFO_GPU" in tables:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(TARGET_INFO_GPU)")}
            if "totalMemory" in cols:
                row = conn.execute("SELECT max(totalMemory) FROM TARGET_INFO_GPU").fetchone()
                cap = float(row[0]) if row and row[0] else None
        levels = []
        if "CUDA_GPU_MEMORY_USAGE_EVENTS" in tables:
            rows = conn.execute(
                "SELECT start, bytes, memoryOperationType FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start"
            ).fetchall()
            level = 0.0
            for start, nbytes, op in rows:
                level += float(nbytes or 0) * (1 if op == 0 else -1)
                levels.append((float(start), level))
        return cap, *_peak_and_freed(levels)
    finally:
        conn.close()
