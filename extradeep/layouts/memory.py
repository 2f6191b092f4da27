"""Peak memory per GPU of a layout, and whether it fits.

Model states per GPU are the parameters of the GPU's stage shard (l/p layers and the embeddings,
divided by t) times bytes per parameter: the 16-bit weights (divided by d with ZeRO 3), gradients
(divided by d with ZeRO 2 and 3) and optimizer states (fp32 master weights and Adam's two moments,
12 bytes, divided by d with ZeRO 1 and above). ZeRO 3 also holds two layers' full 16-bit weights,
gathered for the layer that runs and prefetched for the next (DeepSpeed's and FSDP's prefetch),
beside a layer's recomputation buffer, not beside the output layer's logits. Activations follow
Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022), without
sequence parallelism, per layer and micro-batch in bytes:

    none:       s b h (10 + 24 / t + 5 a s / (h t))
    selective:  s b h (10 + 24 / t)                  (+ one layer's attention core while it is recomputed)
    full:       2 s b h                               (+ one whole layer while it is recomputed)

5 a s / (h t) is the attention core's: the softmax output (2 bytes per score), the dropout mask (1)
and its output (2). Where Megatron's fused softmax kernel does not take the shape (b a / t not a
multiple of 4, or s above 4,096), PyTorch's fp32 softmax keeps its output in 4 bytes: 7 a s / (h t).

The first pipeline stage holds min(p, m) micro-batches in flight under 1F1B (times 1 + (p - 1) / (p v)
interleaved); every stage holds all m when every forward runs before any backward (GPipe, and
Megatron's interleaved schedule when m = p, whose warm-up then takes every micro-batch). The last
stage also holds the output layer's logits, 4 bytes per vocabulary entry and token (Megatron's
vocabulary-parallel cross entropy keeps the fp32 softmax for the backward pass). A micro-batch's
logits are freed by the output layer's backward, before any recomputation buffer exists, so only the
larger of the two counts; the logits of the micro-batches still waiting for their backward (m - 1
when all forwards run first) come on top. The peak is the larger of the two stages, scaled
by a calibrated activation factor, plus a constant for the CUDA context, NCCL buffers and the
allocator's reserve. :class:`MemoryModel` calibrates both on recorded peaks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from extradeep.columns import (
    CHUNKS,
    DP,
    HEADS,
    HIDDEN,
    LAYERS,
    MEMORY_TOTAL,
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
from extradeep.layouts.workload import fused_softmax, layer_parameters, padded_vocab

GIB = 2**30
HEADROOM = 0.05  # share of the GPU's memory a recommended layout leaves free
LOGIT_BYTES = 4.0  # per vocabulary entry and token kept until the backward pass (fp32 softmax)
MEMORY_PARTS = (
    "weights",
    "gradients",
    "optimizer_states",
    "gathered_weights",
    "activations",
    "logits",
    "overhead",
)


@dataclass
class MemoryModel:
    """Peak bytes per GPU: the formulas of the module docstring, with the activations scaled by
    ``activation_scale`` and ``overhead`` bytes added; :meth:`fit` calibrates both on measured peaks."""

    param_bytes: float = 2.0
    grad_bytes: float = 2.0
    optimizer_bytes: float = 12.0
    activation_scale: float = 1.0
    overhead: float = 2.0 * GIB

    def parts(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Bytes per GPU per part (MEMORY_PARTS) and their sum, "peak", for each layout."""
        first, last = self._stage(frame, first=True), self._stage(frame, first=False)
        use_last = last[MEMORY_TOTAL] > first[MEMORY_TOTAL]
        out = pd.DataFrame({k: np.where(use_last, last[k], first[k]) for k in MEMORY_PARTS}, index=frame.index)
        out["peak"] = out[list(MEMORY_PARTS)].sum(axis=1)
        return out

    def _stage(self, frame: pd.DataFrame, first: bool) -> dict[str, np.ndarray]:
        t, p, d, b, m, v = (frame[c].to_numpy(float) for c in (TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, CHUNKS))
        layers, h, a, s = (frame[c].to_numpy(float) for c in (LAYERS, HIDDEN, HEADS, SEQ_LEN))
        vocab = padded_vocab(frame[VOCAB].to_numpy(float), t)
        zero, recompute, schedule = frame[ZERO].to_numpy(int), frame[RECOMPUTE].to_numpy(), frame[SCHEDULE].to_numpy()
        # both end stages hold the (tied) word embeddings; the first also the position embeddings
        params = layers / p * layer_parameters(h) / t + vocab * h / t + np.where(first | (p == 1), s * h / t, 0.0)
        # the attention core keeps 5 bytes per score, 7 where PyTorch's fp32 softmax replaces the fused one
        scores = np.where(fused_softmax(b, a, t, s), 5.0, 7.0) * a * s * s * b / t
        full_layer = s * b * h * (10 + 24 / t) + scores
        kept = np.select(
            [recompute == "full", recompute == "selective"], [2 * s * b * h, s * b * h * (10 + 24 / t)], full_layer
        )
        working = np.select([recompute == "full", recompute == "selective"], [full_layer, scores], 0.0)
        # every forward before any backward: GPipe, and Megatron's interleaving when m == p (its
        # warm-up then takes all the micro-batches)
        all_first = (schedule == "gpipe") | ((schedule == "interleaved") & (m <= p))
        if first:
            in_flight = np.select(
                [all_first, schedule == "interleaved"],
                [m, np.minimum(p, m) * (1 + (p - 1) / (p * v))],
                np.minimum(p, m),
            )
        else:
            in_flight = np.where(all_first, m, 1.0)
        holds_logits = (p == 1) | (not first)
        gathered = np.where(zero >= 3, 2 * layer_parameters(h) / t * self.param_bytes, 0.0)
        logits = np.where(holds_logits, LOGIT_BYTES * s * b * vocab / t, 0.0)
        parts = {
            "weights": params * self.param_bytes / np.where(zero >= 3, d, 1.0),
            "gradients": params * self.grad_bytes / np.where(zero >= 2, d, 1.0),
            "optimizer_states": params * self.optimizer_bytes / np.where(zero >= 1, d, 1.0),
            # ZeRO 3 gathers a layer's full weights for its pass and the next layer's ahead of it
            # (DeepSpeed's and FSDP's prefetch): two layers' worth beside a layer's recomputation
            # buffer, but not beside the logits, which only the output layer needs
            "gathered_weights": np.maximum(gathered - self.activation_scale * np.maximum(logits - working, 0.0), 0.0),
            "activations": self.activation_scale * (in_flight * layers / p * kept + working),
            # a micro-batch's logits are freed by the output layer's backward, before any layer's
            # recomputation buffer exists: those two never coexist, so only what they need beyond it
            # counts; the logits of micro-batches whose backward has not begun stay beside it
            "logits": self.activation_scale
            * (np.maximum(logits - working, 0.0) + np.where(all_first & (p > 1), m - 1, 0.0) * logits),
            "overhead": np.full(len(t), float(self.overhead)),
        }
        parts[MEMORY_TOTAL] = sum(parts.values())
        return parts

    def peak(self, frame: pd.DataFrame) -> np.ndarray:
        return self.parts(frame)["peak"].to_numpy()

    def fit(self, frame: pd.DataFrame, peaks) -> MemoryModel:
        """Calibrate ``activation_scale`` and ``overhead`` on measured peak bytes (one per row of
        ``frame``) by least squares of the relative error; with one peak only the scale moves."""
        peaks = np.asarray(peaks, float)
        fixed = self.parts(frame)
        states = fixed[["weights", "gradients", "optimizer_states", "gathered_weights"]].sum(axis=1).to_numpy()
        variable = (fixed["activations"] + fixed["logits"]).to_numpy() / self.activation_scale

        def residuals(x):
            scale, overhead = np.exp(x[0]), np.exp(x[1]) if len(x) > 1 else self.overhead
            return np.log(states + scale * variable + overhead) - np.log(peaks)

        start = [np.log(self.activation_scale)] + ([np.log(self.overhead)] if len(peaks) > 1 else [])
        solution = least_squares(residuals, start, loss="soft_l1", f_scale=0.05).x
        self.activation_scale = float(np.exp(solution[0]))
        if len(solution) > 1:
            self.overhead = float(np.exp(solution[1]))
        return self


def fit_reasons(peak, capacity, headroom: float = HEADROOM) -> tuple[np.ndarray, np.ndarray]:
    """(fits, reason) per layout: whether its peak stays within the GPU's memory less ``headroom``
    (a share kept free: the estimate is not exact and the allocator fragments near the limit), and
    if not a short why."""
    peak = np.asarray(peak, float)
    capacity = np.broadcast_to(np.asarray(capacity, float), peak.shape)
    usable = capacity * (1 - headroom)
    fits = peak <= usable
    need = np.char.add(np.char.add("needs ", np.char.mod("%.1f", peak / GIB)), " GiB per GPU, has ")
    has = np.char.add(np.char.mod("%.0f GiB", capacity / GIB), np.char.mod(" (%.0f usable)", usable / GIB))
    return fits, np.where(fits, "", np.char.add(need, has))
