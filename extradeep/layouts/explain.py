"""What a fitted layout model says about itself: its composed formula with the fitted
coefficients, and one row per coefficient with what calibrated it (:class:`LayoutModel.formula`
and :meth:`LayoutModel.part_status` call these). Functions of the fitted model's attributes
(``coef_``, ``hardware_``, ``algorithm_``, ``support_``, ``memory_``), so the model's module keeps
to fitting and predicting."""

from __future__ import annotations

import pandas as pd

from extradeep.columns import PART, VALUE
from extradeep.layouts.memory import GIB, MemoryModel
from extradeep.layouts.parts import COEFFICIENTS, NAMES, PRIOR

# how collectives cross nodes when no observed collective did (the interval spans the other way too)
ASSUMED = ", assumed: no measured collective crossed nodes"
OVERLAP_TEXT = {
    "none": "charged in full after the backward pass",
    "buckets": "buckets reduced during the last backward pass; the step waits max(last bucket, C - window)",
}
OVERLAP_ASSUMED = ", assumed: no profile of a ZeRO 0-1 run with d > 1 shows which thread launches them"


def formula_text(model, digits: int = 3) -> str:
    """The composed step formula with the fitted coefficients, one part per line."""
    c = {k: f"{v:.{digits}g}" for k, v in model.coef_.items()}
    gpu = model.hardware_.gpu
    return "\n".join(
        [
            "step = (m + (p - 1) / v) * work + m * logits + (1 - overlap) * dp_sync + optimizer",
            f"work = l/p * layer + v * (p2p + {c['microbatch_overhead']} s)",
            f"layer = (gpu^k + host_floor^k)^(1/k) + {c['layer_overhead']} s,  k = {c['sharpness']},  "
            f"host_floor = {c['host_floor']} s",
            f"gpu = {c['gemm']} * thin * FLOPs / {gpu.peak_flops / 1e12:g} TFLOP/s + {c['memory']} * bytes / "
            f"{gpu.memory_bandwidth / 1e9:g} GB/s + tp_t * TP all-reduce + {c['network']} * TP across nodes"
            f" + {c['collective_latency']} s per TP all-reduce",
            f"bytes = fused-softmax traffic + {c['unfused_softmax']} * the unfused softmax's extra traffic "
            "(b a / t not a multiple of 4)",
            f"thin = 1 + {c['thin_tokens']} / (b s) + {c['thin_width']} / (h / t)",
            f"tp_t (t = 2, 4, 8+) = {c['tp2']}, {c['tp4']}, {c['tp8']} x the nominal ring time on the node's links",
            f"p2p, dp_sync = {c['tp8']} x intra-node + {c['network']} x inter-node nominal time "
            f"({model.algorithm_} collectives{'' if model.algorithm_measured_ else ASSUMED}) "
            f"(overlap = {model.dp_overlap:g})",
            f"ZeRO 0-1 gradient reduction: {OVERLAP_TEXT[model.grad_overlap_]}"
            f"{'' if model.forms_measured_['grad_overlap'] else OVERLAP_ASSUMED}",
            f"optimizer = {c['optimizer']} * Adam bytes / HBM bandwidth + {c['step_constant']} s",
        ]
    )


def coefficient_table(model) -> pd.DataFrame:
    """One row per coefficient: its value, prior, the part it belongs to, what calibrated it
    ('parts', 'step totals', 'fixed', 'off' or 'prior': physics only, extrapolated) and what it means."""
    step = pd.DataFrame(
        {
            "coefficient": list(NAMES),
            VALUE: model.coef_.to_numpy(),
            "prior": PRIOR,
            PART: [c.part for c in COEFFICIENTS],
            "calibrated_by": model.support_.to_numpy(),
            "meaning": [c.meaning for c in COEFFICIENTS],
        }
    )
    default, source = MemoryModel(), "parts" if model.memory_calibrated_ else "prior"
    memory = pd.DataFrame(
        {
            "coefficient": ["activation_scale", "memory_overhead_gib"],
            # to the MiB: an overhead fitted to a few bytes reads 0, not 2.9e-09 GiB
            VALUE: [model.memory_.activation_scale, round(model.memory_.overhead / GIB, 3)],
            "prior": [default.activation_scale, default.overhead / GIB],
            PART: ["memory", "memory"],
            "calibrated_by": [source, source],
            "meaning": [
                "activations and logits over Korthikanti et al.'s bytes",
                "GiB per GPU besides the model (CUDA context, allocator, buffers)",
            ],
        }
    )
    return pd.concat([step, memory], ignore_index=True)
