"""The per-part observation frame: where each measured step of each rank's profile goes, with the run's layout.

`layout_parts(paths)` returns one row per (file, step, part, metric) with the columns of
`PARTS_COLUMNS`: the run (path, app, rep, rank, the file's other parameters), its layout (world,
tp, pp, dp, mbs, nmb, vpp, zero, recompute, schedule, framework: `run_layouts`), the rank's place
(stage, tp_rank, dp_rank), the step (0, 1, ... over the measured training steps; -1 for whole-file
values), the part (`extradeep.columns.PARTS`) and metric:
- `time` (seconds): `step` = the step's wall time; `forward` / `backward` / `recompute` = compute
  kernels launched by the main thread before the step's last backward launch / by the autograd
  thread / forward-only kernels (layer norm, softmax, GELU, dropout forward) the autograd thread runs
  again (recomputed GEMMs cannot be told from backward GEMMs by name and stay in `backward`, so
  `backward` + `recompute` is the backward pass exactly, `recompute` a lower bound); `optimizer` = compute kernels the main
  thread launches after the step's last backward launch; `other_compute` = memcpy, memset and kernels
  of other threads; `tp_comm` / `pp_comm` / `dp_comm` / `other_comm` = NCCL kernel time (waiting
  included, as the profile shows it) by the role of its process group; `idle` = the step minus the
  union of its compute kernels (bubbles, exposed communication, launch gaps);
- `visits`: kernel count per part; `bytes`: message bytes per communication part (a collective's
  whole buffer: all-reduce message, reduce-scatter input, all-gather output, send/recv message);
- `pure_time` (communication parts, when every member's profile of a collective is in the run and
  the group is named the same in all of them): per collective, the earliest end minus the latest
  start over its members, summed per step: the transfer without the wait for the slowest member.
  Grouped point-to-point calls pair differently on each side, so pp_comm has none;
- `memory_peak` (step -1): `allocated` (Kineto's largest Total Allocated) and `reserved` (Kineto's
  Total Reserved, or nsys's peak of CUDA device allocations), bytes.
GPU work counts in the step its launching call starts in, as in the step sums of `read_profile`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import (
    BYTES,
    DP,
    DP_RANK,
    LAYOUT_FIELDS,
    PART,
    PART_BACKWARD,
    PART_DP,
    PART_FORWARD,
    PART_IDLE,
    PART_MEMORY,
    PART_OPTIMIZER,
    PART_OTHER_COMM,
    PART_OTHER_COMPUTE,
    PART_PP,
    PART_RECOMPUTE,
    PART_STEP,
    PART_TP,
    PP,
    PURE_TIME,
    STAGE,
    TIME,
    TP,
    TP_RANK,
    VISITS,
    WORLD,
)
from extradeep.errors import InputError
from extradeep.io.parallel.facts import AUTOGRAD_THREAD, MAIN_THREAD, P2P, ProfileFacts, matches
from extradeep.io.parallel.infer import FORWARD_KERNEL, assign_roles, comm_usage, infer_layout
from extradeep.io.parallel.layout import profile_facts, run_layouts

NS = 1e-9
ALLOCATED, RESERVED = "allocated", "reserved"
PARTS_COLUMNS = [
    "path",
    "app",
    "rep",
    "rank",
    WORLD,
    *LAYOUT_FIELDS,
    STAGE,
    TP_RANK,
    DP_RANK,
    "step",
    PART,
    "metric",
    "value",
]
ROLE_PART = {TP: PART_TP, PP: PART_PP, DP: PART_DP}


def layout_parts(
    paths=None,
    *,
    aliases=None,
    manifest=None,
    settings=None,
    model: dict | None = None,
    pure: bool = True,
    facts: dict | None = None,
) -> pd.DataFrame:
    """The per-part frame of the profiles under `paths` (files, folders) or named by a manifest; see
    the module docstring. attrs: `layouts` (one row per run, with sources), `problems`. ``facts``:
    ProfileFacts already read, by path (they are reused, not read again)."""
    from extradeep.io.discover import manifest_runs, one_format_per_run, param_columns, parse_aliases, runs_from_names

    aliases = parse_aliases(aliases) if isinstance(aliases, (list, tuple)) else aliases
    runs, problems = manifest_runs(manifest, aliases) if manifest is not None else runs_from_names(paths, aliases)
    known, facts = facts or {}, {}
    for path in runs["path"]:
        try:
            facts[path] = known.get(path) or profile_facts(path, settings)
        except InputError as exc:
            problems.append(str(exc))
    runs = runs[runs["path"].isin(facts)].reset_index(drop=True)
    runs, skipped = one_format_per_run(runs)
    problems += skipped
    if runs.empty:
        raise InputError(None, "no readable profiles" + (": " + "; ".join(problems) if problems else ""))
    layouts, more = run_layouts(runs, settings, model, "manifest" if manifest is not None else "file name", facts)
    problems += more
    frames = []
    keys = ["app", *param_columns(runs), "rep"]
    for key, run in runs.groupby(keys, dropna=False, sort=True):
        point = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        layout = _layout_row(layouts, {k: v for k, v in point.items() if k in layouts.columns})
        rows = [file_parts(facts[path], layout, rank, model) for path, rank in zip(run["path"], run["rank"])]
        frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=PARTS_COLUMNS)
        if pure:
            frame = pd.concat([frame, pure_times(run, facts, frame)], ignore_index=True)
        frames.append(frame.assign(app=run["app"].iloc[0], rep=run["rep"].iloc[0]))
    out = pd.concat(frames, ignore_index=True)[PARTS_COLUMNS]
    out.attrs["layouts"] = layouts
    out.attrs["problems"] = problems
    return out


def _layout_row(layouts: pd.DataFrame, key: dict) -> dict:
    """The layout fields of the run with these key values (app, parameters, rep)."""
    match = np.ones(len(layouts), dtype=bool)
    for name, value in key.items():
        column = layouts[name]
        match &= (column.isna() & pd.isna(value)).to_numpy() | (column == value).to_numpy()
    row = layouts[match].iloc[0] if match.any() else pd.Series(dtype=object)
    return {k: row.get(k) for k in (WORLD, *LAYOUT_FIELDS)}


def file_parts(facts: ProfileFacts, layout: dict, rank, model: dict | None = None) -> pd.DataFrame:
    """Rows of one profile: its steps' parts, then its memory peaks (step -1)."""
    fields = infer_layout(facts, model)
    roles = {k: v[0].key for k, v in assign_roles(facts, comm_usage(facts)).items() if k in ROLE_PART}
    part_of_comm = {key: ROLE_PART[role] for role, key in roles.items()}
    base = {"path": facts.path, "rank": int(rank), **layout, **{c: fields[c].value for c in (STAGE, TP_RANK, DP_RANK)}}
    if base[STAGE] is None and layout.get(PP) == 1:
        base[STAGE] = 0
    rows = []
    k = facts.kernels.copy()
    k["t"] = np.where(k["launch"] >= 0, k["launch"], k["start"])
    k["part"] = _kernel_parts(k, part_of_comm)
    for step, lo, hi in facts.steps[["step", "start", "end"]].itertuples(index=False):
        mine = k[(k["t"] >= lo) & (k["t"] < hi)].copy()
        _optimizer(mine)
        rows.append((step, PART_STEP, TIME, (hi - lo) * NS))
        for part, group in mine.groupby("part"):
            rows.append((step, part, TIME, float((group["end"] - group["start"]).sum()) * NS))
            rows.append((step, part, VISITS, float(len(group))))
            if part in (PART_TP, PART_PP, PART_DP, PART_OTHER_COMM):
                rows.append((step, part, BYTES, float(group["bytes"].sum())))
        compute = mine[~mine["part"].isin([PART_TP, PART_PP, PART_DP, PART_OTHER_COMM])]
        rows.append((step, PART_IDLE, TIME, ((hi - lo) - _union(compute["start"], compute["end"], lo, hi)) * NS))
    for metric in (ALLOCATED, RESERVED):
        if facts.memory.get(metric) is not None:
            rows.append((-1, PART_MEMORY, metric, float(facts.memory[metric])))
    frame = pd.DataFrame(rows, columns=["step", PART, "metric", "value"])
    for key, value in base.items():
        frame[key] = value
    return frame


def _kernel_parts(k: pd.DataFrame, part_of_comm: dict) -> np.ndarray:
    comm = k["collective"] != ""
    compute = (k["kind"] == "kernel") & ~comm
    forward_name = pd.Series(matches(k["name"], FORWARD_KERNEL), index=k.index)
    out = np.full(len(k), PART_OTHER_COMPUTE, dtype=object)
    out[(compute & (k["thread"] == MAIN_THREAD)).to_numpy()] = PART_FORWARD
    autograd = (compute & (k["thread"] == AUTOGRAD_THREAD)).to_numpy()
    out[autograd] = PART_BACKWARD
    out[autograd & forward_name.to_numpy()] = PART_RECOMPUTE
    out[comm.to_numpy()] = [part_of_comm.get(c, PART_OTHER_COMM) for c in k.loc[comm, "comm"]]
    return out


def _optimizer(mine: pd.DataFrame) -> None:
    """Main-thread compute after the step's last backward launch is the optimizer step."""
    bwd = mine.loc[mine["thread"] == AUTOGRAD_THREAD, "t"]
    if len(bwd):
        late = (mine["part"] == PART_FORWARD) & (mine["t"] > bwd.max())
        mine.loc[late, "part"] = PART_OPTIMIZER


def _union(starts, ends, lo: float, hi: float) -> float:
    s = np.clip(np.asarray(starts, dtype=np.float64), lo, hi)
    e = np.clip(np.asarray(ends, dtype=np.float64), lo, hi)
    if not len(s):
        return 0.0
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    gaps = np.maximum(s[1:] - e[:-1], 0.0).sum()
    return float(e[-1] - s[0] - gaps)


def pure_times(run: pd.DataFrame, facts: dict, frame: pd.DataFrame) -> pd.DataFrame:
    """`pure_time` rows per rank, step and communication part: collectives matched over the run's
    ranks by group and call order (see the module docstring)."""
    calls: dict[str, list] = {}
    for path, rank in zip(run["path"], run["rank"]):
        k = facts[path].kernels
        k = k[(k["collective"] != "") & ~k["collective"].isin(P2P) & ~k["comm"].str.startswith("stream ")]
        for key, group in k.groupby("comm"):
            calls.setdefault(key, []).append((path, rank, group.sort_values("launch")))
    rows = []
    for key, members in calls.items():
        n = min(len(g) for _, _, g in members)
        if len(members) < 2 or n == 0:
            continue
        starts = np.stack([g["start"].to_numpy()[:n] for _, _, g in members])
        ends = np.stack([g["end"].to_numpy()[:n] for _, _, g in members])
        pure = np.maximum(ends.min(axis=0) - starts.max(axis=0), 0)
        for path, _rank, g in members:
            rows.append(pd.DataFrame({"path": path, "t": g["launch"].to_numpy()[:n], "pure": pure, "comm": key}))
    if not rows:
        return pd.DataFrame(columns=frame.columns)
    matched = pd.concat(rows, ignore_index=True)
    out = []
    for path, group in matched.groupby("path"):
        f = facts[path]
        kernels = f.kernels
        comm_part = frame[(frame["path"] == path)]
        base = comm_part.iloc[0].to_dict() if len(comm_part) else {}
        part_of = _comm_parts(f)
        for step, lo, hi in f.steps[["step", "start", "end"]].itertuples(index=False):
            inside = group[(group["t"] >= lo) & (group["t"] < hi)]
            for part, sub in inside.groupby(inside["comm"].map(part_of).fillna(PART_OTHER_COMM)):
                out.append(
                    {**base, "step": step, PART: part, "metric": PURE_TIME, "value": float(sub["pure"].sum()) * NS}
                )
        del kernels
    return pd.DataFrame(out, columns=frame.columns)


def _comm_parts(facts: ProfileFacts) -> dict:
    roles = assign_roles(facts, comm_usage(facts))
    return {v[0].key: ROLE_PART[k] for k, v in roles.items() if k in ROLE_PART}
