"""The process groups of a simulated run as the frameworks create them, and their NCCL communicator ids.

PyTorch names process groups by a counter that every rank advances for every group created anywhere
(so a group has the same name on all its members), and a trace lists only the groups its rank belongs
to (Kineto's `distributedInfo.pg_config`). Megatron-Core creates its groups in a fixed order with a
description each; FSDP's DeviceMesh names its dimensions `mesh_<dim>`; DeepSpeed passes no description.
"""

from __future__ import annotations

import hashlib

from extradeep.simulate.gpt.config import ParallelLayout
from extradeep.simulate.gpt.names import MEGATRON_GROUPS


def all_groups(layout: ParallelLayout, kind: str) -> list[tuple]:
    """Every group of one kind over the whole world, in creation order (sorted member tuples)."""
    world = range(layout.world)
    of = {
        "tp": layout.tp_group,
        "dp": layout.dp_group,
        "pp": layout.pp_group,
        "mp": layout.mp_group,
        "single": lambda r: [r],
        "tp_dp": lambda r: sorted(
            layout.rank_of(t, d, layout.coords(r)[2]) for t in range(layout.tp) for d in range(layout.dp)
        ),
        "embedding": lambda r: sorted({layout.pp_group(r)[0], layout.pp_group(r)[-1]}),
    }[kind]
    return list(dict.fromkeys(tuple(of(r)) for r in world))


# (description, kind of group, backend) per framework, in the order the framework creates them
_MEGATRON = list(zip(MEGATRON_GROUPS, ("dp", "dp", "single", "mp", "tp", "pp", "embedding", "tp_dp")))
PLANS = {
    "megatron": [(desc, kind, "gloo" if desc.endswith("GLOO") else "nccl") for desc, kind in _MEGATRON],
    "deepspeed": [
        ("undefined", "dp", "nccl"),
        ("undefined", "tp", "nccl"),
        ("undefined", "pp", "nccl"),
        ("undefined", "mp", "nccl"),
        ("undefined", "embedding", "nccl"),
    ],
    "fsdp": [("mesh_dp", "dp", "nccl"), ("mesh_tp", "tp", "nccl")],
}


def process_groups(layout: ParallelLayout, rank: int) -> list[dict]:
    """The groups `rank` belongs to, as Kineto's pg_config lists them: pg_name (creation counter),
    pg_desc, backend_config, pg_size, ranks. The world group comes first ("0", default_pg)."""
    return [cfg for cfg, _ in _created(layout, rank)]


def role_groups(layout: ParallelLayout, rank: int) -> dict[str, dict]:
    """The NCCL group each communication role of the simulator uses (tp, dp, pp, mp, embedding,
    world), among `rank`'s groups."""
    out: dict[str, dict] = {}
    for cfg, kind in _created(layout, rank):
        if cfg["backend_config"] == "cuda:nccl":
            out.setdefault({"default": "world"}.get(kind, kind), cfg)
    return out


def _created(layout: ParallelLayout, rank: int) -> list[tuple[dict, str]]:
    out = [(_config("0", "default_pg", "nccl", tuple(range(layout.world))), "default")]
    counter = 1
    for desc, kind, backend in PLANS[layout.framework]:
        if layout.framework == "fsdp" and kind == "tp" and layout.tp == 1:
            continue
        for members in all_groups(layout, kind):
            if rank in members:
                out.append((_config(str(counter), desc, backend, members), kind))
            counter += 1
    return out


def _config(name: str, desc: str, backend: str, members: tuple) -> dict:
    return {
        "pg_name": name,
        "pg_desc": desc,
        "backend_config": f"cuda:{backend}" if backend == "nccl" else "cpu:gloo,cuda:gloo",
        "pg_size": len(members),
        "ranks": list(members),
    }


def group_for(roles: dict[str, dict], role: str, members) -> dict:
    """The process group a collective of `role` over `members` runs in: the role's group, or the
    world group when it spans every rank (the gradient norm of sharded optimizers)."""
    want = sorted(members)
    cfg = roles.get(role)
    if cfg is not None and cfg["ranks"] == want:
        return cfg
    world = roles.get("world")
    if world is not None and world["ranks"] == want:
        return world
    raise ValueError(f"no {role} process group with ranks {want}")


def comm_id(cfg: dict) -> int:
    """A 64-bit NCCL communicator id, the same on every member of the group (NCCL hashes a unique id)."""
    digest = hashlib.sha256(f"{cfg['pg_name']}:{cfg['ranks']}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
