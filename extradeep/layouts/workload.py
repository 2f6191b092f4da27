"""What is trained: a GPT-like transformer's shape, read from a model description (TOML).

A model description gives the shape that drives FLOPs, bytes and memory::

    name = "GPT 39.1B"
    parameters = "39.1B"          # optional: checked against the shape (within 10%)
    layers = 48
    hidden = 8192
    heads = 64
    seq-len = 2048
    vocab = 51200                 # padded by Megatron to a multiple of 128 x t
    ffn-hidden = 32768            # default 4 x hidden
    dtype = "bf16"                # weights and activations: bf16 | fp16 | fp32
    grad-dtype = "fp32"           # gradients as reduced (default: dtype)
    optimizer-bytes = 12          # per parameter: fp32 master copy + Adam's two moments

Parameter counts follow Megatron-LM's GPT: per layer 4h^2 + 2 h f weights (attention and MLP) and
9h + f biases and layer-norm parameters, plus the embeddings (vocab x hidden, tied with the output
layer) and the position embeddings (seq_len x hidden).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from extradeep.compat import tomllib
from extradeep.errors import InputError, read_problem

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
# the largest layer count, width, GPU count or batch a layout may have: far beyond any real model or
# cluster, and small enough that every product of them stays exact in 64-bit integers and floats
LARGEST_WHOLE = 2**31 - 1


@dataclass(frozen=True)
class TransformerShape:
    """A GPT-like decoder: layers, hidden size, attention heads, sequence length, vocabulary, MLP
    width (``ffn_hidden``, default 4 x hidden), bytes per weight/activation, per gradient and per
    parameter of optimizer state."""

    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int = 51200
    ffn_hidden: int = 0
    param_bytes: int = 2
    grad_bytes: int = 2
    optimizer_bytes: int = 12
    name: str = ""

    def __post_init__(self):
        if not self.ffn_hidden:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)

    @property
    def parameters(self) -> float:
        """All trainable parameters (embeddings tied with the output layer)."""
        return float(layer_parameters(self.hidden, self.ffn_hidden) * self.layers + embedding_parameters(self))

    def to_dict(self) -> dict:
        return asdict(self)

    def label(self) -> str:
        return self.name or f"{self.parameters / 1e9:.1f}B ({self.layers} x {self.hidden})"


def layer_parameters(hidden, ffn_hidden=None):
    """Weights and biases of one transformer layer: QKV, projection, two MLP matrices, two layer norms."""
    h = np.asarray(hidden, float)
    f = 4 * h if ffn_hidden is None else np.asarray(ffn_hidden, float)
    return 4 * h * h + 2 * h * f + 9 * h + f


def embedding_parameters(shape: TransformerShape) -> float:
    return float(shape.vocab * shape.hidden + shape.seq_len * shape.hidden)


def padded_vocab(vocab, tp):
    """Megatron pads the vocabulary to a multiple of 128 x t so that each tensor-parallel shard is even."""
    unit = 128 * np.asarray(tp, float)
    return np.ceil(np.asarray(vocab, float) / unit) * unit


def fused_softmax(micro_batch, heads, tp, seq_len):
    """Where Megatron's FusedScaleMaskSoftmax runs its fused causal kernel: b times the rank's heads
    a multiple of 4 and s at most 4,096 (2021-22 releases; 16,384 from 2023). Elsewhere it falls back
    to PyTorch's casts, scale, mask fill and an fp32 softmax (more traffic; an fp32 output kept)."""
    return ((micro_batch * heads / tp) % 4 == 0) & (seq_len <= 4096)


def training_flops(batch, seq_len, layers, hidden, vocab, recompute: bool = True):
    """Model FLOPs of one step by the formula of Narayanan et al. (SC'21, eq. 3), the one their
    'teraFLOP/s per GPU' uses: 96 B s l h^2 (1 + s / 6h + V / 16 l h) with activation recomputation,
    72 B s l h^2 (1 + s / 6h + V / 12 l h) without."""
    b, s, ll, h, v = (np.asarray(x, float) for x in (batch, seq_len, layers, hidden, vocab))
    if recompute:
        return 96 * b * s * ll * h * h * (1 + s / (6 * h) + v / (16 * ll * h))
    return 72 * b * s * ll * h * h * (1 + s / (6 * h) + v / (12 * ll * h))


MODEL_KEYS = {
    "name": "name",
    "parameters": None,
    "layers": "layers",
    "hidden": "hidden",
    "heads": "heads",
    "seq-len": "seq_len",
    "vocab": "vocab",
    "ffn-hidden": "ffn_hidden",
    "dtype": "param_bytes",
    "grad-dtype": "grad_bytes",
    "optimizer-bytes": "optimizer_bytes",
}


def load_transformer(spec) -> TransformerShape:
    """A TransformerShape from a TOML model description (keys in the module docstring), a dict of
    the same keys, or a TransformerShape. One-line InputError for a bad file."""
    if isinstance(spec, TransformerShape):
        return spec
    if isinstance(spec, dict):
        return shape_from_mapping(spec, "model")
    path = Path(spec)
    if not path.is_file():
        raise InputError(path, "no such model description (a TOML file with layers, hidden, heads, seq-len, ...)")
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(path, f"not a readable TOML model description ({read_problem(exc)})") from None
    shape = shape_from_mapping(data, path)
    return shape if shape.name else TransformerShape(**{**shape.to_dict(), "name": path.stem})


def shape_from_mapping(data: dict, source) -> TransformerShape:
    unknown = sorted(set(data) - set(MODEL_KEYS))
    if unknown:
        raise InputError(source, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(MODEL_KEYS)}")
    missing = [k for k in ("layers", "hidden", "heads", "seq-len") if k not in data]
    if missing:
        raise InputError(source, f"missing key(s) {', '.join(missing)}")
    name = data.get("name", "")
    if not isinstance(name, str):
        raise InputError(source, f"name must be text, got {name!r}")
    values = {"name": name}
    for key in ("layers", "hidden", "heads", "seq-len", "vocab", "ffn-hidden", "optimizer-bytes"):
        if key in data:
            values[MODEL_KEYS[key]] = _whole(source, key, data[key])
    for key in ("dtype", "grad-dtype"):
        if key in data:
            if data[key] not in DTYPE_BYTES:
                raise InputError(source, f"{key} must be one of {', '.join(DTYPE_BYTES)}, got {data[key]!r}")
            values[MODEL_KEYS[key]] = DTYPE_BYTES[data[key]]
    values.setdefault("grad_bytes", values.get("param_bytes", 2))
    shape = TransformerShape(**values)
    if shape.hidden % shape.heads:
        raise InputError(source, f"hidden ({shape.hidden}) is not a multiple of heads ({shape.heads})")
    if "parameters" in data:
        stated = _count(source, data["parameters"])
        if abs(shape.parameters / stated - 1) > 0.10:
            raise InputError(
                source,
                f"parameters {stated:.4g} do not match the shape, which has {shape.parameters:.4g} "
                "(layers x (12 h^2 + 13 h) + embeddings); check layers, hidden and vocab",
            )
    return shape


def _whole(source, key, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LARGEST_WHOLE:
        raise InputError(source, f"{key} must be a whole number from 1 to {LARGEST_WHOLE}, got {value!r}")
    return value


SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def _count(source, value) -> float:
    """A parameter count: a number, or a string such as '39.1B' or '350M'."""
    text = str(value).strip().lower().replace("_", "")
    scale = SUFFIXES.get(text[-1:], 1.0)
    try:
        number = float(text[:-1] if text[-1:] in SUFFIXES else text) * scale
    except ValueError:
        raise InputError(source, f"parameters: cannot read {value!r} (a number, or like '39.1B')") from None
    if not math.isfinite(number) or number <= 0:
        raise InputError(source, f"parameters must be > 0, got {value!r}")
    return number
