"""cudaProfilerStart/Stop, so `nsys profile --capture-range=cudaProfilerApi` records only the sample.

Uses `torch.cuda.profiler` when PyTorch is already imported and sees a GPU, otherwise the CUDA
runtime through ctypes (the libcudart this process already loaded, else the usual sonames). Without
either, or without a GPU, both calls do nothing and return None, so the helpers run unchanged on a laptop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import warnings
from pathlib import Path

# cudaErrorInsufficientDriver, cudaErrorNoDevice: a CUDA runtime without a usable GPU.
_NO_GPU = (35, 100)
_SONAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")


def _torch_profiler():
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            import torch.cuda.profiler as profiler

            return profiler
    except Exception:  # a broken CUDA setup must not stop training
        return None
    return None


def _loaded_cudart() -> list[str]:
    """Paths of libcudart already mapped into this process (frameworks ship their own)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in maps.splitlines() if "libcudart.so" in line})


def _cudart():
    found = ctypes.util.find_library("cudart")
    for name in [*_loaded_cudart(), *([found] if found else []), *_SONAMES]:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _call(action: str) -> str | None:
    profiler = _torch_profiler()
    if profiler is not None:
        getattr(profiler, action)()
        return "torch"
    cudart = _cudart()
    if cudart is None:
        return None
    function = "cudaProfilerStart" if action == "start" else "cudaProfilerStop"
    status = getattr(cudart, function)()
    if status in _NO_GPU:
        return None
    if status != 0:
        warnings.warn(f"extradeep: {function} returned CUDA error {status}", RuntimeWarning, stacklevel=3)
    return "cudart"


def start() -> str | None:
    """Start profiler capture; returns the backend used ("torch", "cudart") or None (no CUDA)."""
    return _call("start")


def stop() -> str | None:
    """Stop profiler capture; returns the backend used ("torch", "cudart") or None (no CUDA)."""
    return _call("stop")
