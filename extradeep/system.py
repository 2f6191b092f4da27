"""The machine a training runs on and what its collectives cost there (alpha-beta, per link class).

One description serves the simulator (its truth), the `--system FILE` of the CLI and the
communication models: GPUs per node, the intra-node link (NVLink/NVSwitch: hundreds of GB/s, a few
microseconds), the inter-node link (tens of GB/s per NIC, higher latency) and NICs per node. A
collective over p ranks on nodes of g GPUs costs

    T = a_intra * n_intra + m_intra / bw_intra + a_inter * n_inter + m_inter / bw_inter_per_gpu,

with n the sequential steps and m the bytes each rank moves over that link class, both given by the
algorithm (:func:`cost_features`): ring all-reduce 2(p-1) steps moving 2(p-1)/p of the message over
its slowest link, tree 2 log2 p steps, hierarchical an intra-node reduce-scatter and all-gather
around an inter-node ring all-reduce of 1/g of the message. The inter-node bandwidth per GPU is the
NICs' bandwidth shared by the GPUs of a node. docs/analysis.md, "Communication across node
boundaries", explains the model built on it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from extradeep.compat import tomllib
from extradeep.errors import InputError, read_problem, special_file_problem

ALGORITHMS = ("ring", "tree", "hierarchical")
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast")
# feature order of cost_features: latency and inverse bandwidth per link class
FEATURES = ("alpha_intra", "beta_intra", "alpha_inter", "beta_inter")


@dataclass(frozen=True)
class System:
    """A cluster's layout and links: GPUs per node, intra- and inter-node bandwidth (B/s; inter per
    NIC) and latency (s per step), NICs per node. Bandwidths and latencies may be NaN when only the
    layout is known (read from exports)."""

    gpus_per_node: int
    intra_bandwidth: float = float("nan")
    intra_latency: float = float("nan")
    inter_bandwidth: float = float("nan")
    inter_latency: float = float("nan")
    nics_per_node: int = 0
    name: str = ""

    @property
    def inter_bandwidth_per_gpu(self) -> float:
        """What one GPU gets across nodes when all GPUs of a node send at once."""
        nics = self.nics_per_node or self.gpus_per_node
        return self.inter_bandwidth * min(nics, self.gpus_per_node) / self.gpus_per_node

    @property
    def has_links(self) -> bool:
        return all(np.isfinite([self.intra_bandwidth, self.intra_latency, self.inter_bandwidth, self.inter_latency]))

    def coefficients(self) -> np.ndarray:
        """(alpha_intra, beta_intra, alpha_inter, beta_inter) in the order of :data:`FEATURES`."""
        return np.array(
            [self.intra_latency, 1.0 / self.intra_bandwidth, self.inter_latency, 1.0 / self.inter_bandwidth_per_gpu]
        )

    def nodes(self, ranks) -> np.ndarray:
        return np.ceil(np.asarray(ranks, float) / self.gpus_per_node)

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict | None) -> System | None:
        if not data:
            return None
        known = {f.name for f in fields(cls)}
        return cls(**{k: (float("nan") if v is None else v) for k, v in data.items() if k in known})


PRESETS = {
    # DGX A100/H100 style: 8 GPUs on NVSwitch (~230 GB/s NCCL bus bandwidth), one 200 Gb/s NIC per GPU
    "dgx-8-nvswitch": System(8, 230e9, 2e-6, 25e9, 6e-6, 8, "dgx-8-nvswitch"),
    # 4 GPUs with NVLink (~100 GB/s), one 200 Gb/s NIC per GPU
    "4gpu-1nic-per-gpu": System(4, 100e9, 3e-6, 25e9, 6e-6, 4, "4gpu-1nic-per-gpu"),
    # 4 GPUs with NVLink sharing one 100 Gb/s NIC
    "4gpu-1nic": System(4, 100e9, 3e-6, 12.5e9, 8e-6, 1, "4gpu-1nic"),
}

TOML_KEYS = {
    "gpus-per-node": "gpus_per_node",
    "intra-bandwidth": "intra_bandwidth",
    "intra-latency": "intra_latency",
    "inter-bandwidth": "inter_bandwidth",
    "inter-latency": "inter_latency",
    "nics-per-node": "nics_per_node",
    "preset": None,
    "name": "name",
}


def load_system(spec) -> System:
    """A System from a preset name, a TOML file (keys: preset, gpus-per-node, intra-bandwidth,
    intra-latency, inter-bandwidth (per NIC), inter-latency, nics-per-node; bandwidths in B/s or
    with a unit like "25 GB/s", latencies in s or "6 us"), or a System. A file's keys override
    its preset's."""
    if isinstance(spec, System):
        return spec
    text = str(spec)
    if text in PRESETS:
        return PRESETS[text]
    path = Path(text)
    if not path.is_file():
        raise InputError(
            path, special_file_problem(path) or f"no such system file, and not a preset ({', '.join(PRESETS)})"
        )
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(path, f"not a readable TOML system file ({read_problem(exc)})") from None
    system = system_from_mapping(data, path)
    return replace(system, name=system.name or path.stem)


def system_from_mapping(data: dict, path) -> System:
    """A System from a TOML file's keys (see :func:`load_system`); ``path`` names the source in errors."""
    unknown = sorted(set(data) - set(TOML_KEYS))
    if unknown:
        raise InputError(path, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TOML_KEYS)}")
    base = PRESETS.get(data.get("preset", ""))
    if "preset" in data and base is None:
        raise InputError(path, f"unknown preset {data['preset']!r}; known: {', '.join(PRESETS)}")
    values = {}
    for key, value in data.items():
        field_name = TOML_KEYS[key]
        if field_name in ("gpus_per_node", "nics_per_node"):
            if not isinstance(value, int) or value < (1 if field_name == "gpus_per_node" else 0):
                raise InputError(path, f"{key} must be a whole number >= 1, got {value!r}")
            values[field_name] = value
        elif field_name and field_name != "name":
            values[field_name] = quantity(path, key, value)
        elif field_name == "name":
            values["name"] = str(value)
    if base is None and "gpus_per_node" not in values:
        raise InputError(path, "gpus-per-node is required (or a preset)")
    return replace(base, **values) if base is not None else System(**values)


UNITS = {
    "gb/s": 1e9,
    "mb/s": 1e6,
    "gbit/s": 1e9 / 8,
    "gb": 1e9,
    "b/s": 1.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}


def quantity(path, key: str, value, units: dict = UNITS) -> float:
    """A positive number, or a string "<number> <unit>" with a unit of ``units`` (default: GB/s,
    Gbit/s, MB/s, s, ms, us, ns)."""
    number = value
    if isinstance(value, str):
        parts = value.replace("/s", "/s ").split()
        try:
            number = float(parts[0]) * (units[parts[1].lower()] if len(parts) > 1 else 1.0)
        except (ValueError, KeyError, IndexError):
            raise InputError(
                path, f"{key}: cannot read {value!r} (a number, or with a unit: {', '.join(units)})"
            ) from None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) or number <= 0:
        raise InputError(path, f"{key} must be a number > 0, got {value!r}")
    return float(number)


def cost_features(collective: str, algorithm: str, ranks, nbytes, gpus_per_node: int) -> np.ndarray:
    """(n, 4) array: per row, the steps and bytes over each link class, in the order of FEATURES,
    so that time = features @ System.coefficients(). ``nbytes`` is the message size per rank
    (an all-gather's output)."""
    p = np.maximum(np.asarray(ranks, float).reshape(-1), 1.0)
    m = np.broadcast_to(np.asarray(nbytes, float), p.shape)
    g = float(gpus_per_node)
    local = np.minimum(p, g)
    nodes = np.ceil(p / g)
    multi = nodes > 1
    out = np.zeros((len(p), 4))
    if algorithm == "hierarchical":
        steps_i, vol_i, steps_e, vol_e = _hierarchical(collective, local, nodes, m)
        out[:] = np.stack([steps_i, vol_i, steps_e, vol_e], axis=1)
        return out
    if algorithm == "tree":
        steps_i, steps_e = np.log2(local), np.log2(nodes)
        volume = m * {"allreduce": 2.0, "broadcast": 1.0}.get(collective, 1.0)
        factor = 2.0 if collective == "allreduce" else 1.0
        if collective in ("allgather", "reducescatter"):  # no tree variant: ring
            return cost_features(collective, "ring", p, m, gpus_per_node)
        out[:, 0], out[:, 2] = factor * steps_i, factor * steps_e
        out[:, 1] = np.where(multi, 0.0, np.where(p > 1, volume, 0.0))
        out[:, 3] = np.where(multi, volume, 0.0)
        return out
    if algorithm != "ring":
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, not {algorithm!r}")
    steps, volume = _ring(collective, p, m)
    out[:, 0], out[:, 1] = np.where(multi, 0.0, steps), np.where(multi, 0.0, volume)
    out[:, 2], out[:, 3] = np.where(multi, steps, 0.0), np.where(multi, volume, 0.0)
    return out


def _ring(collective: str, p: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sequential steps and bytes per rank of a ring over p ranks (the slowest link sets the pace)."""
    share = (p - 1) / p
    if collective == "allreduce":
        return 2 * (p - 1), 2 * share * m
    if collective in ("allgather", "reducescatter"):
        return p - 1, share * m
    if collective == "broadcast":  # pipelined chain: one pass of the message, p-1 hops of latency
        return p - 1, np.where(p > 1, m, 0.0)
    raise ValueError(f"collective must be one of {COLLECTIVES}, not {collective!r}")


def _hierarchical(collective: str, local, nodes, m):
    """Intra-node part on the node's GPUs plus an inter-node ring of 1/local of the message."""
    if collective == "broadcast":
        return np.log2(local), np.where(local > 1, m, 0.0), np.log2(nodes), np.where(nodes > 1, m, 0.0)
    steps_i, vol_i = _ring(collective, local, m)
    steps_e, vol_e = _ring(collective, nodes, m / local)
    return steps_i, vol_i, steps_e, vol_e


def collective_time(collective: str, algorithm: str, ranks, nbytes, system: System) -> np.ndarray:
    """Seconds of one collective of ``nbytes`` per rank over ``ranks`` ranks on ``system``."""
    return cost_features(collective, algorithm, ranks, nbytes, system.gpus_per_node) @ system.coefficients()


def collective_kind(region: str) -> str | None:
    """allreduce / allgather / reducescatter / broadcast from an NCCL kernel or call name."""
    name = region.lower().replace("_", "")
    for kind in COLLECTIVES:
        if kind in name:
            return kind
    return None


def expected_max_normal(n) -> np.ndarray:
    """E[max of n standard normal draws] (0 for n = 1), by numerical integration; the wait for the
    slowest of n ranks whose arrival times spread with unit standard deviation."""
    from scipy import stats

    grid = np.linspace(-8.0, 8.0, 4001)
    cdf, pdf = stats.norm.cdf(grid), stats.norm.pdf(grid)
    out = []
    for k in np.asarray(n, float).reshape(-1):
        k = max(k, 1.0)
        out.append(float(np.trapezoid(grid * k * cdf ** (k - 1) * pdf, grid)))
    return np.array(out)
