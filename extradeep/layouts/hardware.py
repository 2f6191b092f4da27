"""Where it is trained: the GPU type (peak FLOP/s, HBM bandwidth and size, power, price) and the
cluster's links (:class:`extradeep.system.System`), read from a hardware file (TOML)::

    gpu = "a100-80gb"              # a preset, or a [gpu] table (below) that may start from one
    system = "dgx-8-nvswitch"      # a system preset; the keys of a system file override it
    inter-bandwidth = "12.5 GB/s"  # per NIC (see extradeep.system)
    nics-per-node = 8
    price-per-gpu-hour = 4.10      # what one GPU-hour costs (any currency)
    price-per-kwh = 0.15           # what one kWh costs, for the energy cost
    pue = 1.2                      # facility power over IT power (default 1)
    precision = "bf16"             # the GEMMs' precision: picks the peak FLOP/s (default bf16)

    [gpu]
    preset = "a100-80gb"
    peak-flops = "312 TFLOP/s"     # dense tensor-core FLOP/s at the training dtype, or a table per
                                   # precision: peak-flops = { bf16 = "312 TFLOP/s", tf32 = "156 TFLOP/s" }
    memory-bandwidth = "2039 GB/s"
    memory = "80 GiB"
    power = "400 W"                # average draw per GPU while training (TDP when unknown)

The presets' figures are the vendors' data-sheet numbers (dense tensor FLOP/s per precision: bf16,
fp16, fp8 where the GPU has it, tf32, and fp32 without tensor cores; HBM bandwidth and capacity, board
power). They are nominal: the layout model calibrates efficiencies
against them, so a preset only has to be right in its ratios between GPU types.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from extradeep.compat import tomllib
from extradeep.errors import InputError, read_problem
from extradeep.system import PRESETS as SYSTEM_PRESETS
from extradeep.system import TOML_KEYS as SYSTEM_KEYS
from extradeep.system import System, quantity, system_from_mapping

GIB = 2**30


@dataclass(frozen=True)
class GPU:
    """One GPU type: dense FLOP/s at the training precision, HBM bandwidth (B/s) and capacity
    (bytes), power (W), and the dense FLOP/s per precision where known (``flops_by_precision``)."""

    name: str
    peak_flops: float
    memory_bandwidth: float
    memory: float
    power: float
    flops_by_precision: tuple = ()

    def at_precision(self, precision: str, source=None) -> GPU:
        """This GPU with ``peak_flops`` at ``precision`` (bf16, fp16, fp8, tf32, fp32)."""
        table = dict(self.flops_by_precision)
        if precision not in table:
            known = ", ".join(table) or "none"
            raise InputError(source, f"GPU {self.name!r} has no peak FLOP/s for {precision!r} (known: {known})")
        return replace(self, peak_flops=table[precision])


def _per_precision(**tflops) -> tuple:
    return tuple((k, v * 1e12) for k, v in tflops.items())


AMPERE = _per_precision(bf16=312, fp16=312, tf32=156, fp32=19.5)
HOPPER = _per_precision(bf16=989, fp16=989, fp8=1979, tf32=494, fp32=67)
GPU_PRESETS = {
    "a100-40gb": GPU("a100-40gb", 312e12, 1.555e12, 40 * GIB, 400.0, AMPERE),
    "a100-80gb": GPU("a100-80gb", 312e12, 2.039e12, 80 * GIB, 400.0, AMPERE),
    "h100-sxm": GPU("h100-sxm", 989e12, 3.35e12, 80 * GIB, 700.0, HOPPER),
    "h200-sxm": GPU("h200-sxm", 989e12, 4.8e12, 141e9, 700.0, HOPPER),
    "v100-32gb": GPU("v100-32gb", 125e12, 0.9e12, 32 * GIB, 300.0, _per_precision(fp16=125, fp32=15.7)),
}


@dataclass(frozen=True)
class Hardware:
    """A GPU type on a cluster, with prices: what the search ranks layouts on."""

    gpu: GPU = field(default_factory=lambda: GPU_PRESETS["a100-80gb"])
    system: System = field(default_factory=lambda: SYSTEM_PRESETS["dgx-8-nvswitch"])
    price_per_gpu_hour: float | None = None
    price_per_kwh: float | None = None
    pue: float = 1.0
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or f"{self.gpu.name} on {self.system.name or 'cluster'}"


GPU_KEYS = {"preset", "name", "peak-flops", "memory-bandwidth", "memory", "power"}
HARDWARE_KEYS = {"gpu", "system", "price-per-gpu-hour", "price-per-kwh", "pue", "name", "precision"}
UNITS = {
    "tflop/s": 1e12,
    "pflop/s": 1e15,
    "gflop/s": 1e9,
    "tb/s": 1e12,
    "gb/s": 1e9,
    "gib": GIB,
    "gb": 1e9,
    "tb": 1e12,
    "w": 1.0,
    "kw": 1e3,
}


def load_hardware(spec=None) -> Hardware:
    """A Hardware from a TOML file (keys in the module docstring), a GPU preset name, a Hardware,
    or None (an A100 80 GB DGX cluster). One-line InputError for a bad file or key."""
    if spec is None:
        return Hardware()
    if isinstance(spec, Hardware):
        return spec
    text = str(spec)
    if text in GPU_PRESETS:
        return Hardware(gpu=GPU_PRESETS[text], name=text)
    path = Path(text)
    if not path.is_file():
        raise InputError(path, f"no such hardware file, and not a GPU preset ({', '.join(GPU_PRESETS)})")
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(path, f"not a readable TOML hardware file ({read_problem(exc)})") from None
    return hardware_from_mapping(data, path)


def hardware_from_mapping(data: dict, source) -> Hardware:
    network = {k: v for k, v in data.items() if k in SYSTEM_KEYS and k != "name"}
    unknown = sorted(set(data) - HARDWARE_KEYS - set(network))
    if unknown:
        allowed = sorted(HARDWARE_KEYS | set(SYSTEM_KEYS) - {"preset"})
        raise InputError(source, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    system_name = data.get("system", "dgx-8-nvswitch")
    if system_name not in SYSTEM_PRESETS:
        raise InputError(source, f"unknown system preset {system_name!r}; known: {', '.join(SYSTEM_PRESETS)}")
    system = system_from_mapping({"preset": system_name, **network}, source)
    prices = {}
    for key in ("price-per-gpu-hour", "price-per-kwh", "pue"):
        if key in data:
            prices[key.replace("-", "_")] = _number(source, key, data[key])
    if prices.get("pue", 1.0) < 1.0:
        raise InputError(source, f"pue must be >= 1 (facility power over IT power), got {data['pue']!r}")
    name = str(data.get("name", "") or (Path(source).stem if isinstance(source, Path) else ""))
    gpu = _gpu(data.get("gpu", "a100-80gb"), source)
    if "precision" in data:
        gpu = gpu.at_precision(str(data["precision"]).lower(), source)
    return Hardware(gpu=gpu, system=system, name=name, **prices)


def _gpu(value, source) -> GPU:
    if isinstance(value, str):
        if value not in GPU_PRESETS:
            raise InputError(source, f"unknown GPU preset {value!r}; known: {', '.join(GPU_PRESETS)}")
        return GPU_PRESETS[value]
    if not isinstance(value, dict):
        raise InputError(source, "gpu must be a preset name or a [gpu] table")
    unknown = sorted(set(value) - GPU_KEYS)
    if unknown:
        raise InputError(source, f"[gpu]: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(GPU_KEYS))}")
    base = _gpu(value["preset"], source) if "preset" in value else None
    flops = value.get("peak-flops")
    table = flops if isinstance(flops, dict) else None
    numbers = {
        key.replace("-", "_"): _number(source, f"gpu.{key}", value[key])
        for key in ("peak-flops", "memory-bandwidth", "memory", "power")
        if key in value and not (key == "peak-flops" and table is not None)
    }
    if table is not None:
        per = {str(k).lower(): _number(source, f"gpu.peak-flops.{k}", v) for k, v in table.items()}
        if not per:
            raise InputError(source, "[gpu]: peak-flops table is empty")
        numbers["flops_by_precision"] = tuple(per.items())
        numbers["peak_flops"] = per.get("bf16", per.get("fp16", next(iter(per.values()))))
    elif "peak_flops" in numbers:
        numbers["flops_by_precision"] = ()  # one figure: the training precision's, no table to pick from
    if base is None:
        missing = [k for k in ("peak-flops", "memory-bandwidth", "memory", "power") if k not in value]
        if missing:
            raise InputError(source, f"[gpu]: missing {', '.join(missing)} (or give a preset)")
        return GPU(name=str(value.get("name", "gpu")), **numbers)
    return replace(base, name=str(value.get("name", base.name)), **numbers)


def _number(source, key: str, value) -> float:
    """A positive number, or a string "<number> <unit>" (TFLOP/s, GB/s, GiB, GB, W, kW)."""
    return quantity(source, key, value, UNITS)
