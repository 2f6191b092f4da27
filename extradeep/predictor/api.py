"""`predict(run_dir, what_if=...)`: replay one run, explain it, and answer what-if questions.

This module reads the run, replays it as measured and explains it (step times, summary, critical
paths, owners, notes); the what-if scenarios are checked and replayed by `predictor.scenarios`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import (
    CATEGORY,
    COLL,
    END,
    EPOCH,
    GROUP,
    HI,
    LO,
    MEASURED,
    NAME,
    NODE,
    OFFSET_NS,
    PATH,
    PHASE,
    PREDICTED,
    QUEUE,
    RANK,
    REP,
    REPLAYED,
    ROLE,
    START,
    STEP,
    STEP_ID,
    SYNC_TYPE,
    WARMUP,
)
from extradeep.errors import InputError
from extradeep.predictor.collectives import collective_table
from extradeep.predictor.critical_path import CLASSES, breakdown, critical_path, node_classes, step_sinks
from extradeep.predictor.graph import OpGraph, build_graph
from extradeep.predictor.overheads import kernel_sum_baseline, overhead_table
from extradeep.predictor.owners import OWNER_COLUMNS, owner_table, path_owners
from extradeep.predictor.replay import ReplayResult, displayed_end, plan_replay, replay
from extradeep.predictor.run_identity import check_one_run
from extradeep.predictor.scenarios import (
    check_pmnf,
    comm_context,
    extrapolation_warnings,
    layout_notes,
    replay_scenario,
    unmatched_patterns,
)
from extradeep.predictor.trace import RunTrace, load_trace
from extradeep.predictor.whatif import WhatIf, parse_what_if

BASELINE = "measured durations"


@dataclass
class Prediction:
    """Everything `predict` found, as DataFrames (times in seconds).

    steps: rank, step_id, epoch, phase, step, measured, replayed, error (relative) per rank and step
    (one row per rank with step_id -1 and phase "span" when the run has no step marks);
    summary: per scenario and phase the median step time (slowest rank per step), with the
    measured value and the sum-of-kernel-times baseline; critical_path: the ops on each step's
    critical path; breakdown: seconds per class on it; owners: the path's seconds per owner (the
    operators and annotations around each piece of it, at every level of their nesting;
    `extradeep.predictor.owners`); overheads: T1-T5 statistics;
    kernel_sums: the baseline's per-queue sums; collectives: matched collectives with their
    pure duration; what_if_steps: predicted step times per scenario.
    """

    steps: pd.DataFrame
    summary: pd.DataFrame
    critical_path: pd.DataFrame
    breakdown: pd.DataFrame
    overheads: pd.DataFrame
    kernel_sums: pd.DataFrame
    collectives: pd.DataFrame
    what_if_steps: pd.DataFrame
    files: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # e.g. a what-if pattern that matches nothing
    graph: OpGraph | None = None
    results: dict = field(default_factory=dict)  # scenario label -> ReplayResult
    owners: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=OWNER_COLUMNS))

    def timeline(self, scenario: str = BASELINE) -> pd.DataFrame:
        """The replayed timeline of a scenario (see `replay_timeline`)."""
        return replay_timeline(self.graph, self.results[scenario])


def replay_timeline(graph: OpGraph, result: ReplayResult) -> pd.DataFrame:
    """One row per replayed op: rank, queue (CPU thread or GPU stream), name, category, class,
    start, end (s from the trace's first event) and on_critical_path (for the whole run)."""
    n = graph.nodes
    keep = n[ROLE].isin(["op", "wake"]).to_numpy()
    end = displayed_end(graph, result)
    on_path = np.zeros(graph.n, dtype=bool)
    sink = int(np.argmax(np.where(keep, result.end, -np.inf)))
    on_path[critical_path(graph, result, sink, float(result.start[keep].min()))[NODE].to_numpy()] = True
    t = pd.DataFrame(
        {
            RANK: n[RANK],
            QUEUE: n[QUEUE],
            NAME: n[NAME],
            CATEGORY: n[CATEGORY],
            "class": node_classes(n),
            START: result.start,
            END: end,
            "on_critical_path": on_path,
        }
    )
    return t[keep].sort_values([RANK, QUEUE, START]).reset_index(drop=True)


def resolve_run(run_dir, select: dict | None = None) -> tuple[list[Path], dict, list[str]]:
    """The export files of one run in `run_dir` (a folder, a file or a list of files), its
    parameter values parsed from Extra-Deep file names, and notes on what was chosen."""
    from extradeep.io.discover import find_exports, parse_name

    paths, problems = find_exports(run_dir)
    if not paths:
        raise (
            InputError(None, "; ".join(problems))
            if problems
            else InputError(run_dir, "no profiles (.sqlite exports or Kineto .json[.gz] traces) found")
        )
    rows = []
    for p in paths:
        try:
            info = parse_name(p.name)
        except InputError:
            info = {}
        rows.append({"path": p, **{k: v for k, v in info.items() if k != "rank"}})
    runs = pd.DataFrame(rows)
    # names without parameters (good.sqlite, rank0.sqlite) say nothing about runs: the folder is
    # the run, and files that cannot be read are skipped later, one line each
    has_params = any(c not in ("path", "app", "rep") for c in runs.columns) or (REP in runs and runs[REP].nunique() > 1)
    keys = [c for c in runs.columns if c != "path"] if has_params else []
    for k, v in (select or {}).items():
        if k not in runs:
            raise InputError(run_dir, f"file names carry no parameter {k!r} to select by")
        runs = runs[runs[k] == v]
    if runs.empty:
        raise InputError(run_dir, f"no exports match {select}")
    notes = []
    if keys:
        groups = runs.groupby(keys, dropna=False, sort=True)
        if groups.ngroups > 1:
            first = next(iter(groups.groups))
            first = first if isinstance(first, tuple) else (first,)
            notes.append(f"{groups.ngroups} runs found; replaying {dict(zip(keys, first))} (choose with select=/--run)")
            runs = groups.get_group(first if len(keys) > 1 else first[0])
    point = {k: runs[k].iloc[0] for k in keys if k not in ("app", "rep") and pd.notna(runs[k].iloc[0])}
    check_one_run(list(runs[PATH]), run_dir)
    return list(runs[PATH]), point, problems + notes


def predict(
    run_dir,
    what_if=(),
    select: dict | None = None,
    gpu_gaps: str = "drop",
    models=None,
    point: dict | None = None,
    progress: bool = False,
    settings=None,
    system=None,
) -> Prediction:
    """Replay one run's traces, compare with the measured step times, and replay each what-if.

    `what_if`: spec strings or WhatIf objects (see `extradeep.predictor.whatif`); each is replayed
    on its own (items joined with ';' in one spec are one scenario; `combine_what_ifs` merges
    several scenarios into one). `models`: PMNF models (a `fit_models` table with columns region and model) for
    `pmnf.PARAM=V` changes; `point`: the run's parameter values (parsed from file names when absent).
    `settings`: the reader's step conventions (ReaderSettings, dict or None), e.g. a
    `train_step_pattern` that makes an annotation's instances the steps to analyse. `system`: a
    preset name, TOML file or System whose links (and layout, where the profiles carry no node
    signal) cost `ranks=P` (default: the profiles' layout, links unknown).
    """
    what_if = [what_if] if isinstance(what_if, (str, WhatIf)) else list(what_if)
    scenarios = [w if isinstance(w, WhatIf) else parse_what_if(w) for w in what_if]
    scenarios = list({w.label: w for w in scenarios}.values())  # one replay per label
    paths, parsed_point, notes = resolve_run(run_dir, select)
    point = dict(parsed_point if point is None else point)
    check_pmnf(scenarios, models, point)
    _progress(progress, f"reading {len(paths)} export(s)")
    trace = load_trace(paths, settings=settings)
    _progress(progress, f"building the dependency graph ({len(trace.ops)} ops)")
    graph = build_graph(trace, gpu_gaps=gpu_gaps)
    warnings = unmatched_patterns(scenarios, graph.nodes)
    try:
        plan = plan_replay(graph)
    except ValueError as exc:  # e.g. collectives that do not match across ranks (a truncated rank)
        raise InputError(run_dir, f"cannot replay the traces: {exc}") from None
    base = replay(graph, plan)
    steps = step_times(graph, base, trace)
    colls = collective_table(graph.nodes, _groups_of(graph))
    comm = comm_context(colls, trace, system)
    notes = notes + layout_notes(scenarios, comm)
    warnings += extrapolation_warnings(scenarios, comm.ranks)
    results, wsteps = {BASELINE: base}, [steps.assign(scenario=BASELINE, predicted=steps[REPLAYED])]
    for i, scenario in enumerate(scenarios):
        _progress(progress, f"what-if {i + 1}/{len(scenarios)}: {scenario.label}")
        res = replay_scenario(graph, plan, scenario, comm, models, point, trace)
        st = step_times(graph, res, trace)
        wsteps.append(steps.assign(scenario=scenario.label, predicted=st[REPLAYED].to_numpy()))
        results[scenario.label] = res
    wsteps = pd.concat(wsteps, ignore_index=True)
    paths_frame, shares = _critical_paths(graph, base, steps[~steps[WARMUP].astype(bool)])
    sums = kernel_sum_baseline(trace.ops, trace.steps)
    launched = _launched_names(graph)
    return Prediction(
        steps=steps,
        summary=_summary(wsteps, sums),
        critical_path=paths_frame,
        breakdown=shares,
        overheads=overhead_table(trace.ops, trace.ranges, launched, trace.steps),
        kernel_sums=sums,
        collectives=colls,
        what_if_steps=wsteps,
        files=trace.files,
        notes=notes + trace_notes(trace, graph),
        warnings=warnings,
        graph=graph,
        results=results,
        owners=owner_table(path_owners(graph, paths_frame, trace.ranges), float(shares["span"].sum())),
    )


def _progress(on: bool, text: str) -> None:
    if on:
        print(f"extradeep predict: {text}", file=sys.stderr, flush=True)


def _groups_of(graph: OpGraph) -> pd.DataFrame:
    n = graph.nodes
    members = n[(n[COLL] >= 0) & (n[ROLE] == "op")]
    return pd.DataFrame(
        {
            NODE: members.index.to_numpy(),
            GROUP: members[COLL].to_numpy(),
            RANK: members[RANK].to_numpy(),
            NAME: members[NAME].to_numpy(),
        }
    )


def trace_notes(trace: RunTrace, graph: OpGraph) -> list[str]:
    """What the user should know about how the graph was built."""
    notes = list(trace.problems)
    if trace.steps.empty:
        notes.append("no NVTX step marks: comparing whole-trace spans per rank instead of step times")
    for (rank, worker), main in sorted(graph.info.get("merged_threads", {}).items()):
        notes.append(f"rank {rank}: the autograd thread {worker} continues the order of {main} (backward inside it)")
    if trace.records.empty and (trace.syncs[SYNC_TYPE] == 2).any():
        notes.append(
            "CUDA event records missing (CUPTI_ACTIVITY_KIND_CUDA_EVENT empty): cross-stream waits inferred from timing"
        )
    if (trace.files[OFFSET_NS] != 0).any():
        notes.append(
            "clocks aligned per file from collective end times: offsets (ns) "
            + ", ".join(f"{Path(p).name}={o}" for p, o in zip(trace.files[PATH], trace.files[OFFSET_NS]))
        )
    return notes


def step_times(graph: OpGraph, result: ReplayResult, trace: RunTrace) -> pd.DataFrame:
    """Measured and replayed time of every step on every rank (whole-trace span without marks)."""
    n = graph.nodes
    if trace.steps.empty:
        ops = n[n[ROLE].isin(["op", "wake"])]
        end = displayed_end(graph, result)
        g = pd.DataFrame(
            {
                RANK: ops[RANK],
                "ms": ops[START],
                "me": ops[END],
                "rs": result.start[ops.index],
                "re": end[ops.index],
            }
        ).groupby(RANK)
        out = pd.DataFrame({MEASURED: g["me"].max() - g["ms"].min(), REPLAYED: g["re"].max() - g["rs"].min()})
        out = out.reset_index().assign(step_id=-1, warmup=False, epoch=-1, phase="span", step=-1)
    else:
        marks = n[n[ROLE] == "marker"]
        out = step_spans(graph, {MEASURED: marks[START].to_numpy(), REPLAYED: result.start[marks.index]})
        out = out.merge(trace.steps[[STEP_ID, RANK, WARMUP, EPOCH, PHASE, STEP]], on=STEP_ID)
    out["error"] = (out[REPLAYED] - out[MEASURED]) / out[MEASURED]
    cols = ["rank", "step_id", "warmup", "epoch", "phase", "step", "measured", "replayed", "error"]
    return out[cols].sort_values([WARMUP, EPOCH, PHASE, STEP, RANK]).reset_index(drop=True)


def step_spans(graph: OpGraph, starts: dict) -> pd.DataFrame:
    """Per step mark pair: ``step_id`` and, per entry of ``starts`` (name -> the step marker nodes'
    start times, in the order of the graph's marker rows), the step's end mark minus its start mark.
    One pivot for every entry: pandas reduces each column on its own."""
    marks = graph.nodes[graph.nodes[ROLE] == "marker"]
    names = list(starts)
    frame = pd.DataFrame({STEP_ID: marks[STEP].to_numpy(), "edge": marks[NAME].to_numpy(), **starts})
    wide = frame.pivot_table(index=STEP_ID, columns="edge", values=names)
    return pd.DataFrame({c: wide[(c, "step_end")] - wide[(c, "step_start")] for c in names}).reset_index()


def _summary(wsteps: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """Median over steady-state steps of the slowest rank's time, per scenario and phase."""
    wsteps = wsteps[~wsteps[WARMUP].astype(bool)]
    key = ["scenario", "phase", "epoch", "step"]
    per_step = (
        wsteps.groupby(key, sort=False)
        .agg(measured=(MEASURED, "max"), replayed=(REPLAYED, "max"), predicted=(PREDICTED, "max"))
        .reset_index()
    )
    out = (
        per_step.groupby(["scenario", PHASE], sort=False)
        .agg(
            steps=(STEP, "size"),
            measured=(MEASURED, "median"),
            replayed=(REPLAYED, "median"),
            predicted=(PREDICTED, "median"),
        )
        .reset_index()
    )
    base = wsteps[wsteps["scenario"] == BASELINE]
    err = base.groupby(PHASE)["error"].agg(
        median_abs_error=lambda e: float(np.median(np.abs(e))), max_abs_error=lambda e: float(np.max(np.abs(e)))
    )
    out = out.merge(err, left_on=PHASE, right_index=True, how="left")
    if len(sums):
        step_phase = base.drop_duplicates(STEP_ID).set_index(STEP_ID)[PHASE]
        per = sums.groupby(STEP_ID)["kernel_time"].max()
        kern = per.groupby(step_phase.reindex(per.index).to_numpy()).median()
        out["kernel_sum_baseline"] = out[PHASE].map(kern)
    out["speedup"] = out[REPLAYED] / out[PREDICTED]
    return out


def _critical_paths(graph: OpGraph, result: ReplayResult, steps: pd.DataFrame):
    """Critical path and breakdown of each step, from the slowest rank's step start to its end
    marker or, where the GPU finishes the step's work later, to that GPU op's end."""
    n = graph.nodes
    paths, rows = [], []
    if (steps[STEP_ID] < 0).all():
        keep = n[ROLE].isin(["op", "wake"]).to_numpy()
        sink = int(np.argmax(np.where(keep, result.end, -np.inf)))
        windows = [(-1, sink, float(result.start[keep].min()))]
    else:
        mk = n[n[ROLE] == "marker"]
        ends = mk[mk[NAME] == "step_end"]
        starts = mk[mk[NAME] == "step_start"].reset_index(names=NODE).set_index(STEP)
        measured = pd.DataFrame(
            {RANK: starts[RANK], LO: starts[START], HI: ends.set_index(STEP)[START].reindex(starts.index)}
        )
        sink_of = step_sinks(graph, result)
        windows = []
        for _, grp in steps.groupby([EPOCH, PHASE, STEP]):
            ids = grp[STEP_ID].to_numpy()
            e = ends[ends[STEP].isin(ids)]
            first = int(e.index[np.argmax(result.start[e.index.to_numpy()])])
            step_id = int(mk.at[first, STEP])
            lo = float(result.start[starts.at[step_id, NODE]])
            windows.append((step_id, sink_of(e, measured.loc[ids]), lo))
    for step_id, sink, lo in windows:
        path = critical_path(graph, result, sink, lo).assign(step_id=step_id)
        paths.append(path)
        rows.append({"step_id": step_id, "span": float(result.end[sink] - lo), **breakdown(path)})
    table = pd.DataFrame(rows)
    for c in CLASSES:
        table[c + "_share"] = table[c] / table["span"]
    return pd.concat(paths, ignore_index=True), table


def _launched_names(graph: OpGraph) -> dict:
    from extradeep.predictor.graph import EDGE_KINDS

    launch = graph.edge_kind == EDGE_KINDS.index("launch")
    names = graph.nodes[NAME].to_numpy()
    return dict(zip(graph.src[launch].tolist(), names[graph.dst[launch]].tolist()))
