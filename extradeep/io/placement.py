"""Which ranks shared a node, from every signal the profiles carry, and which signal said so.

Each profile gives a *placement* (:func:`empty_placement` lists its keys; the format readers fill
them: :func:`extradeep.io.nsys.layout.read_placement`, :func:`extradeep.io.kineto.placement.trace_placement`).
This module turns the placements of a batch into the cluster layout that ``settings["layout"]``
keeps, format-neutrally. Nodes come from, in order of trust (:data:`SOURCES`):

1. ``hostname``: the host each rank ran on (nsys ``TARGET_INFO_SYSTEM_ENV`` Hostname, else the
   captured ``SLURMD_NODENAME`` or ``META_DATA_CAPTURE`` DEVICE_DISPLAY_NAME; Kineto ``host_name``).
   Hosts that list the same set of several GPU UUIDs are containers on one node and are joined;
2. ``gpu_uuids``: identical sets of several GPU UUIDs (nsys ``TARGET_INFO_GPU``, else the
   ``GpuInfo`` of ``TARGET_INFO_SYSTEM_ENV`` or a captured ``NVIDIA_VISIBLE_DEVICES``): GPU UUIDs
   are unique hardware ids, so files listing the same GPUs ran on one node;
3. ``devices``: each rank's GPU among the GPUs its node lists (Kineto ``distributedInfo`` rank and
   ``deviceProperties``, or the GPUs an nsys export lists and the one its kernels ran on): when
   rank r runs on device r mod k throughout a run, as every launcher's default block placement
   does, the run has k ranks per node and rank r is on node r // k;
4. ``launcher``: ranks per node given to the launcher that nsys captured (torchrun's
   ``--nproc-per-node``, ``LOCAL_WORLD_SIZE``, ``SLURM_NTASKS_PER_NODE``, ``OMPI_COMM_WORLD_LOCAL_SIZE``);
5. ``export_host``: ``EXPORT_HOST``, where a file was exported: usually the capture host, but not
   when the reports were exported elsewhere. Not used where it puts more ranks on one host than
   that host's files list GPUs;
6. ``system``: the ``--system`` file, for batches whose profiles carry no node signal.

Each run (point x repetition) takes the most trusted signal that covers all of its ranks; every
other signal that covers it is compared with it, and a different grouping of the ranks becomes a
warning. :func:`resolve_layout` weighs the exports' layout against a system file (exports first).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from extradeep.columns import COMPUTE_NODE, PATH, RANK, REP

PLACEMENT_COLUMNS = (
    "host",  # host name recorded at capture (None: not recorded)
    "host_from",  # which field gave it
    "gpu_set",  # comma-joined sorted UUIDs of the GPUs the node lists
    "gpus_from",  # which field gave them
    "node_gpus",  # how many GPUs the node lists (with or without UUIDs)
    "device",  # the device id the rank's GPU work ran on
    "uuid",  # that device's UUID
    "recorded_rank",  # the rank the profile records (Kineto distributedInfo); None: the file name's
    "world_size",  # the world size it records
    "local_ranks",  # ranks per node given to the launcher
    "launcher_from",  # which option or variable said so
    "export_host",  # EXPORT_HOST: where the file was exported
)
# token: (name, where it is read when the files do not say), in order of trust
SOURCES = {
    "hostname": ("host names", "TARGET_INFO_SYSTEM_ENV Hostname"),
    "gpu_uuids": ("GPU UUID sets", "TARGET_INFO_GPU"),
    "devices": ("ranks and devices", "the rank's device among the GPUs its node lists"),
    "launcher": ("launcher", "ranks per node given to the launcher"),
    "export_host": ("export hosts", "EXPORT_HOST"),
    "system": ("system file", "--system"),
}
EXPORT_SOURCES = tuple(s for s in SOURCES if s != "system")
LEGACY = {"exports": "hostname"}  # saved experiments of round 2 name the host-name layout "exports"
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
NO_UUID = "00000000-0000-0000-0000-000000000000"  # what nsys lists for a non-CUDA adapter


def empty_placement() -> dict:
    """A placement with every key of :data:`PLACEMENT_COLUMNS` unknown (None)."""
    return dict.fromkeys(PLACEMENT_COLUMNS)


def uuid_set(uuids) -> str | None:
    """The UUIDs (any spelling: ``GPU-`` prefix, upper case) as one sorted, comma-joined key; None
    when there are none. The all-zero UUID of non-CUDA adapters is left out."""
    found = {m.lower() for u in uuids if u for m in UUID.findall(str(u))} - {NO_UUID}
    return ",".join(sorted(found)) or None


def source_name(source: str | None) -> str:
    """The words for a layout source token."""
    source = LEGACY.get(source, source)
    if source == "mixed":
        return "node signals (not the same in every run)"
    return SOURCES[source][0] if source in SOURCES else "nowhere"


# -- one run ------------------------------------------------------------------------------------------


def _several(gpu_set) -> bool:
    return isinstance(gpu_set, str) and "," in gpu_set


def _known(column: pd.Series) -> bool:
    return bool(len(column)) and bool(column.notna().all())


def _ranks(run: pd.DataFrame) -> np.ndarray:
    """The ranks as the profiles record them (Kineto), else as the file names give them."""
    recorded = run["recorded_rank"] if "recorded_rank" in run else pd.Series(np.nan, index=run.index)
    return pd.to_numeric(recorded.fillna(run[RANK]), errors="coerce").to_numpy(float)


def _hosts_joined(run: pd.DataFrame, column: str = "host") -> np.ndarray:
    """Host per file, with hosts that list the same set of several GPUs joined (containers on one node)."""
    labels = {}
    for host, gpu_set in zip(run[column], run["gpu_set"]):
        labels.setdefault(host, f"gpus:{gpu_set}" if _several(gpu_set) else f"host:{host}")
    return run[column].map(labels).to_numpy()


def _devices_per_node(run: pd.DataFrame) -> int | None:
    """k when rank r used device r mod k for every rank (block placement, k ranks per node), with
    k within the GPUs the node lists; None when the devices do not say (one GPU listed, or no k fits)."""
    listed = pd.to_numeric(run["node_gpus"], errors="coerce").max()
    if not _known(run["device"]) or not (listed >= 2):
        return None
    ranks, devices = _ranks(run), run["device"].to_numpy(float)
    if np.isnan(ranks).any():
        return None
    for k in range(1, int(listed) + 1):
        if np.array_equal(ranks % k, devices):
            return k
    if np.array_equal(ranks, devices):  # one node holds the whole run
        return int(ranks.max()) + 1
    return None


def run_partitions(run: pd.DataFrame) -> tuple[dict[str, np.ndarray], list[str]]:
    """Node labels of one run's files by every export signal that covers all of them, in order of
    trust, and why a signal that is present cannot be where the run ran."""
    out, why = {}, []
    if _known(run["host"]):
        out["hostname"] = _hosts_joined(run)
    if run["gpu_set"].map(_several).all() and len(run):
        out["gpu_uuids"] = run["gpu_set"].to_numpy()
    k = _devices_per_node(run)
    if k:
        out["devices"] = _ranks(run) // k
    local = pd.to_numeric(run["local_ranks"], errors="coerce")
    if _known(local) and local.nunique() == 1 and local.iloc[0] >= 1:
        out["launcher"] = _ranks(run) // local.iloc[0]
    if _known(run["export_host"]):
        hosts = _hosts_joined(run, "export_host")
        problem = _export_host_problem(run, run["export_host"].to_numpy())
        if problem:
            why.append(problem)
        else:
            out["export_host"] = hosts
    return out, why


def _export_host_problem(run: pd.DataFrame, hosts: np.ndarray) -> str | None:
    """Why EXPORT_HOST cannot be where these files ran (more ranks on one host than its GPUs)."""
    listed = pd.to_numeric(run["node_gpus"], errors="coerce")
    for host in pd.unique(hosts):
        mine = hosts == host
        gpus = listed[mine].max()
        if gpus >= 2 and mine.sum() > gpus:
            return (
                f"EXPORT_HOST puts {int(mine.sum())} ranks on {host}, whose files list {int(gpus)} GPUs: the "
                "reports were exported elsewhere, so the export host is not where they ran"
            )
    return None


def _grouping(labels) -> tuple:
    """The partition of the ranks that labels make, independent of the label values."""
    first: dict = {}
    return tuple(first.setdefault(label, len(first)) for label in labels)


# -- a batch ------------------------------------------------------------------------------------------


def cluster_layout(placements: pd.DataFrame, params: list[str], ranks_param: str = "ranks") -> dict:
    """The layout of a batch from per-file placements (columns path, rank, rep, <params> and
    :data:`PLACEMENT_COLUMNS`; missing ones count as unknown).

    Returns {"source": a :data:`SOURCES` token, "mixed" or "none", "sources": {token: runs},
    "signals": tokens some file carries, "gpus_per_node", "points": [{"point", "ranks", "nodes",
    "ranks_per_node"}], "note": why there is no layout (or None), "notes": what else the user
    should know, "warnings": where signals disagree}."""
    frame = placements.reindex(columns=[*placements.columns, *(c for c in PLACEMENT_COLUMNS if c not in placements)])
    frame = frame.sort_values([REP, RANK], kind="stable")
    keys = [*params, "rep"]
    runs = frame.groupby(keys, dropna=False, sort=True) if keys else [((), frame)]
    partitions = [(key, run, *run_partitions(run)) for key, run in runs]
    notes = _unique([why for *_, whys in partitions for why in whys])
    chosen, found, clashes, rows = {}, set(), {}, []
    for key, run, labels, _ in partitions:
        if notes:  # EXPORT_HOST is not where one run ran: it is not where any of them ran
            labels.pop("export_host", None)
        found |= set(labels)
        source = next(iter(labels), None)
        if source is None:
            continue
        chosen[source] = chosen.get(source, 0) + 1
        mine = _grouping(labels[source])
        for other, other_labels in labels.items():
            if other != source and _grouping(other_labels) != mine:
                clashes.setdefault((source, other), []).append((key, len(set(mine)), len(set(_grouping(other_labels)))))
        rows.append(run.assign(node=labels[source]))
    found |= _carried(frame)
    if not rows:
        return _no_layout(found, notes)
    placed = pd.concat(rows)
    if "export_host" in chosen:
        notes.append(
            "EXPORT_HOST names where each file was exported, which is where it ran only when the reports were "
            "exported on the nodes that ran them; give --system FILE if they were not"
        )
    layout = {
        "source": next(iter(chosen)) if len(chosen) == 1 else "mixed",
        "sources": chosen,
        "signals": [s for s in EXPORT_SOURCES if s in found],
        "fields": _fields(placed, chosen),
        "gpus_per_node": _gpus_per_node(placed, keys),
        "points": _points(placed, params),
        "note": None,
        "notes": _unique(notes + _joined_containers(placed) + _uncovered(frame, placed, keys)),
        "warnings": [_clash_text(pair, cases, keys) for pair, cases in clashes.items()],
    }
    return layout


def _fields(placed: pd.DataFrame, chosen: dict) -> list[str]:
    """Where the chosen signals were read: the fields the files name, else the usual one."""
    named = {"hostname": "host_from", "gpu_uuids": "gpus_from", "launcher": "launcher_from"}
    out = []
    for source in chosen:
        column = named.get(source)
        found = placed[column].dropna().unique().tolist() if column in placed else []
        if source == "devices" and placed["recorded_rank"].notna().any():
            found = ["Kineto distributedInfo and deviceProperties"]
        out += [str(f) for f in found] or [SOURCES[source][1]]
    return _unique(out)


def _carried(frame: pd.DataFrame) -> set:
    """The signals some file carries, whether or not they covered a run."""
    carried = {
        "hostname": frame["host"].notna().any(),
        "gpu_uuids": frame["gpu_set"].map(_several).any(),
        "launcher": frame["local_ranks"].notna().any(),
        "export_host": frame["export_host"].notna().any(),
    }
    return {s for s, yes in carried.items() if yes}


def _no_layout(found: set, notes: list) -> dict:
    carried = ", ".join(source_name(s) for s in EXPORT_SOURCES if s in found)
    note = (
        "the profiles carry no node signal (no host names, GPU UUID sets, ranks and devices, launcher or "
        "export hosts), so which ranks share a node is unknown"
        if not carried
        else f"the profiles' node signals ({carried}) do not cover every rank of any run"
    )
    return {
        "source": "none",
        "sources": {},
        "signals": [s for s in EXPORT_SOURCES if s in found],
        "gpus_per_node": None,
        "points": [],
        "note": note + "; communication is modeled without node boundaries",
        "notes": _unique(notes),
        "warnings": [],
    }


def _gpus_per_node(placed: pd.DataFrame, keys: list[str]) -> int:
    """The most ranks found on one node, or the most GPUs a node lists (or the launcher starts on
    one) if that is more."""
    per_node = placed.groupby([*keys, COMPUTE_NODE], dropna=False)[RANK].nunique().max()
    listed = pd.to_numeric(pd.concat([placed["node_gpus"], placed["local_ranks"]]), errors="coerce").max()
    return int(max(per_node, 0 if math.isnan(listed) else listed))


def _points(placed: pd.DataFrame, params: list[str]) -> list[dict]:
    points = []
    # one configuration (no modeled parameter): the whole batch is one point
    for key, group in placed.groupby(params, dropna=False) if params else [((), placed)]:
        key = key if isinstance(key, tuple) else (key,)
        reps = group.groupby(REP)
        points.append(
            {
                "point": {p: _plain(v) for p, v in zip(params, key)},
                "ranks": int(reps[RANK].nunique().max()),
                "nodes": int(reps[COMPUTE_NODE].nunique().max()),
                "ranks_per_node": int(group.groupby([REP, COMPUTE_NODE])[RANK].nunique().max()),
            }
        )
    return points


def _joined_containers(placed: pd.DataFrame) -> list[str]:
    """A note where several host names share one node's GPUs (containers on one node)."""
    if placed["host"].isna().any():
        return []
    hosts = placed.groupby(COMPUTE_NODE)["host"].nunique()
    shared = hosts[hosts > 1]
    if shared.empty:
        return []
    return [
        f"{int(shared.sum())} host names share the GPUs of {len(shared)} node(s) (containers on one node): "
        "they are joined by their GPU UUIDs"
    ]


def _uncovered(frame: pd.DataFrame, placed: pd.DataFrame, keys: list[str]) -> list[str]:
    total = frame.groupby(keys, dropna=False).ngroups if keys else 1
    covered = placed.groupby(keys, dropna=False).ngroups if keys else 1
    if covered == total:
        return []
    return [f"{total - covered} of {total} runs carry no node signal for all their ranks; they have no layout"]


def _clash_text(pair: tuple, cases: list, keys: list[str]) -> str:
    used, other = pair
    key, mine, theirs = cases[0]
    key = key if isinstance(key, tuple) else (key,)
    where = ", ".join(f"{k}={_plain(v)}" for k, v in zip(keys, key))
    more = f" (and {len(cases) - 1} more run(s))" if len(cases) > 1 else ""
    return (
        f"{source_name(used)} and {source_name(other)} disagree: at {where} {source_name(used)} put the ranks on "
        f"{mine} node(s), {source_name(other)} on {theirs}{more}; the layout follows {source_name(used)}, the "
        "more trusted"
    )


def _unique(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def _plain(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number


def run_gpus_per_node(ranks: pd.DataFrame, placements: dict) -> tuple[int | None, str]:
    """(GPUs per node, source) of ONE run from its ranks (columns rank, path) and the placement of
    each path, as :func:`cluster_layout` finds them; (None, "none") without a node signal."""
    frame = ranks.assign(rep=1)
    for column in PLACEMENT_COLUMNS:
        frame[column] = frame[PATH].map(lambda p, c=column: placements[p].get(c))
    layout = cluster_layout(frame, [])
    return layout["gpus_per_node"], layout["source"]


# -- exports against a system file, and the words for it ---------------------------------------------


def resolve_layout(layout: dict | None, system: dict | None) -> dict:
    """{"gpus_per_node", "source", "warning"}: the exports' layout when they carry one (any
    :data:`EXPORT_SOURCES`), else the system file's; the warning says where the two disagree."""
    layout, system = layout or {}, system or {}
    source = LEGACY.get(layout.get("source"), layout.get("source"))
    exported = layout.get("gpus_per_node") if source not in (None, "none") else None
    described = system.get("gpus_per_node")
    warning = None
    if exported and described and int(exported) != int(described):
        warning = (
            f"WARNING: the system file says {int(described)} GPUs per node, but the profiles' "
            f"{source_name(source)} show nodes of {int(exported)}: the layout follows the profiles, "
            "the more trusted source; the system file gives the links only"
        )
    if exported:
        return {"gpus_per_node": int(exported), "source": source, "warning": warning}
    if described:
        return {"gpus_per_node": int(described), "source": "system", "warning": None}
    return {"gpus_per_node": None, "source": "none", "warning": None}
