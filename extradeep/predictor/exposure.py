"""How much of a run's communication its step can hide, as communication grows: the exposure curve.

Data-parallel training hides collectives behind computation (DDP's gradient all-reduce behind the
backward pass) until they outgrow the window the computation leaves them; from then on every extra
millisecond of communication lengthens the step. Step times measured at a few small scales cannot
show where that window ends, but one run's traces can: its dependency graph knows which
computation each collective overlaps and what waits for it. Replaying the run with every
collective's pure duration scaled by k gives the step time T(k); its slope for large k is the
communication on the step's path when none of it is hidden (P), so

    hidden(k) = 1 - (T(k) - T(0)) / (k * P)

is the share of the (scaled) pure communication that the step still hides. The empirical step
composition (:mod:`extradeep.analysis.overlap`) uses it to let its overlap run out where the replay
says the window fills.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import CURVE_STEP, EPOCH, HIDDEN_SHARE, PATH, PHASE, REP, ROLE, STEP, WARMUP, K

# scale factors of the pure collective durations; the last two give the fully exposed slope P
FACTORS = (
    0.0,
    0.25,
    0.5,
    0.75,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    5.0,
    6.0,
    7.0,
    8.0,
    10.0,
    12.0,
    16.0,
    24.0,
    32.0,
    48.0,
    64.0,
    96.0,
    128.0,
)


def exposure_curve(paths, factors=FACTORS, phase: str = "train", settings=None, frames=None) -> pd.DataFrame:
    """Replay one run (its per-rank exports ``paths``) with all pure collective durations scaled
    by each factor k: columns k, step (median over steady-state ``phase`` steps of the slowest
    rank's replayed step time, s) and hidden (share of the scaled pure communication the step
    hides). Empty when the run has no collectives or no step marks of ``phase`` (any phase
    when it has none of ``phase``). ``settings``: the reader's step conventions (as for ingest).
    ``frames``: {path: replay frames} the per-file pass already read (those files are not opened
    again). Raises InputError or ValueError when the run cannot be replayed."""
    from extradeep.predictor.graph import build_graph
    from extradeep.predictor.replay import plan_replay, replay
    from extradeep.predictor.trace import load_trace

    trace = load_trace(paths, jobs=1, settings=settings, frames=frames)
    graph = build_graph(trace)
    collective = (graph.nodes[ROLE] == "sync").to_numpy()
    if not collective.any() or trace.steps.empty:
        return pd.DataFrame(columns=[K, CURVE_STEP, HIDDEN_SHARE])
    plan = plan_replay(graph)
    starts = []
    for k in factors:
        dur = graph.dur.copy()
        dur[collective] *= k
        starts.append(replay(graph, plan, dur=dur).start)
    return curve_frame(np.asarray(factors, float), _median_steps(graph, starts, trace, phase))


def _median_steps(graph, starts: list, trace, phase: str) -> np.ndarray:
    """Per replay (its node starts), `_median_step` of its step times: the step marks' spans of
    every replay in one `step_spans` call, a column each (the same numbers as one step_times call
    per replay, which cost 20 ms each in pandas)."""
    from extradeep.columns import RANK, STEP_ID
    from extradeep.predictor.api import step_spans

    marks = graph.nodes.index[graph.nodes[ROLE] == "marker"]
    columns = [f"r{i}" for i in range(len(starts))]
    replayed = step_spans(graph, {c: start[marks] for c, start in zip(columns, starts)})
    times = replayed.merge(trace.steps[[STEP_ID, RANK, WARMUP, EPOCH, PHASE, STEP]], on=STEP_ID)
    return _median_step(times, phase, columns).to_numpy(float)


def _median_step(times: pd.DataFrame, phase: str, columns: list) -> pd.Series:
    """Per column, the median over steady-state ``phase`` steps of the slowest rank's time."""
    steady = times[~times[WARMUP].astype(bool)]
    if (steady[PHASE] == phase).any():
        steady = steady[steady[PHASE] == phase]
    return steady.groupby([EPOCH, PHASE, STEP])[columns].max().median()


def curve_frame(k: np.ndarray, step: np.ndarray) -> pd.DataFrame:
    """The curve's frame with the hidden share, from step times at communication factors k (k = 0 among them)."""
    slope = (step[-1] - step[-2]) / (k[-1] - k[-2])
    exposed = step - step[k == 0][0]
    hidden = np.ones_like(step)
    if slope > 0:
        hidden = np.where(k > 0, 1.0 - exposed / np.where(k > 0, k * slope, 1.0), np.nan)
        hidden = pd.Series(hidden).bfill().fillna(1.0).to_numpy()  # k = 0 hides what the smallest k hides
    return pd.DataFrame({K: k, CURVE_STEP: step, HIDDEN_SHARE: np.clip(hidden, 0.0, 1.0)})


# --- the pipeline step: exposure curves for an Experiment's largest points ----------------------

TRACED_POINTS = 3  # the largest points get an exposure curve: evaluation often holds out the top one or two


def add_exposure_curves(
    experiment, *, cache_dir=None, use_cache: bool = True, progress=None, jobs=None, client=None, frames=None
):
    """The pipeline step after aggregation: replay the runs at the TRACED_POINTS largest points of
    `experiment` (at each, the repetition with the most ranks) and keep their exposure curves in
    `experiment.settings.exposure` as {"point", "rep", "k", "hidden"}; a run that cannot be replayed
    becomes a note in `settings.notes`. Curves are cached like the per-file results; the replays
    not cached run side by side (`jobs` local processes, or the Dask cluster of `client`). `frames`:
    {path: replay frames} the per-file pass read (`extradeep.aggregate.ingest.read_runs` with
    `replay_paths(...)`); only the files without them are opened here. Returns the experiment
    (changed in place)."""
    from extradeep.io.cache import default_cache_dir, read_cache, store_cache
    from extradeep.io.execute import WorkerLost, run_tasks
    from extradeep.io.settings import ReaderSettings

    cache = None if not use_cache else Path(cache_dir) if cache_dir else default_cache_dir()
    settings = ReaderSettings.from_any(experiment.settings.reader)
    traced = traced_runs(experiment.provenance, list(experiment.params))
    keys = [_curve_key(chosen, settings) for _, chosen, _ in traced]
    outcomes = [read_cache(cache, key) if cache is not None else None for key in keys]
    todo = [i for i, outcome in enumerate(outcomes) if outcome is None]
    if todo and progress is None:
        print(f"replaying the traces of {len(todo)} run(s) to see how much communication a step hides", file=sys.stderr)
    frames = frames or {}
    calls = []
    for i in todo:
        paths = list(traced[i][1][PATH])
        calls.append((paths, settings, keys[i], cache, {p: frames[p] for p in paths if p in frames}))
    done, worker_notes = run_tasks(replay_and_store, calls, jobs=jobs, client=client)
    for i, outcome in zip(todo, done):
        if isinstance(outcome, WorkerLost):
            outcome = {"problem": str(outcome), "curve": None}
        elif client is not None:  # the workers' cache may not be this machine's
            store_cache(cache, keys[i], outcome)
        outcomes[i] = outcome
    curves, notes = [], []
    for (run, _, where), outcome in zip(traced, outcomes):
        if outcome["problem"] is not None:
            notes.append(f"the traces of {where} could not be replayed ({outcome['problem']})")
        elif outcome["curve"]:
            params = list(experiment.params)
            curves.append({"point": {p: _plain(run[p]) for p in params}, "rep": _plain(run[REP]), **outcome["curve"]})
    experiment.settings.exposure = curves
    experiment.settings.notes = list(experiment.settings.notes) + notes + worker_notes
    return experiment


def replay_paths(runs: pd.DataFrame, params: list[str]) -> list[str]:
    """The files whose replay frames the exposure step will need, chosen from the runs found before
    reading (path, rank, rep, <params>), so the per-file pass reads them with the step sums."""
    return [path for _, chosen, _ in traced_runs(runs, params) for path in chosen[PATH]]


def traced_runs(runs: pd.DataFrame, params: list[str]) -> list[tuple]:
    """(run row, its exports, "where" words) at each of the TRACED_POINTS largest points: the
    repetition with the most ranks. `runs`: one row per file (an Experiment's provenance, or the
    runs found before reading)."""
    files = runs.groupby([*params, REP], sort=True).size().reset_index(name="ranks_read")
    # without parameters there is one configuration (pandas 2 yields no row of a frame without columns)
    points = list(files[params].drop_duplicates().tail(TRACED_POINTS).itertuples(index=False)) if params else [()]
    traced = []
    for values in points:
        at = files[(files[params] == list(values)).all(axis=1)]
        run = at.sort_values(["ranks_read", REP], ascending=[False, True]).iloc[0]
        chosen = runs[(runs[params] == run[params]).all(axis=1) & (runs[REP] == run[REP])]
        where = ", ".join(f"{k}={_plain(run[k])}" for k in params) or "the one configuration"
        where += f", repetition {_plain(run[REP])}"
        traced.append((run, chosen, where))
    return traced


def _curve_key(chosen: pd.DataFrame, settings) -> str:
    from extradeep.io.cache import reader_version

    return hashlib.sha256(
        json.dumps(
            ["exposure", predictor_version(), reader_version(), settings.key(), sorted(map(str, chosen["sha256"]))]
        ).encode()
    ).hexdigest()


def replay_and_store(paths: list[str], settings, key: str, cache_dir, frames=None) -> dict:
    """The task a worker runs: one run's exposure curve as {"problem", "curve"}, cached when it worked."""
    from extradeep.io.cache import store_cache

    try:
        curve = exposure_curve(paths, settings=settings, frames=frames)
    except Exception as exc:  # the replay only refines the step model: a failure must not stop modeling
        return {"problem": f"{type(exc).__name__}: {exc}", "curve": None}
    outcome = {"problem": None, "curve": None if curve.empty else curve[[K, HIDDEN_SHARE]].to_dict("list")}
    store_cache(cache_dir, key, outcome)
    return outcome


@functools.lru_cache(maxsize=1)
def predictor_version() -> str:
    """A digest of the replay's sources on top of the reader's version, so a predictor change
    invalidates cached curves."""
    from extradeep.io.cache import reader_version, sources_digest

    return sources_digest(reader_version(), "predictor")


def _plain(value):
    return value.item() if hasattr(value, "item") else value
