"""Other GPU types: each kernel class moves by a roofline of its own, calibrated from the profile.

The layout model's compute is GEMM time at peak FLOP/s plus memory-bound time at HBM bandwidth,
each scaled by a calibrated coefficient (``gemm``, ``memory``); on another GPU type the nominal
times move with that GPU's peak FLOP/s and bandwidth. Fitted on step totals alone, the two
coefficients can trade against each other (both slow every step alike on the calibration GPU), and
the transfer inherits whatever split the fit chose. Profiles tell the split: each compute kernel is
classified (:func:`kernel_classes`) as compute-bound or memory-bound, from its FLOPs and bytes where
the frame records them (arithmetic intensity against the GPU's ridge point, peak FLOP/s over
bandwidth), else by name (cuBLAS/CUTLASS GEMMs, convolutions and fused attention are compute-bound,
everything else memory-bound; NCCL kernels are communication). :func:`class_observations` sums each
class's busy time per step (median over the steps, then over the last pipeline stage's ranks, as
the per-part observations take the step). :func:`transfer_factor` compares how the profile's classes
move to the other GPU (compute-bound time by the ratio of peak FLOP/s, memory-bound time by the
ratio of bandwidths: Lin et al.'s per-kernel-class transfer) with how the model's compute moves
there, and :func:`transferred_model` scales the model's compute coefficients by that factor for
predictions on that GPU. (The model's two compute terms are not the two kernel classes: its
memory term also carries the GEMMs' operand traffic, so the classes correct the transfer rather than
set the coefficients.) Predictions on hardware other than the calibration's stay labelled ``estimate`` with a widened
interval: a class's efficiency (share of peak reached) itself differs between GPU generations.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pandas as pd

from extradeep.columns import BYTES, END, KIND, LAUNCH, NAME, PART_COMPUTE, START, STEP
from extradeep.errors import InputError
from extradeep.layouts.parts import COEFFICIENTS, nominal_features
from extradeep.layouts.space import layout_frame

COMPUTE, MEMORY, COMMUNICATION = "compute", "memory", "communication"
COMPUTE_BOUND_NAME = re.compile(
    r"gemm|cutlass|xmma|cublas|nvjet|wgmma|hmma|s16816|s1688|flash|fmha|conv|implicit_convolve|scaled_dot",
    re.I,
)
CLASS_TIMES = ("gemm_time", "memory_time")


def kernel_classes(kernels: pd.DataFrame, ridge: float | None = None) -> pd.Series:
    """'compute', 'memory' or 'communication' per kernel row (columns name, collective, and
    optionally flops and bytes). ``ridge``: the GPU's peak FLOP/s over its bandwidth (FLOP/byte);
    rows with flops and bytes > 0 are compute-bound when their intensity reaches it."""
    names = kernels[NAME].astype(str)
    out = pd.Series(np.where(names.str.contains(COMPUTE_BOUND_NAME), COMPUTE, MEMORY), index=kernels.index)
    if ridge is not None and {"flops", "bytes"} <= set(kernels):
        flops = pd.to_numeric(kernels["flops"], errors="coerce")
        nbytes = pd.to_numeric(kernels[BYTES], errors="coerce")
        known = (flops > 0) & (nbytes > 0)
        out[known] = np.where(flops[known] / nbytes[known] >= ridge, COMPUTE, MEMORY)
    if "collective" in kernels:
        out[kernels["collective"].fillna("").astype(str) != ""] = COMMUNICATION
    return out


def file_class_times(facts) -> pd.DataFrame:
    """Per measured step of one profile (ProfileFacts): busy seconds of compute-bound
    (``gemm_time``) and memory-bound (``memory_time``) kernels launched in it."""
    k = facts.kernels
    k = k[k[KIND] == "kernel"] if KIND in k else k
    classes = kernel_classes(k)
    launched = np.where(k[LAUNCH].to_numpy(float) >= 0, k[LAUNCH].to_numpy(float), k[START].to_numpy(float))
    busy = (k[END] - k[START]).to_numpy(float) * 1e-9
    rows = []
    for step, lo, hi in facts.steps[[STEP, START, END]].itertuples(index=False):
        inside = (launched >= lo) & (launched < hi)
        rows.append(
            {
                "step": step,
                "gemm_time": float(busy[inside & (classes == COMPUTE).to_numpy()].sum()),
                "memory_time": float(busy[inside & (classes == MEMORY).to_numpy()].sum()),
            }
        )
    return pd.DataFrame(rows, columns=[STEP, *CLASS_TIMES])


def transfer_factor(model, observations: pd.DataFrame, hardware) -> float:
    """How much the profile's kernel classes say compute moves to ``hardware``, over what the model
    says: the median over runs of [measured compute-bound time x peak ratio + memory-bound time x
    bandwidth ratio] / measured compute time, divided by the model's compute on ``hardware`` over
    its compute on the calibration hardware. 1 when the model already moves compute as the profile's
    classes do."""
    from extradeep.layouts.hardware import load_hardware
    from extradeep.layouts.parts import compose

    if not hasattr(model, "coef_"):
        raise InputError(None, "the layout model is not fitted; call fit() first", field="model")
    missing = [c for c in CLASS_TIMES if c not in observations]
    if missing or not len(observations):
        raise InputError("kernel-class observations", f"no {', '.join(missing) or 'rows'}")
    source, target = model.hardware_, load_hardware(hardware)
    frame = layout_frame(observations, source="kernel-class observations")
    gemm, memory = (observations[c].to_numpy(float) for c in CLASS_TIMES)
    flops_ratio = source.gpu.peak_flops / target.gpu.peak_flops
    bandwidth_ratio = source.gpu.memory_bandwidth / target.gpu.memory_bandwidth
    measured = (gemm * flops_ratio + memory * bandwidth_ratio) / np.maximum(gemm + memory, 1e-12)
    coef = model.coef_.to_numpy()
    there = compose(nominal_features(frame, target), coef, model.dp_overlap)[PART_COMPUTE]
    here = compose(nominal_features(frame, source), coef, model.dp_overlap)[PART_COMPUTE]
    ok = (gemm + memory > 0) & (here > 0)
    if not ok.any():
        return 1.0
    return float(np.exp(np.median(np.log(measured[ok] / (there[ok] / here[ok])))))


def transferred_model(model, observations: pd.DataFrame, hardware):
    """A copy of a fitted layout model for predictions on ``hardware``: its ``gemm`` and ``memory``
    coefficients scaled by :func:`transfer_factor`, so its compute there moves as the profile's
    kernel classes move by their rooflines (``transfer_factor_`` holds the factor)."""
    factor = transfer_factor(model, observations, hardware)
    bounds = {c.name: (c.low, c.high) for c in COEFFICIENTS}
    out = copy.deepcopy(model)
    for name in ("gemm", "memory"):
        out.coef_[name] = float(np.clip(model.coef_[name] * factor, *bounds[name]))
        out.support_[name] = "kernel classes"
    out.transfer_factor_ = factor
    return out
