"""Region kinds and categories: what counts as computation, communication, memory or CPU-side work."""

from __future__ import annotations

import re

import numpy as np

from extradeep.columns import (  # noqa: F401 (the categories are defined once, in extradeep.columns)
    COMMUNICATION,
    COMPUTATION,
    CPU_CATEGORIES,
    CUDA_API,
    EPOCH_CATEGORIES,
    LIBRARY,
    MEMORY,
    NVTX,
    OS,
)
from extradeep.columns import STEP_CATEGORY as STEP

KIND_CATEGORY = {
    "kernel": COMPUTATION,  # NCCL kernels are communication, see kernel_categories
    "memcpy": MEMORY,
    "memset": MEMORY,
    "cuda_api": CUDA_API,
    "nvtx": NVTX,
    "nccl_nvtx": NVTX,
    "cpu_op": NVTX,  # PyTorch operators in Kineto traces (aten::*): CPU ranges like NVTX ones
    "mpi": COMMUNICATION,
    "os": OS,
    "cublas": LIBRARY,
    "cudnn": LIBRARY,
    "step": STEP,
}

# Copy-kind labels as nsys prints them (2020.3 MemcpyOperationStrings; ENUM_CUDA_MEMCPY_OPER keeps the ids).
MEMCPY_LABELS = {
    0: "[CUDA memcpy Unknown]",
    1: "[CUDA memcpy HtoD]",
    2: "[CUDA memcpy DtoH]",
    3: "[CUDA memcpy HtoA]",
    4: "[CUDA memcpy AtoH]",
    5: "[CUDA memcpy AtoA]",
    6: "[CUDA memcpy AtoD]",
    7: "[CUDA memcpy DtoA]",
    8: "[CUDA memcpy DtoD]",
    9: "[CUDA memcpy HtoH]",
    10: "[CUDA memcpy PtoP]",
    11: "[CUDA Unified Memory memcpy HtoD]",
    12: "[CUDA Unified Memory memcpy DtoH]",
    13: "[CUDA Unified Memory memcpy DtoD]",
}
MEMSET_NAME = "[CUDA memset]"

_NCCL_NVTX_NAME = re.compile(r"^nccl[A-Z]")
# Short names start with nccl; demangled ones may carry a return type and namespaces first.
_NCCL_KERNEL = re.compile(r"^(?:void\s+)?(?:[\w]+::)*nccl", re.IGNORECASE)


def memcpy_label(copy_kind: int, enum_labels: dict[int, str] | None = None) -> str:
    """Region name of a memcpy of `copy_kind`; unknown ids use the export's own enum label."""
    if copy_kind in MEMCPY_LABELS:
        return MEMCPY_LABELS[copy_kind]
    label = (enum_labels or {}).get(copy_kind)
    return f"[CUDA memcpy {label}]" if label else f"[CUDA memcpy kind {copy_kind}]"


def is_nccl_kernel(name: str) -> bool:
    """NCCL collectives and send/recv run as kernels named nccl* (ncclKernel_..., ncclDevKernel_...)."""
    return bool(_NCCL_KERNEL.match(name))


def kernel_categories(names) -> np.ndarray:
    """Category per kernel name: communication for NCCL kernels, computation otherwise."""
    return np.array([COMMUNICATION if is_nccl_kernel(n) else COMPUTATION for n in names], dtype=object)


def is_mpi_domain(domain: str) -> bool:
    """Older nsys recorded MPI calls as NVTX ranges in a domain named like "MPI"."""
    return bool(re.search(r"\bmpi\b", domain, re.IGNORECASE)) or domain.upper().startswith("MPI")


def is_nccl_nvtx(name: str, domain: str) -> bool:
    """NCCL's own NVTX ranges (ncclAllReduce, ncclSend, ...) live in an NCCL domain or carry nccl* names."""
    return "nccl" in domain.lower() or bool(_NCCL_NVTX_NAME.match(name))
