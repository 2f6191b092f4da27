"""Which ranks share a node, read from the exports: host names, the node's GPUs, the GPU each rank used.

nsys writes, per export, the host name (`TARGET_INFO_SYSTEM_ENV`, name `Hostname`), every GPU of
the node it ran on (`TARGET_INFO_GPU`, with UUIDs) and the device id of each kernel. Ranks whose
exports name the same host share a node; two host names that list the same set of several GPU
UUIDs are containers on one node. GPUs per node is the largest number of GPUs a node lists (or of
ranks found on one node). :func:`cluster_layout` turns the per-file placements of a batch into the
layout settings["layout"] keeps (docs/analysis.md, "Communication across node boundaries").
"""

from __future__ import annotations

import math
import sqlite3

import pandas as pd

from extradeep.errors import InputError
from extradeep.io.nsys.schema import schema_of
from extradeep.io.sqlite import fetch_all, open_readonly

PLACEMENT_COLUMNS = ("host", "device", "uuid", "node_gpus", "gpu_set")


def read_placement(path) -> dict:
    """{host, device, uuid, node_gpus, gpu_set} of one export; None where the export lacks it. `path`
    may be an open export connection (the per-file pass's; left open), so the file is opened once."""
    out = dict.fromkeys(PLACEMENT_COLUMNS)
    own = not isinstance(path, sqlite3.Connection)
    try:
        conn = open_readonly(path) if own else path
    except InputError:
        return out
    try:
        schema = schema_of(conn)
        if schema.has("TARGET_INFO_SYSTEM_ENV") and schema.has_column("TARGET_INFO_SYSTEM_ENV", "value"):
            rows = fetch_all(conn, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1")
            out["host"] = rows[0][0] if rows and rows[0][0] else None
        gpus = []
        if schema.has("TARGET_INFO_GPU") and schema.has_column("TARGET_INFO_GPU", "uuid"):
            real = "totalMemory > 0" if schema.has_column("TARGET_INFO_GPU", "totalMemory") else "1"
            gpus = fetch_all(conn, f"SELECT id, uuid FROM TARGET_INFO_GPU WHERE {real} ORDER BY id")
        if schema.has("CUPTI_ACTIVITY_KIND_KERNEL"):
            rows = fetch_all(conn, "SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1")
            out["device"] = int(rows[0][0]) if rows and rows[0][0] is not None else None
        if gpus:
            out["node_gpus"] = len(gpus)
            out["gpu_set"] = ",".join(sorted(str(u) for _, u in gpus))
            out["uuid"] = next((str(u) for i, u in gpus if i == out["device"]), None)
    except InputError:
        pass
    finally:
        if own:
            conn.close()
    return out


def cluster_layout(placements: pd.DataFrame, params: list[str], ranks_param: str = "ranks") -> dict:
    """The layout of a batch from per-file placements (columns path, rank, rep, <params>, host, ...).

    {"source": "exports" | "none", "gpus_per_node", "points": [{"point", "ranks", "nodes",
    "ranks_per_node"}], "note"}. Without host names the source is "none" and the note says so."""
    frame = placements.copy()
    if frame.empty or frame["host"].isna().all():
        return {
            "source": "none",
            "gpus_per_node": None,
            "points": [],
            "note": "the exports carry no host names, so which ranks share a node is unknown; "
            "communication is modeled without node boundaries (give --system to set the layout)",
        }
    frame["node"] = _nodes(frame)
    per_node = frame.groupby([*params, "rep", "node"], dropna=False)["rank"].nunique()
    gpus = _gpus_per_node(frame, per_node)
    points = []
    # one configuration (no modeled parameter): the whole batch is one point
    for key, group in frame.groupby(params, dropna=False) if params else [((), frame)]:
        key = key if isinstance(key, tuple) else (key,)
        reps = group.groupby("rep")
        points.append(
            {
                "point": {p: _plain(v) for p, v in zip(params, key)},
                "ranks": int(reps["rank"].nunique().max()),
                "nodes": int(reps["node"].nunique().max()),
                "ranks_per_node": int((per_node.loc[key] if params else per_node).max()),
            }
        )
    return {"source": "exports", "gpus_per_node": gpus, "points": points, "note": None}


def run_gpus_per_node(ranks: pd.DataFrame, placements: dict | None = None) -> int | None:
    """GPUs per node of ONE run from its ranks (columns rank, path: the export each came from),
    as :func:`cluster_layout` finds it; None without host names. `placements`: {path: placement}
    already read (the replay's frames carry them); other paths are read here."""
    placements = dict(placements or {})
    placements.update({p: read_placement(p) for p in ranks["path"].unique() if placements.get(p) is None})
    frame = ranks.assign(**{c: ranks["path"].map(lambda p, c=c: placements[p][c]) for c in PLACEMENT_COLUMNS})
    if frame["host"].isna().all():
        return None
    per_node = frame.groupby(_nodes(frame))["rank"].nunique()
    return _gpus_per_node(frame, per_node)


def _gpus_per_node(frame: pd.DataFrame, ranks_per_node: pd.Series) -> int:
    """The most ranks found on one node, or the most GPUs a node lists if that is more."""
    listed = pd.to_numeric(frame["node_gpus"], errors="coerce").max()
    return int(max(ranks_per_node.max(), 0 if math.isnan(listed) else listed))


def _nodes(frame: pd.DataFrame) -> pd.Series:
    """Node label per file: its host, with hosts merged that list the same set of several GPUs."""
    host = frame["host"].fillna("?")
    sets = frame.groupby(host)["gpu_set"].first()
    alias = {}
    for name, gpu_set in sets.items():
        shared = gpu_set is not None and isinstance(gpu_set, str) and gpu_set.count(",") >= 1
        alias[name] = f"gpus:{gpu_set}" if shared else f"host:{name}"
    return host.map(alias)


def _plain(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number
