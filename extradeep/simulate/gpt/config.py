"""What a simulated GPT training is: the model, the GPU, and the parallel layout it runs in.

`GPTModel` is a Megatron-style decoder (L layers of hidden size h, a attention heads, sequence s,
vocabulary V); `GPU` the accelerator's peak rates and memory; `ParallelLayout` the layout of one run:
tensor-parallel degree t, pipeline stages p, data-parallel degree d, micro-batch size b, micro-batches
per step m, ZeRO stage (0-3; FSDP full sharding is 3), activation recomputation and the pipeline
schedule (1F1B, or interleaved with v model chunks per stage). Ranks are ordered as Megatron-LM
orders them by default (tp fastest, then dp, then pp): rank = tp_rank + t * (dp_rank + d * pp_rank).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

from extradeep.columns import (
    CHUNKS,
    DP,
    FRAMEWORK,
    GLOBAL_BATCH,
    GPUS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PP,
    RECOMPUTE,
    SCHEDULE,
    TP,
    ZERO,
)
from extradeep.errors import InputError

RECOMPUTE_MODES = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved")
FRAMEWORKS = ("megatron", "deepspeed", "fsdp")


@dataclass(frozen=True)
class GPTModel:
    """A GPT decoder: shape and the bytes per value of parameters, gradients and optimizer states.

    Memory per parameter follows the ZeRO paper's mixed-precision accounting: 2 bytes of bf16
    parameters, 2 of bf16 gradients and 12 of optimizer state (fp32 master weights, Adam m and v)."""

    layers: int = 8
    hidden: int = 1024
    heads: int = 16
    seq: int = 1024
    vocab: int = 51200
    param_bytes: int = 2
    grad_bytes: int = 2
    optimizer_bytes: int = 12
    name: str = "gpt"

    def __post_init__(self):
        ints = {k: getattr(self, k) for k in ("layers", "hidden", "heads", "seq", "vocab")}
        bad = [f"{k}={v!r}" for k, v in ints.items() if not isinstance(v, int) or v < 1]
        if bad:
            raise InputError(None, f"GPT model: {', '.join(bad)}: must be whole numbers >= 1")
        if self.hidden % self.heads:
            raise InputError(None, f"GPT model: hidden {self.hidden} is not a multiple of heads {self.heads}")

    @property
    def layer_params(self) -> int:
        """Parameters of one transformer layer: QKV, projection, two MLP matrices, biases and norms."""
        h = self.hidden
        return 12 * h * h + 13 * h

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.seq * self.hidden

    @property
    def parameters(self) -> int:
        return self.layers * self.layer_params + self.embedding_params + 2 * self.hidden

    def to_dict(self) -> dict:
        return {**asdict(self), "parameters": self.parameters}


@dataclass(frozen=True)
class GPU:
    """Peak dense bf16 FLOP/s, HBM bandwidth (B/s) and memory (bytes) of one accelerator."""

    name: str
    peak_flops: float
    hbm_bandwidth: float
    memory: int
    # share of peak a large GEMM reaches, and of HBM bandwidth an elementwise kernel reaches
    gemm_efficiency: float = 0.72
    memory_efficiency: float = 0.8
    # board power (W) with no kernel running and with compute kernels on every SM (see power.py)
    idle_power: float = 60.0
    busy_power: float = 400.0

    def to_dict(self) -> dict:
        return asdict(self)


GPU_PRESETS = {
    "a100-80gb": GPU("NVIDIA A100-SXM4-80GB", 312e12, 2.039e12, 85_899_345_920),
    "a100-40gb": GPU("NVIDIA A100-SXM4-40GB", 312e12, 1.555e12, 42_505_273_344),
    "h100-sxm": GPU(
        "NVIDIA H100 80GB HBM3",
        989e12,
        3.35e12,
        85_520_809_984,
        gemm_efficiency=0.62,
        idle_power=90.0,
        busy_power=700.0,
    ),
}


def load_gpu(spec) -> GPU:
    if isinstance(spec, GPU):
        return spec
    if spec not in GPU_PRESETS:
        raise InputError(None, f"unknown GPU {spec!r}; known: {', '.join(GPU_PRESETS)}")
    return GPU_PRESETS[spec]


@dataclass(frozen=True)
class ParallelLayout:
    """One run's layout. ``micro_batches`` is per data-parallel replica and step (gradient
    accumulation), so the global batch is micro_batch x micro_batches x dp."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1
    micro_batches: int = 1
    zero: int = 0
    recompute: str = "none"
    schedule: str = "1f1b"
    virtual_stages: int = 1
    framework: str = "megatron"
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.micro_batches * self.dp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(tp_rank, dp_rank, pp_rank) of a global rank (Megatron's default order tp-dp-pp)."""
        return rank % self.tp, (rank // self.tp) % self.dp, rank // (self.tp * self.dp)

    def rank_of(self, tp_rank: int, dp_rank: int, pp_rank: int) -> int:
        return tp_rank + self.tp * (dp_rank + self.dp * pp_rank)

    def tp_group(self, rank: int) -> list[int]:
        _, d, p = self.coords(rank)
        return [self.rank_of(k, d, p) for k in range(self.tp)]

    def dp_group(self, rank: int) -> list[int]:
        t, _, p = self.coords(rank)
        return [self.rank_of(t, k, p) for k in range(self.dp)]

    def pp_group(self, rank: int) -> list[int]:
        t, d, _ = self.coords(rank)
        return [self.rank_of(t, d, k) for k in range(self.pp)]

    def mp_group(self, rank: int) -> list[int]:
        """The model-parallel group (tp x pp ranks of one replica): where the gradient norm is reduced."""
        _, d, _ = self.coords(rank)
        return sorted(self.rank_of(t, d, p) for t in range(self.tp) for p in range(self.pp))

    def label(self) -> str:
        """File-name tokens of the layout: tp2.pp2.dp2.mbs1.nmb8.zero1.rc0.vpp1 (vpp1: 1F1B)."""
        parts = [
            f"tp{self.tp}",
            f"pp{self.pp}",
            f"dp{self.dp}",
            f"mbs{self.micro_batch}",
            f"nmb{self.micro_batches}",
            f"zero{self.zero}",
            f"rc{RECOMPUTE_MODES.index(self.recompute)}",
            f"vpp{self.virtual_stages}",
        ]
        return ".".join(parts)

    def to_dict(self) -> dict:
        """The layout in the layout model's column names (`extradeep.columns`: gpus, chunks, ...)."""
        return {
            GPUS: self.world,
            TP: self.tp,
            PP: self.pp,
            DP: self.dp,
            MICRO_BATCH: self.micro_batch,
            MICRO_BATCHES: self.micro_batches,
            GLOBAL_BATCH: self.global_batch,
            ZERO: self.zero,
            RECOMPUTE: self.recompute,
            SCHEDULE: self.schedule,
            CHUNKS: self.virtual_stages,
            FRAMEWORK: self.framework,
        }

    def check(self, model: GPTModel) -> None:
        """Refuse a layout the model cannot run in, with one line saying why."""
        problems = []
        for name in ("tp", "pp", "dp", "micro_batch", "micro_batches", "virtual_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be a whole number >= 1, got {value!r}")
        if self.zero not in (0, 1, 2, 3):
            problems.append(f"zero stage must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.recompute not in RECOMPUTE_MODES:
            problems.append(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}, got {self.recompute!r}")
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.framework not in FRAMEWORKS:
            problems.append(f"framework must be one of {', '.join(FRAMEWORKS)}, got {self.framework!r}")
        if problems:
            raise InputError(None, f"layout {self.label_safe()}: " + "; ".join(problems))
        chunks = self.pp * self.virtual_stages
        if self.schedule == "1f1b" and self.virtual_stages != 1:
            problems.append("virtual stages > 1 need the interleaved schedule")
        if self.schedule == "interleaved" and (self.virtual_stages < 2 or self.pp < 2):
            problems.append("the interleaved schedule needs pp >= 2 and virtual stages >= 2")
        if self.schedule == "interleaved" and self.micro_batches % self.pp:
            problems.append(f"interleaving needs micro-batches ({self.micro_batches}) a multiple of pp ({self.pp})")
        if model.layers % chunks:
            problems.append(f"{model.layers} layers do not split into {chunks} pipeline chunks")
        if model.heads % self.tp or model.hidden % self.tp or model.vocab % self.tp:
            problems.append(f"heads {model.heads}, hidden {model.hidden} and vocabulary must divide by tp {self.tp}")
        if self.zero == 3 and self.pp > 1:
            problems.append("ZeRO-3 / FSDP full sharding is simulated without pipeline parallelism (pp = 1)")
        if problems:
            raise InputError(None, f"layout {self.label()}: " + "; ".join(problems))

    def label_safe(self) -> str:
        try:
            return self.label()
        except (ValueError, TypeError):
            return repr(self)


def fused_softmax(model: GPTModel, layout: ParallelLayout) -> bool:
    """Whether Megatron's FusedScaleMaskSoftmax may run its fused causal kernel for this shape: its
    kernel-availability check asks for b times the rank's heads a multiple of 4 and 16 < s <= 4096
    (the limit of Megatron-LM's releases of 2021-22; 16,384 from 2023). Otherwise it falls back to
    PyTorch's kernels with the softmax in fp32."""
    return (layout.micro_batch * (model.heads // layout.tp)) % 4 == 0 and 16 < model.seq <= 4096


_TOKEN = re.compile(r"^([a-z_]+?)(\d+)$")
TOKENS = {
    "tp": "tp",
    "pp": "pp",
    "dp": "dp",
    "mbs": "micro_batch",
    "nmb": "micro_batches",
    "zero": "zero",
    "rc": "recompute",
    "vpp": "virtual_stages",
}


def parse_layout(text: str, **defaults) -> ParallelLayout:
    """`"tp2.pp2.dp2.mbs1.nmb8.zero1.rc2.vpp2"` (any order, missing tokens default) -> ParallelLayout;
    ``defaults`` set other fields (framework=...). rc0/1/2 = none/selective/full; vpp > 1 means the
    interleaved schedule."""
    values: dict = {}
    for token in str(text).replace(",", ".").split("."):
        token = token.strip().lower()
        if not token:
            continue
        m = _TOKEN.match(token)
        if m is None or m.group(1) not in TOKENS:
            raise InputError(None, f"layout {text!r}: cannot read {token!r} (tokens: {', '.join(TOKENS)})")
        values[TOKENS[m.group(1)]] = int(m.group(2))
    rc = values.pop("recompute", None)
    if rc is not None:
        if rc >= len(RECOMPUTE_MODES):
            raise InputError(None, f"layout {text!r}: rc must be 0 (none), 1 (selective) or 2 (full)")
        values[RECOMPUTE] = RECOMPUTE_MODES[rc]
    if values.get("virtual_stages", 1) > 1:
        values[SCHEDULE] = "interleaved"
    return replace(ParallelLayout(**defaults), **values)
