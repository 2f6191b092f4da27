"""The parts of one training step of a GPT-like model under a parallel layout, from first principles.

:func:`nominal_features` turns a table of layouts into what each part moves and computes, as
nominal seconds at the GPU's peak FLOP/s and HBM bandwidth and at the links' bandwidths
(:class:`extradeep.system.System`); :func:`compose` scales them by calibrated coefficients
(:data:`COEFFICIENTS`) and composes the step. Per layer and micro-batch on one GPU:

- GEMMs of the linear layers, 2 b s (4 h^2 + 2 h f) / t FLOPs per forward pass, and the attention core,
  4 b s^2 h / t, both as compute; their operands and the elementwise kernels (layer norms and
  dropout-adds on every tensor-parallel rank, GeLU and softmax split by t) as HBM bytes; the extra
  traffic of Megatron's unfused softmax (b a / t not a multiple of 4) has its own coefficient.
  Forward passes: 1, plus 1 with full recomputation; the backward pass counts as 2.
  Thin GEMMs run below the large-shape rate: their time is scaled by 1 + M0 / (b s) + N0 / (h / t)
  (tile and wave under-use along the token and the split hidden dimension; M0 = ``thin_tokens``,
  N0 = ``thin_width``).
- tensor-parallel all-reduces of b s h activations, 2 per forward and 2 per backward pass, ring
  inside a node and across nodes as ``algorithm`` says (:data:`COLLECTIVE_ALGORITHMS`,
  :func:`extradeep.system.cost_features`), plus a
  fixed ``collective_latency`` per all-reduce (NCCL's launch and the ranks' synchronisation: tens
  to hundreds of microseconds, far above the links' per-hop latency; it weighs most on small
  micro-batches at large t).

The layer's GPU time is compute + bytes + TP communication; a host floor (the CPU launching a
layer's kernels) bounds it from below: layer = (gpu^k + floor^k)^(1/k), plus a fixed cost per layer
and micro-batch that nothing overlaps (``layer_overhead``: host bookkeeping between a layer's passes
while the GPU waits). Per micro-batch a stage runs
its l/p layers and sends and receives its boundary activations (b s h / t per direction, gathered
inside the node), plus a fixed overhead per micro-batch; the last stage adds the output layer and
cross entropy (vocabulary V padded to 128 t). The pipeline runs m micro-batches with a bubble of
(p - 1) / v micro-batch slots (v = 1 for 1F1B and GPipe, the chunk count when interleaved). After
it, data-parallel gradient synchronisation of the largest stage's parameters (all-reduce, or
reduce-scatter + all-gather with ZeRO 1-2, + parameter all-gathers each micro-batch with ZeRO 3,
whose gathers and reduce-scatters run layer by layer, each paying the collective's latency),
over the GPUs of the group per node by the same algorithm, minus the overlap, and the tied
embedding's gradients between the first and last stage; then the optimizer step
(Adam: 24 + 2 bytes + gradient bytes per parameter the rank updates) and a constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from extradeep.columns import (
    CHUNKS,
    DP,
    GRADIENT_BUCKET_PARAMS,
    HEADS,
    HIDDEN,
    LAYERS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PART_STEP,
    PP,
    RECOMPUTE,
    SCHEDULE,
    SEQ_LEN,
    TP,
    VOCAB,
    ZERO,
)
from extradeep.layouts.hardware import Hardware
from extradeep.layouts.workload import fused_softmax, layer_parameters, padded_vocab
from extradeep.system import cost_features

# How collectives cross nodes: "hierarchical" (a ring inside each node, then one over the nodes with
# 1/local of the message per GPU, in phases), "nccl" (the faster of a flat ring and a tree per
# collective, as NCCL's tuner picks between them, its channels crossing nodes through the NICs of
# all the group's members on a node at once, pipelined with the links inside the node) or "one-nic"
# (the same, each ring through one GPU's share of the network: modeling/collective.py's ring and tree).
COLLECTIVE_ALGORITHMS = ("hierarchical", "nccl", "one-nic")
TP_CLASSES = (2, 4, 8)  # tensor-parallel group sizes with their own link efficiency (NCCL's bus bandwidth varies)


@dataclass(frozen=True)
class Coefficient:
    name: str
    prior: float
    low: float
    high: float
    part: str
    meaning: str


COEFFICIENTS = (
    Coefficient("gemm", 1.4, 1.0, 20.0, "compute", "GEMM time over the time at peak FLOP/s (1 / efficiency)"),
    Coefficient("memory", 1.3, 1.0, 20.0, "compute", "elementwise and operand traffic over the time at HBM bandwidth"),
    Coefficient("tp2", 1.0, 0.05, 20.0, "tp_comm", "TP all-reduce time over nominal, groups of 2 GPUs"),
    Coefficient("tp4", 1.0, 0.05, 20.0, "tp_comm", "TP all-reduce time over nominal, groups of 4 GPUs"),
    Coefficient(
        "tp8",
        1.0,
        0.05,
        20.0,
        "tp_comm",
        "TP all-reduce time over nominal, groups of 8+ GPUs; other intra-node traffic",
    ),
    Coefficient(
        "network", 1.0, 0.05, 20.0, "dp_sync", "inter-node traffic time over nominal (TP across nodes, p2p, DP)"
    ),
    Coefficient("host_floor", 1e-3, 1e-6, 0.1, "host_overhead", "seconds the host needs per layer and micro-batch"),
    Coefficient(
        "sharpness", 4.0, 1.0, 30.0, "host_overhead", "exponent k of the soft maximum of GPU time and host floor"
    ),
    Coefficient("microbatch_overhead", 1e-3, 1e-7, 1.0, "host_overhead", "seconds per micro-batch and pipeline stage"),
    Coefficient("optimizer", 1.0, 1e-3, 50.0, "optimizer", "optimizer step time over the time at HBM bandwidth"),
    Coefficient("step_constant", 1e-2, 1e-6, 10.0, "optimizer", "seconds per step outside the parts (data, logging)"),
    Coefficient(
        "collective_latency",
        3e-5,
        1e-6,
        1e-3,
        "tp_comm",
        "seconds per tensor-parallel all-reduce besides its volume (NCCL launch and synchronisation)",
    ),
    Coefficient(
        "thin_tokens", 256.0, 1.0, 1e5, "compute", "GEMM rows (tokens b s) at which a layer's GEMMs run at half rate"
    ),
    Coefficient(
        "thin_width", 64.0, 1.0, 1e4, "compute", "GEMM width (h / t) at which a layer's GEMMs run at half rate"
    ),
    Coefficient(
        "layer_overhead",
        1e-3,
        1e-7,
        0.05,
        "host_overhead",
        "seconds per layer and micro-batch that nothing overlaps (host bookkeeping between a layer's passes)",
    ),
    Coefficient(
        "unfused_softmax",
        1.0,
        1e-3,
        5.0,
        "compute",
        "share of Megatron's unfused-softmax extra traffic (b a / t not a multiple of 4) that the runs show",
    ),
)
NAMES = tuple(c.name for c in COEFFICIENTS)
PRIOR = np.array([c.prior for c in COEFFICIENTS])
# how firmly each prior holds (a factor on the model's prior_weight). The host's constants' priors
# are order-of-magnitude guesses, not physics: held as firmly as the others, they stayed near 10 ms,
# 1 ms and 1 ms where the profiles said 0-2 ms (5-10% of a 0.1 s step on simulated studies), and the
# host floor made thin layouts beyond the profiled ones host-bound (draw 16: +20% at t = 8)
GUESSED_PRIORS = {"step_constant": 0.01, "microbatch_overhead": 0.01, "host_floor": 0.01}
PRIOR_FIRMNESS = np.array([GUESSED_PRIORS.get(c.name, 1.0) for c in COEFFICIENTS])


def nominal_features(
    frame: pd.DataFrame, hardware: Hardware, algorithm: str = "hierarchical", overlap: bool = False
) -> dict[str, np.ndarray]:
    """Nominal seconds and counts per layout (arrays in the order of ``frame``): per layer and
    micro-batch, per micro-batch and stage, and per step. ``frame`` is a checked layout frame;
    ``algorithm`` one of :data:`COLLECTIVE_ALGORITHMS`; ``overlap``: whether ZeRO 0-1 reduce
    gradient buckets during the last backward pass."""
    col = {
        c: frame[c].to_numpy(float)
        for c in (TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, CHUNKS, LAYERS, HIDDEN, HEADS, SEQ_LEN, VOCAB)
    }
    t, p, d, b, m, v = (col[c] for c in (TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, CHUNKS))
    layers, h, a, s = col[LAYERS], col[HIDDEN], col[HEADS], col[SEQ_LEN]
    f = frame["ffn_hidden"].to_numpy(float) if "ffn_hidden" in frame else 4 * h
    recompute = frame[RECOMPUTE].to_numpy()
    zero = frame[ZERO].to_numpy(int)
    gpu, system = hardware.gpu, hardware.system
    g = system.gpus_per_node
    pb = 2.0  # bytes of an activation and weight (bf16/fp16)
    vocab = padded_vocab(col[VOCAB], t)
    tokens = b * s

    forward_passes = np.where(recompute == "full", 2.0, 1.0)
    passes = forward_passes + 2.0  # the backward pass does twice the forward's work
    attention_passes = passes + (recompute == "selective")
    gemm_flops = 2 * tokens * (4 * h * h + 2 * h * f) / t * passes + 4 * b * s * s * h / t * attention_passes
    gemm_bytes = pb * (
        (tokens * h + 3 * h * h / t + 3 * tokens * h / t)
        + (tokens * h / t + h * h / t + tokens * h)
        + (tokens * h + h * f / t + tokens * f / t)
        + (tokens * f / t + h * f / t + tokens * h)
    )
    attention_bytes = pb * b * (a / t) * (4 * s * h / a + 2 * s * s)
    elementwise = 9.0 * b * (a / t) * s * s + 22 * tokens * h + 4 * tokens * f / t
    layer_bytes = (gemm_bytes + elementwise) * passes + attention_bytes * attention_passes
    # Megatron's fallback to PyTorch's fp32 softmax: per score, the forward's cast up, scale, mask
    # fill, softmax and cast down move 36 bytes where the fused kernel moves 4, their backwards 40
    # where it moves 6; the forward runs again under either recomputation
    attention_forwards = 1.0 + (recompute != "none")
    extra_per_score = 32.0 * attention_forwards + 34.0
    unfused_bytes = np.where(fused_softmax(b, a, t, s), 0.0, extra_per_score * b * (a / t) * s * s)

    tp_message = tokens * h * pb
    allreduces = 2 * forward_passes + 2
    tp = _collective("allreduce", t, tp_message, np.full_like(t, g), system, algorithm) * allreduces[:, None]

    boundary = 2 * tokens * h * pb / t  # activations forward, gradients backward
    cross = (t * d * p > g) & (p > 1)
    gather = np.where(t > 1, 2 * tokens * h * pb * (t - 1) / t, 0.0) / system.intra_bandwidth
    p2p_link = boundary / np.where(cross, system.inter_bandwidth_per_gpu, system.intra_bandwidth)
    p2p_latency = 2 * np.where(cross, system.inter_latency, system.intra_latency)
    p2p = np.where(p > 1, p2p_link + p2p_latency, 0.0)
    p2p_intra = np.where(p > 1, gather + np.where(cross, 0.0, p2p_link + p2p_latency), 0.0)

    logit_flops = 3 * 2 * tokens * h * vocab / t
    logit_bytes = 3 * pb * (tokens * h + h * vocab / t + tokens * vocab / t) + 16 * tokens * vocab / t

    stage_params = layers / p * layer_parameters(h, f) / t + (vocab * h + s * h) / t
    calls = _dp_calls(zero, layers / p)
    dp, beside, bucketed = _dp_sync(stage_params, t, d, m, zero, forward_passes, g, system, pb, algorithm, calls)
    tied = np.where(
        p > 1, vocab * h / t * pb, 0.0
    )  # first and last stage sum the shared embedding's gradients (a ring of 2 moves them once)
    tied_inter = np.where(cross, tied, 0.0) / system.inter_bandwidth_per_gpu
    dp[:, 3] += tied_inter
    dp[:, 1] += np.where(cross, 0.0, tied) / system.intra_bandwidth
    updated = stage_params / np.where(zero >= 1, d, 1.0)
    return {
        "t": t,
        "tp_class": tp_class(t),
        "p": p,
        "m": m,
        "v": v,
        "layers_per_stage": layers / p,
        "gemm": gemm_flops / gpu.peak_flops,
        "memory": layer_bytes / gpu.memory_bandwidth,
        "unfused_memory": unfused_bytes / gpu.memory_bandwidth,
        "tp_intra": tp[:, 0] + tp[:, 1],
        "tp_inter": tp[:, 2] + tp[:, 3],
        "p2p_intra": p2p_intra,
        "p2p_inter": np.where(cross, p2p, 0.0),
        "logit_gemm": logit_flops / gpu.peak_flops,
        "logit_memory": logit_bytes / gpu.memory_bandwidth,
        "dp_intra": dp[:, 0] + dp[:, 1],
        "dp_inter": dp[:, 2] + dp[:, 3],
        "tied_inter": tied_inter,  # the part of dp_inter that is the same whatever the algorithm
        "dp_beside_intra": beside[:, 0] + beside[:, 1],
        "dp_beside_inter": beside[:, 2] + beside[:, 3],
        # the passes of every micro-batch that ZeRO 2-3's per-layer traffic runs beside (prefetched
        # gathers in the forward and backward passes; reduce-scatters in the backward pass)
        "beside_passes": np.where(zero == 3, 1.0, (passes - 1.0) / passes) * m,
        **_buckets(bucketed, layers / p, layer_parameters(h, f) / t, stage_params, passes, overlap),
        "optimizer": updated * (24 + pb + 2 * 2) / gpu.memory_bandwidth,
        "interleaved": frame[SCHEDULE].to_numpy() == "interleaved",
        "tp_calls": np.where(t > 1, allreduces, 0.0),
        "tokens": tokens,
        "width": h / t,
    }


def _collective(kind: str, ranks, nbytes, local, system, algorithm: str) -> np.ndarray:
    """(n, 4) nominal seconds per link class: intra latency, intra volume, inter latency, inter
    volume, of a collective (``algorithm``: :data:`COLLECTIVE_ALGORITHMS`) whose group has ``local``
    GPUs per node."""
    ranks, nbytes, local = (np.broadcast_to(np.asarray(x, float), np.shape(ranks)) for x in (ranks, nbytes, local))
    out = np.zeros((len(ranks), 4))
    scale = np.array(
        [system.intra_latency, 1 / system.intra_bandwidth, system.inter_latency, 1 / system.inter_bandwidth_per_gpu]
    )
    for size in np.unique(local):
        rows = local == size
        if algorithm == "hierarchical":
            out[rows] = cost_features(kind, "hierarchical", ranks[rows], nbytes[rows], int(size)) * scale
            continue
        # NCCL's channels cross nodes through every member's NIC; "one-nic" keeps each ring on one
        spread = scale / np.array([1.0, 1.0, 1.0, size if algorithm == "nccl" else 1.0])
        ring = cost_features(kind, "ring", ranks[rows], nbytes[rows], int(size)) * spread
        tree = cost_features(kind, "tree", ranks[rows], nbytes[rows], int(size)) * spread
        out[rows] = np.where((tree.sum(axis=1) < ring.sum(axis=1))[:, None], tree, ring)
    return out


def _dp_calls(zero, layers) -> np.ndarray:
    """How many collectives a data-parallel phase issues per pass, each paying its latency: one per
    layer for ZeRO 3's gathers and reduce-scatters (DeepSpeed and FSDP gather and reduce module by
    module); at 512 ranks a ring's 511 steps outweigh a small layer's bytes, and one collective per
    pass counted them once (the step of a 512-way ZeRO 3 layout came out 65% short at the median of
    35 simulated studies). ZeRO 0-2's reductions stay one per phase: their gradient buckets are one
    to four per stage for most shapes, and counting them exposed the pipeline's overlap of the
    reduction, which the model does not follow (docs/performance.md, "Layouts beyond the
    criterion's truth set")."""
    return np.where(zero >= 3, np.maximum(layers, 1.0), 1.0)


def _calls(features: np.ndarray, count: np.ndarray) -> np.ndarray:
    """A collective's (n, 4) features issued as ``count`` collectives of the same total bytes: the
    latency columns (intra, inter) count once per collective."""
    return features * np.stack([count, np.ones_like(count), count, np.ones_like(count)], axis=1)


def _dp_sync(params, t, d, m, zero, forward_passes, g, system, pb, algorithm, calls) -> tuple[np.ndarray, ...]:
    """Nominal seconds per link class of one step's data-parallel synchronisation on one GPU: (all of
    it, the share that runs layer by layer in every micro-batch beside the compute: ZeRO 2's
    reduce-scatters, ZeRO 3's reduce-scatters and parameter gathers, ZeRO 0-1's gradient reduction,
    which buckets may start during the last backward pass). ``calls``: the collectives per pass
    of each reduce-scatter and gather (:func:`_dp_calls`)."""
    local = np.maximum(np.minimum(d, np.maximum(g // t, 1)), 1)
    grads = params * 2.0  # reduced in the parameters' 16-bit type, as Megatron and DeepSpeed do by default
    scatter = _calls(_collective("reducescatter", d, grads, local, system, algorithm), calls)
    gather = _calls(_collective("allgather", d, params * pb, local, system, algorithm), calls)
    reduce = np.where(zero[:, None] == 0, 1.0, 0.0) * _collective("allreduce", d, grads, local, system, algorithm)
    # ZeRO 1 reduce-scatters the accumulated gradients once per step; ZeRO 2-3 keep only their shard
    # of the gradients, so every micro-batch's backward pass reduce-scatters all of them
    scatters = np.where(zero >= 2, m, np.where(zero >= 1, 1.0, 0.0))
    reduce += scatters[:, None] * scatter
    reduce += np.where((zero[:, None] >= 1) & (zero[:, None] <= 2), 1.0, 0.0) * gather  # after the optimizer
    gathers = np.where(zero == 3, m * (forward_passes + 1), 0.0)  # ZeRO 3: parameters gathered per pass
    reduce += gathers[:, None] * gather
    beside = np.where(zero >= 2, scatters, 0.0)[:, None] * scatter + gathers[:, None] * gather
    # ZeRO 0-1 reduce the accumulated gradients once, bucket by bucket: what a framework that overlaps
    # (PyTorch's DDP, Megatron's --overlap-grad-reduce) runs during the last micro-batch's backward pass
    bucketed = np.where(zero[:, None] == 0, reduce, 0.0) + np.where(zero[:, None] == 1, 1.0, 0.0) * scatter
    one = d[:, None] > 1
    return np.where(one, reduce, 0.0), np.where(one, beside, 0.0), np.where(one, bucketed, 0.0)


def _buckets(bucketed, layers, layer_params, stage_params, passes, overlap: bool) -> dict[str, np.ndarray]:
    """What of ZeRO 0-1's reduction the last backward pass can hide, as gradient buckets fill: the
    reductions queue one after another from the moment the first bucket (the last layers) is full,
    and the last bucket (the first layers and the embeddings) closes as the pass ends. With C the
    reduction and W the pass, the step waits max(last share x C, C - (1 - first at) x W) after it."""
    per_bucket = np.maximum(np.ceil(GRADIENT_BUCKET_PARAMS / np.maximum(layer_params, 1.0)), 1.0)  # layers
    last_layers = layers - per_bucket * np.floor(np.maximum(layers - 1, 0) / per_bucket)
    return {
        "dp_bucket_intra": bucketed[:, 0] + bucketed[:, 1],
        "dp_bucket_inter": bucketed[:, 2] + bucketed[:, 3],
        "last_bucket_share": np.clip(1 - (layers - last_layers) * layer_params / stage_params, 0.0, 1.0),
        "first_bucket_at": np.minimum(per_bucket / np.maximum(layers, 1.0), 1.0),
        "bucket_passes": (passes - 1.0) / passes,  # the backward pass (with its recomputation) of a layer's passes
        "grad_overlap": np.full(len(layers), float(overlap)),
    }


def tp_class(t) -> np.ndarray:
    """Index into TP_CLASSES of each tensor-parallel degree (1 has no TP traffic)."""
    t = np.asarray(t, float)
    return np.where(t <= 2, 0, np.where(t <= 4, 1, 2))


STEP_PARTS = ("compute", "host_overhead", "tp_comm", "pp_p2p", "pp_bubble", "dp_sync", "optimizer")


def compose(features: dict[str, np.ndarray], coef, dp_overlap: float = 0.0) -> dict[str, np.ndarray]:
    """Seconds per step and per part (compute, host_overhead, tp_comm, pp_p2p, pp_bubble, dp_sync,
    optimizer; they sum to step) from nominal features and coefficients (in the order of NAMES).
    Features as (n, 1) columns and coefficients as (k, q) give (n, q): q coefficient sets at once."""
    c = dict(zip(NAMES, np.asarray(coef, float)))
    fx = features
    tp_class = fx["tp_class"]  # (where, not indexing, so that coefficients may come as columns)
    tp_scale = np.where(tp_class == 0, c["tp2"], np.where(tp_class == 1, c["tp4"], c["tp8"]))
    thin = 1 + c["thin_tokens"] / fx["tokens"] + c["thin_width"] / fx["width"]
    memory = fx["memory"] + c["unfused_softmax"] * fx["unfused_memory"]
    compute_layer = c["gemm"] * thin * fx["gemm"] + c["memory"] * memory
    tp_layer = tp_scale * fx["tp_intra"] + c["network"] * fx["tp_inter"] + c["collective_latency"] * fx["tp_calls"]
    gpu_layer = compute_layer + tp_layer
    k, floor = c["sharpness"], c["host_floor"]
    ratio = floor / np.maximum(gpu_layer, 1e-12)
    # = (gpu^k + floor^k)^(1/k) without overflow, plus what the GPU waits for between passes
    layer = gpu_layer * (1 + ratio**k) ** (1 / k) + c["layer_overhead"]
    p2p = c["tp8"] * fx["p2p_intra"] + c["network"] * fx["p2p_inter"]
    v = np.where(fx["interleaved"], fx["v"], 1.0)
    work = fx["layers_per_stage"] * layer + v * (p2p + c["microbatch_overhead"])
    logit = c["gemm"] * fx["logit_gemm"] + c["memory"] * fx["logit_memory"]
    m, ls = fx["m"], fx["layers_per_stage"]
    beside = c["tp8"] * fx["dp_beside_intra"] + c["network"] * fx["dp_beside_inter"]
    hidden = _smooth_min(beside, fx["beside_passes"] * ls * gpu_layer)
    bucketed = c["tp8"] * fx["dp_bucket_intra"] + c["network"] * fx["dp_bucket_inter"]
    window = (1 - fx["first_bucket_at"]) * fx["bucket_passes"] * ls * gpu_layer
    hidden = hidden + fx["grad_overlap"] * _smooth_min((1 - fx["last_bucket_share"]) * bucketed, window)
    dp = (1 - dp_overlap) * (c["tp8"] * fx["dp_intra"] + c["network"] * fx["dp_inter"] - hidden)
    parts = {
        "compute": m * (ls * compute_layer + logit),
        "host_overhead": m * (ls * (layer - gpu_layer) + v * c["microbatch_overhead"]),
        "tp_comm": m * ls * tp_layer,
        "pp_p2p": m * v * p2p,
        "pp_bubble": (fx["p"] - 1) / v * work,
        "dp_sync": dp,
        "optimizer": c["optimizer"] * fx["optimizer"] + c["step_constant"],
    }
    parts[PART_STEP] = sum(parts.values())
    return parts


def _smooth_min(a: np.ndarray, b: np.ndarray, k: float = 4.0) -> np.ndarray:
    """(a^-k + b^-k)^(-1/k): the smaller of two non-negative times, smoothly (0 where either is 0):
    what of ZeRO 2-3's per-layer traffic the compute beside it hides (prefetching, as DeepSpeed and
    FSDP do by design), so that the exposed rest never drops below 0."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    safe = (a > 0) & (b > 0)
    lo = np.where(safe, np.minimum(a, b), 1.0)
    ratio = np.where(safe, np.maximum(a, b), 1.0) / lo
    return np.where(safe, lo * (1 + ratio**-k) ** (-1 / k), 0.0)
