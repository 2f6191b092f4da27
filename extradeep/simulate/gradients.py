"""DDP with explicit gradients: sizes, bucket layouts, and the duration of each bucket's all-reduce.

With `gradients=N` the simulated backward runs N layers; each layer's gradient becomes ready when
its kernels are launched (an `AccumulateGrad` range on the CPU, as PyTorch records it) and the
gradients are all-reduced in buckets: contiguous groups in ready order, given as a layout (the
number of gradients per bucket) or by DDP's own size rule (`bucket_cap_mb`, first bucket 1 MiB).
Sizes follow a ResNet-like profile: the first gradients to be ready (the classifier, the last
stage) are the largest, the early layers' are small, while every layer costs about the same
compute, so bytes are not proportional to backward time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from extradeep.errors import InputError
from extradeep.predictor.buckets import DEFAULT_CAP_MB, MIB, cap_layout, check_layout
from extradeep.simulate.catalogue import NCCL_ALPHA, NCCL_LAUNCH

FLOAT_BYTES = 4


PROFILES = ("resnet", "uniform")


def gradient_sizes(n: int, total: int, profile: str = "resnet") -> np.ndarray:
    """Bytes of n float32 gradients in ready order (backward order), summing to `total`.
    "resnet": four stages whose layers grow 4x per stage, the classifier as large as the largest
    layer (so the first gradients ready are the largest); "uniform": equal layers, as in a
    transformer's blocks."""
    if n < 3:
        raise InputError(None, f"gradients must be >= 3 (a classifier and at least two layers), not {n}")
    if profile not in PROFILES:
        raise InputError(None, f"gradient profile must be one of {', '.join(PROFILES)}, not {profile!r}")
    layers = n - 1  # forward order: n - 1 layers, then the classifier
    if profile == "uniform":
        weight = np.ones(layers)
    else:
        stage = np.minimum(np.arange(layers) * 4 // layers, 3)
        weight = 4.0**stage * np.where(np.arange(layers) % 3 == 1, 2.25, 1.0)
    forward = np.concatenate([weight, [weight.max()]])
    elements = np.floor(forward / forward.sum() * total / FLOAT_BYTES).astype(np.int64)
    elements = np.maximum(elements, 1)
    elements[-1] += total // FLOAT_BYTES - elements.sum()  # exact total on the classifier
    return (elements * FLOAT_BYTES)[::-1].copy()


@dataclass(frozen=True)
class GradientPlan:
    """The gradients of one simulated DDP run and how they are bucketed."""

    sizes: np.ndarray  # bytes per gradient, ready order
    layout: tuple  # gradients per bucket
    bucket_bytes: np.ndarray
    bucket_ns: np.ndarray  # pure all-reduce time per bucket (ns, before noise)

    @property
    def n_buckets(self) -> int:
        return len(self.layout)

    def last_of_bucket(self) -> dict:
        """Gradient index -> bucket index, for the last gradient of each bucket."""
        return {int(i): b for b, i in enumerate(np.cumsum(self.layout) - 1)}

    def to_dict(self) -> dict:
        return {
            "sizes": [int(s) for s in self.sizes],
            "layout": list(self.layout),
            "bucket_bytes": [int(b) for b in self.bucket_bytes],
            "bucket_s": [float(t) / 1e9 for t in self.bucket_ns],
        }


def resolve_layout(sizes: np.ndarray, bucket_layout=None, bucket_cap_mb: float | None = None) -> list[int]:
    """The layout given, or DDP's rule at `bucket_cap_mb` (default 25 MB)."""
    if bucket_layout is not None and bucket_cap_mb is not None:
        raise InputError(None, "give a bucket layout or bucket_cap_mb, not both")
    if bucket_layout is not None:
        try:
            return check_layout(bucket_layout, len(sizes))
        except (TypeError, ValueError) as exc:
            raise InputError(None, f"bucket layout: {exc}") from None
    cap = DEFAULT_CAP_MB if bucket_cap_mb is None else float(bucket_cap_mb)
    if not cap > 0:
        raise InputError(None, f"bucket_cap_mb must be > 0, not {cap:g}")
    return cap_layout(sizes, cap * MIB)


def gradient_plan(sizes, layout, mean_ns: float, ranks: int, system=None, algorithm: str = "ring") -> GradientPlan:
    """Per-bucket all-reduce times. `mean_ns`: the catalogue's per-instance all-reduce time (the mean
    over equal buckets of the same total bytes); its latency part (launch + 2(p-1) alpha) is paid
    per bucket and its volume part is shared out by bytes. With a system the ring/tree of its links
    costs each bucket directly."""
    sizes = np.asarray(sizes, dtype=np.int64)
    cuts = np.cumsum([0, *layout])
    nbytes = np.add.reduceat(sizes, cuts[:-1]).astype(float)
    if system is not None:
        from extradeep.system import collective_time

        seconds = [NCCL_LAUNCH + collective_time("all_reduce", algorithm, ranks, b, system)[0] for b in nbytes]
        times = np.array(seconds) * 1e9
    else:
        latency = (NCCL_LAUNCH + 2 * NCCL_ALPHA * max(ranks - 1, 0)) * 1e9
        volume = max(mean_ns - latency, 0.0) * len(layout)  # the whole gradient's volume time
        times = latency + volume * nbytes / sizes.sum()
    return GradientPlan(sizes=sizes, layout=tuple(int(c) for c in layout), bucket_bytes=nbytes, bucket_ns=times)
