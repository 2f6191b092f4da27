"""What each operation of a simulated GPT step costs on one GPU and on the cluster's links.

Compute kernels follow a roofline of their own: GEMMs run at a share of peak FLOP/s that shrinks for
thin matrices (each dimension x contributes x / (x + 96): the tile-quantisation and occupancy loss
that makes a tensor-parallel slice of a GEMM slower per FLOP), elementwise kernels at a share of HBM
bandwidth; every kernel has a fixed few microseconds of ramp-up. Collectives over a process group cost
:func:`extradeep.system.cost_features` on the system's link classes for the group's actual placement
(members per node, nodes spanned) plus NCCL's launch time, with the faster of ring and tree as
NCCL's tuner chooses by message size (or one algorithm when asked). NCCL runs each collective on
several channels, and on multi-NIC nodes each channel crosses nodes through another member's NIC, so
that a group with k members per node moves its inter-node bytes k NICs at a time ("auto"; vTrain's
measured multi-node runs fit this, and not one NIC per ring, which they would need 8x faster than
physics). "auto-one-nic" keeps every ring's inter-node traffic on one NIC. A point-to-point transfer
costs the latency and bandwidth of the link between its two GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from extradeep.simulate.gpt.config import GPU, GPTModel, ParallelLayout, fused_softmax
from extradeep.system import System, cost_features

KERNEL_FIXED_NS = 4_000.0  # ramp-up and tail of a GEMM
ELEMENTWISE_FIXED_NS = 2_500.0
NCCL_LAUNCH_NS = 4_000.0
# "auto": the faster of ring and tree, channels spread over the members' NICs; "auto-one-nic": one NIC per ring
SIM_ALGORITHMS = ("auto", "auto-one-nic")
GEMM_HALF_SIZE = 96.0  # a GEMM dimension of this size reaches half the efficiency of a huge one
ACT_BYTES = 2  # bf16 activations


@dataclass(frozen=True)
class Costs:
    """Durations (ns) and message sizes (bytes) of every kind of operation for one layout."""

    model: GPTModel
    gpu: GPU
    layout: ParallelLayout
    system: System
    algorithm: str = "auto"  # one of SIM_ALGORITHMS or system.ALGORITHMS

    # -- compute ------------------------------------------------------------------------------
    def gemm(self, m: float, n: float, k: float) -> float:
        f = np.prod([x / (x + GEMM_HALF_SIZE) for x in (m, n, k)])
        rate = self.gpu.peak_flops * self.gpu.gemm_efficiency * f
        return 2.0 * m * n * k / rate * 1e9 + KERNEL_FIXED_NS

    def batched_gemm(self, batch: float, m: float, n: float, k: float) -> float:
        """`batch` independent m x n x k products in one kernel (attention scores and values)."""
        return (self.gemm(m, n, k) - KERNEL_FIXED_NS) * batch + KERNEL_FIXED_NS

    def elementwise(self, nbytes: float) -> float:
        return nbytes / (self.gpu.hbm_bandwidth * self.gpu.memory_efficiency) * 1e9 + ELEMENTWISE_FIXED_NS

    @property
    def tokens(self) -> int:
        return self.layout.micro_batch * self.model.seq

    def layer_forward(self) -> list[tuple[str, float]]:
        """(kernel key, ns) of one layer's forward on one tensor-parallel rank, in issue order;
        "AR" marks a tensor-parallel all-reduce of the layer's output."""
        h, t, s, b = self.model.hidden, self.layout.tp, self.model.seq, self.layout.micro_batch
        heads = self.model.heads // t
        tok, act = self.tokens, self.tokens * h * ACT_BYTES
        return [
            ("layernorm_fwd", self.elementwise(2 * act)),
            ("gemm_qkv", self.gemm(tok, 3 * h / t, h)),
            ("bmm_qk", self.batched_gemm(b * heads, s, s, h / self.model.heads)),
            *self.softmax_forward(),
            ("bmm_av", self.batched_gemm(b * heads, s, h / self.model.heads, s)),
            ("gemm_proj", self.gemm(tok, h, h / t)),
            ("AR", 0.0),
            ("dropout_add", self.elementwise(3 * act)),
            ("layernorm_fwd", self.elementwise(2 * act)),
            ("gemm_fc1", self.gemm(tok, 4 * h / t, h)),
            ("gelu_fwd", self.elementwise(2 * 4 * act / t)),
            ("gemm_fc2", self.gemm(tok, h, 4 * h / t)),
            ("AR", 0.0),
            ("dropout_add", self.elementwise(3 * act)),
        ]

    def layer_backward(self) -> list[tuple[str, float]]:
        """One layer's backward: data and weight gradients of every GEMM in reverse order."""
        h, t, s, b = self.model.hidden, self.layout.tp, self.model.seq, self.layout.micro_batch
        heads = self.model.heads // t
        tok, act = self.tokens, self.tokens * h * ACT_BYTES
        bmm = self.batched_gemm(b * heads, s, s, h / self.model.heads)
        return [
            ("dropout_add_bwd", self.elementwise(3 * act)),
            ("gemm_fc2_dgrad", self.gemm(tok, 4 * h / t, h)),
            ("gemm_fc2_wgrad", self.gemm(4 * h / t, h, tok)),
            ("gelu_bwd", self.elementwise(3 * 4 * act / t)),
            ("gemm_fc1_dgrad", self.gemm(tok, h, 4 * h / t)),
            ("gemm_fc1_wgrad", self.gemm(h, 4 * h / t, tok)),
            ("AR", 0.0),
            ("layernorm_bwd", self.elementwise(3 * act)),
            ("dropout_add_bwd", self.elementwise(3 * act)),
            ("gemm_proj_dgrad", self.gemm(tok, h / t, h)),
            ("gemm_proj_wgrad", self.gemm(h / t, h, tok)),
            ("bmm_av_bwd", 2 * bmm),
            *self.softmax_backward(),
            ("bmm_qk_bwd", 2 * bmm),
            ("gemm_qkv_dgrad", self.gemm(tok, h, 3 * h / t)),
            ("gemm_qkv_wgrad", self.gemm(h, 3 * h / t, tok)),
            ("AR", 0.0),
            ("layernorm_bwd", self.elementwise(3 * act)),
        ]

    def attention_core(self) -> list[tuple[str, float]]:
        """What selective recomputation re-runs before a layer's backward: the attention core."""
        keep = {"bmm_qk", "bmm_av", *(k for k, _ in self.softmax_forward())}
        return [(k, d) for k, d in self.layer_forward() if k in keep]

    def _scores_bytes(self) -> float:
        """Bytes of one micro-batch's attention scores on one tensor-parallel rank (b, a/t, s, s)."""
        heads = self.model.heads // self.layout.tp
        return self.layout.micro_batch * heads * self.model.seq**2 * ACT_BYTES

    def softmax_forward(self) -> list[tuple[str, float]]:
        """The fused kernel reads the bf16 scores and writes the probabilities. Otherwise Megatron falls
        back to PyTorch with the softmax in fp32 (Megatron-Core's default, and implied by query-key
        layer scaling in older releases): cast up, scale, in-place causal mask fill, softmax, cast
        down, each a kernel over the whole score tensor."""
        n = self._scores_bytes()  # bf16; the fp32 copies are 2n
        if fused_softmax(self.model, self.layout):
            return [("softmax_fwd", self.elementwise(2 * n))]
        moved = {"softmax_up_fwd": 3, "softmax_scale_fwd": 4, "softmax_mask_fwd": 4, "softmax_torch_fwd": 4}
        return [
            *((k, self.elementwise(c * n)) for k, c in moved.items()),
            ("softmax_down_fwd", self.elementwise(3 * n)),
        ]

    def softmax_backward(self) -> list[tuple[str, float]]:
        """Fused: reads the output gradient and the probabilities, writes the input gradient. PyTorch's
        path runs each forward kernel's backward in reverse: the casts' (the gradient cast up, then
        down), softmax's (three fp32 tensors), the mask fill's and the scale's (a read and a write)."""
        n = self._scores_bytes()
        if fused_softmax(self.model, self.layout):
            return [("softmax_bwd", self.elementwise(3 * n))]
        moved = {"softmax_down_bwd": 3, "softmax_torch_bwd": 6, "softmax_mask_bwd": 4, "softmax_scale_bwd": 4}
        return [*((k, self.elementwise(c * n)) for k, c in moved.items()), ("softmax_up_bwd", self.elementwise(3 * n))]

    def embedding_forward(self) -> list[tuple[str, float]]:
        return [("embedding_fwd", self.elementwise(2 * self.tokens * self.model.hidden * ACT_BYTES))]

    def embedding_backward(self) -> list[tuple[str, float]]:
        return [("embedding_bwd", self.elementwise(4 * self.tokens * self.model.hidden * ACT_BYTES))]

    def head_forward(self) -> list[tuple[str, float]]:
        """Final norm, vocabulary-parallel logits and cross entropy (three small all-reduces with tp > 1)."""
        h, v, t, tok = self.model.hidden, self.model.vocab, self.layout.tp, self.tokens
        logits = tok * v / t * 4
        ce = [("AR_small", 0.0), ("AR_small", 0.0), ("AR_small", 0.0)] if t > 1 else []
        return [
            ("layernorm_fwd", self.elementwise(2 * tok * h * ACT_BYTES)),
            ("gemm_logits", self.gemm(tok, v / t, h)),
            ("softmax_ce_fwd", self.elementwise(2 * logits)),
            *ce,
        ]

    def head_backward(self) -> list[tuple[str, float]]:
        h, v, t, tok = self.model.hidden, self.model.vocab, self.layout.tp, self.tokens
        return [
            ("softmax_ce_bwd", self.elementwise(2 * tok * v / t * 4)),
            ("gemm_logits_dgrad", self.gemm(tok, h, v / t)),
            ("gemm_logits_wgrad", self.gemm(h, v / t, tok)),
            ("AR", 0.0),
            ("layernorm_bwd", self.elementwise(3 * tok * h * ACT_BYTES)),
        ]

    def optimizer_step(self, params: float) -> float:
        """Fused Adam over `params` (this rank's shard): fp32 master, m, v and the gradient read,
        master, m, v and bf16 parameters written."""
        return self.elementwise(params * 30.0)

    def grad_norm(self, params: float) -> float:
        return self.elementwise(params * self.model.grad_bytes)

    # -- communication ------------------------------------------------------------------------
    @property
    def activation_message(self) -> int:
        """Bytes of one micro-batch's hidden states: the TP all-reduce and the PP transfer."""
        return int(self.tokens * self.model.hidden * ACT_BYTES)

    def collective(self, kind: str, members, nbytes: float) -> float:
        """Pure ns of one collective over the ranks `members` (ring, or the chosen algorithm)."""
        return _collective_ns(self.system, self.algorithm, kind, tuple(members), float(nbytes))

    def p2p(self, src: int, dst: int, nbytes: float) -> float:
        g = self.system.gpus_per_node
        if src // g == dst // g:
            return NCCL_LAUNCH_NS + (self.system.intra_latency + nbytes / self.system.intra_bandwidth) * 1e9
        bw = self.system.inter_bandwidth_per_gpu
        return NCCL_LAUNCH_NS + (self.system.inter_latency + nbytes / bw) * 1e9


@lru_cache(maxsize=4096)
def _collective_ns(system: System, algorithm: str, kind: str, members: tuple, nbytes: float) -> float:
    n = len(members)
    if n <= 1:
        return NCCL_LAUNCH_NS
    g = system.gpus_per_node
    counts = np.bincount(np.asarray(members) // g)
    per_node = counts.max()
    choices = ("ring", "tree") if algorithm in SIM_ALGORITHMS else (algorithm,)  # NCCL's tuner takes the faster
    scale = system.coefficients()
    if algorithm == "auto" and (counts > 0).sum() > 1:  # channels through every member's NIC; the thinnest node paces
        scale = scale * np.array([1.0, 1.0, 1.0, 1.0 / counts[counts > 0].min()])
    seconds = min(float((cost_features(kind, a, n, nbytes, int(per_node)) @ scale)[0]) for a in choices)
    return NCCL_LAUNCH_NS + seconds * 1e9
