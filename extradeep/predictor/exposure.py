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

import numpy as np
import pandas as pd

# scale factors of the pure collective durations; the last two give the fully exposed slope P
FACTORS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0,
           12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0)


def exposure_curve(paths, factors=FACTORS, phase: str = "train", settings=None) -> pd.DataFrame:
    """Replay one run (its per-rank exports ``paths``) with all pure collective durations scaled
    by each factor k: columns k, step (median over steady-state ``phase`` steps of the slowest
    rank's replayed step time, s) and hidden (share of the scaled pure communication the step
    hides). Empty when the run has no collectives or no step marks of ``phase`` (any phase
    when it has none of ``phase``). ``settings``: the reader's step conventions (as for ingest).
    Raises InputError or ValueError when the run cannot be replayed."""
    from extradeep.predictor.api import step_times
    from extradeep.predictor.graph import build_graph
    from extradeep.predictor.replay import plan_replay, replay
    from extradeep.predictor.trace import load_trace

    trace = load_trace(paths, jobs=1, settings=settings)
    graph = build_graph(trace)
    collective = (graph.nodes["role"] == "sync").to_numpy()
    if not collective.any() or trace.steps.empty:
        return pd.DataFrame(columns=["k", "step", "hidden"])
    plan = plan_replay(graph)
    steps = []
    for k in factors:
        dur = graph.dur.copy()
        dur[collective] *= k
        times = step_times(graph, replay(graph, plan, dur=dur), trace)
        steps.append(_median_step(times, phase))
    return curve_frame(np.asarray(factors, float), np.asarray(steps, float))


def _median_step(times: pd.DataFrame, phase: str) -> float:
    steady = times[~times["warmup"].astype(bool)]
    if (steady["phase"] == phase).any():
        steady = steady[steady["phase"] == phase]
    return float(steady.groupby(["epoch", "phase", "step"])["replayed"].max().median())


def curve_frame(k: np.ndarray, step: np.ndarray) -> pd.DataFrame:
    """The curve's frame with the hidden share, from step times at factors k (k = 0 among them)."""
    slope = (step[-1] - step[-2]) / (k[-1] - k[-2])
    exposed = step - step[k == 0][0]
    hidden = np.ones_like(step)
    if slope > 0:
        hidden = np.where(k > 0, 1.0 - exposed / np.where(k > 0, k * slope, 1.0), np.nan)
        hidden = pd.Series(hidden).bfill().fillna(1.0).to_numpy()  # k = 0 hides what the smallest k hides
    return pd.DataFrame({"k": k, "step": step, "hidden": np.clip(hidden, 0.0, 1.0)})
