"""Memory of one simulated rank: what it holds for the whole run and what a micro-batch adds.

Static: the parameters of the rank's model chunks (its share of the layers and, on the first and
last pipeline chunk, the embedding and the tied output layer, split over tensor parallelism),
their gradients and the optimizer states, each divided by the data-parallel degree from the ZeRO
stage on that shards it (optimizer states from 1, gradients from 2, parameters from 3).
Per micro-batch and layer, the activations kept for the backward pass (Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models", without sequence parallelism):
s b h (10 + 24/t + 5 a s / (h t)) bytes, s b h (10 + 24/t) with selective recomputation (the
attention scores are recomputed), 2 s b h with full recomputation (only the layer's input); where
Megatron falls back to PyTorch's fp32 softmax, 7 a s / (h t) instead of 5. The last
chunk also keeps the fp32 logits (s b V / t x 4 bytes) until its backward. The simulator allocates
and frees these as the schedule runs them, so the peak emerges from the schedule; `expected_peak`
is the closed form the tests compare it with.
"""

from __future__ import annotations

from extradeep.simulate.gpt.config import GPTModel, ParallelLayout, fused_softmax

ALIGN = 512  # the caching allocator rounds every block up to 512 bytes
SEGMENT = 2 << 20  # and reserves device memory in 2 MiB segments


def chunk_params(model: GPTModel, layout: ParallelLayout, global_chunk: int) -> float:
    """Parameters of one model chunk on one tensor-parallel rank."""
    chunks = layout.pp * layout.virtual_stages
    params = model.layers // chunks * model.layer_params / layout.tp
    if global_chunk == 0:
        params += model.embedding_params / layout.tp
    if global_chunk == chunks - 1:
        params += 2 * model.hidden + (model.vocab * model.hidden / layout.tp if chunks > 1 else 0)
    return params


def rank_params(model: GPTModel, layout: ParallelLayout, stage: int) -> float:
    return sum(chunk_params(model, layout, c * layout.pp + stage) for c in range(layout.virtual_stages))


def static_bytes(model: GPTModel, layout: ParallelLayout, stage: int) -> dict[str, float]:
    """Parameters, gradients and optimizer states (bytes) of a rank of this pipeline stage."""
    n, d, z = rank_params(model, layout, stage), layout.dp, layout.zero
    return {
        "parameters": n * model.param_bytes / (d if z >= 3 else 1),
        "gradients": n * model.grad_bytes / (d if z >= 2 else 1),
        "optimizer": n * model.optimizer_bytes / (d if z >= 1 else 1),
    }


def layer_activation_bytes(model: GPTModel, layout: ParallelLayout, recompute: str | None = None) -> float:
    """Bytes one layer keeps per micro-batch until its backward."""
    s, b, h, a, t = model.seq, layout.micro_batch, model.hidden, model.heads, layout.tp
    recompute = layout.recompute if recompute is None else recompute
    if recompute == "full":
        return 2.0 * s * b * h
    per = 10 + 24 / t
    if recompute == "none":  # PyTorch's fp32 softmax keeps its output in 4 bytes, the fused kernel in 2
        per += (5 if fused_softmax(model, layout) else 7) * a * s / (h * t)
    return s * b * h * per


def logits_bytes(model: GPTModel, layout: ParallelLayout) -> float:
    return model.seq * layout.micro_batch * model.vocab / layout.tp * 4.0


def gathered_layer_bytes(model: GPTModel, layout: ParallelLayout) -> float:
    """ZeRO-3: one layer's full parameters, all-gathered for its forward or backward."""
    return model.layer_params / layout.tp * model.param_bytes


def aligned(nbytes: float) -> int:
    return int(-(-int(round(nbytes)) // ALIGN) * ALIGN)


def expected_peak(model: GPTModel, layout: ParallelLayout, stage: int) -> float:
    """Closed-form peak allocated bytes of a 1F1B (or no-pipeline) rank of this stage: the static
    bytes plus the activations of the micro-batches in flight at once (pp - stage of them, at most
    m), the last stage's logits, and what the backward of one layer needs on top (the recomputed
    layer's activations with recomputation, the gathered parameters of two layers with ZeRO-3)."""
    if layout.schedule != "1f1b":
        raise ValueError("the closed form covers the 1F1B schedule only")
    static = sum(aligned(v) for v in static_bytes(model, layout, stage).values())
    per_layer = aligned(layer_activation_bytes(model, layout))
    layers = model.layers // layout.pp
    in_flight = min(layout.pp - stage, layout.micro_batches)
    last = stage == layout.pp - 1
    acts = in_flight * layers * per_layer + (aligned(logits_bytes(model, layout)) if last else 0)
    extra = 0.0
    if layout.recompute != "none":
        extra += aligned(layer_activation_bytes(model, layout, "none"))
    if layout.zero == 3:
        extra += 2 * aligned(gathered_layer_bytes(model, layout))
    return static + acts + extra
