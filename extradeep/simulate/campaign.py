"""Simulated profiling campaigns: follow a measurement strategy until the prediction is precise.

Validation of the measurement advisor (docs/performance.md, "Measurement advisor"). A campaign
starts from an initial set of runs, then repeatedly asks its strategy for the next run, measures
it by simulating the run and reading its exports (the whole pipeline), and stops when the 95%
interval of the step-time model at the target is narrower than a goal. Three strategies:

* ``grid``: the default grid (ranks 2, 4, 6, 8, 10, two repetitions), extended by the next grid
  value and then by one more repetition of every point;
* ``advisor``: :class:`~extradeep.analysis.advisor.MeasurementAdvisor`, one proposal at a time;
* ``gp``: the candidate of largest Gaussian-process posterior variance per cost (the Extra-P
  measurement-point strategy, in log-log space).

All three start from the same cheap set (the default grid) and aim at 4x its largest configuration,
within an allocation of `max_ranks`.

A node boundary is either simulated (`topology`: the simulator's cluster presets, collectives over
NVLink within a node and the network across nodes) or emulated: runs with more ranks than
`boundary` use `beyond_bandwidth_scale` for the NCCL bandwidth (a slower inter-node link).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from extradeep.columns import METRIC, PHASE, PREDICTED, RANKS, REGION, REP, VALUE

GRID_START = (2, 4, 6, 8, 10)
GRID_STEP = 2


@dataclass
class Scenario:
    """A simulated application and cluster: compute/network scales, node boundary, allocation."""

    name: str
    max_ranks: int = 32
    gpus_per_node: int = 8
    kernel_scale: dict = field(default_factory=dict)
    bandwidth_scale: float = 1.0
    boundary: int | None = None  # emulated node boundary: slower network beyond it
    beyond_bandwidth_scale: float = 1.0
    topology: str | None = None  # a simulator topology preset (real node boundaries), e.g. dgx-8-nvswitch
    seed: int = 0

    @property
    def target(self) -> int:
        """4x the largest configuration of the cheap initial set."""
        return 4 * max(GRID_START)


class SimulatedProfiler:
    """Measures the training step time of one run (ranks, repetition) through simulate + read; cached."""

    def __init__(self, scenario: Scenario, workdir=None, run_seconds: float = 300.0):
        self.scenario = scenario
        self.run_seconds = run_seconds
        self._own = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="extradeep-campaign-"))
        self._cache: dict[tuple[int, int], float] = {}

    def _simulate(self, outdir: Path, ranks: int, seed: int, **kw):
        from extradeep.simulate.run import simulate

        s = self.scenario
        beyond = s.boundary is not None and ranks > s.boundary
        return simulate(
            outdir,
            params={"ranks": [ranks]},
            repetitions=1,
            train_steps=4,
            val_steps=1,
            seed=seed,
            kernel_scale=s.kernel_scale or None,
            nccl_bandwidth_scale=s.beyond_bandwidth_scale if beyond else s.bandwidth_scale,
            topology=s.topology,
            **kw,
        )

    def measure(self, ranks: int, rep: int) -> float:
        key = (int(ranks), int(rep))
        if key not in self._cache:
            from extradeep.analysis.core import measured_values
            from extradeep.pipeline import load_experiment

            outdir = self.workdir / f"p{ranks}.r{rep}"
            seed = [self.scenario.seed, int(ranks), int(rep)]
            self._simulate(
                outdir, int(ranks), int(np.random.SeedSequence(seed).generate_state(1)[0]), truth_replicates=0
            )
            experiment = load_experiment(
                outdir, params=["ranks"], progress=False, use_cache=False, replay=False, jobs=1
            )
            values = measured_values(experiment)
            self._cache[key] = float(values.loc[values["quantity"] == "epoch time", VALUE].iloc[0])
            shutil.rmtree(outdir, ignore_errors=True)
        return self._cache[key]

    def truth(self, ranks: int) -> float:
        """The step time a measurement at `ranks` is expected to give (median of 8 noisy runs)."""
        outdir = self.workdir / f"truth.p{ranks}"
        sim = self._simulate(outdir, int(ranks), self.scenario.seed + 10_000, truth_replicates=8)
        shutil.rmtree(outdir, ignore_errors=True)
        rows = sim.truth["points"][0]["per_step"]
        return next(r["expected"] for r in rows if r[REGION] == "step" and r[PHASE] == "train" and r[METRIC] == "time")

    def close(self) -> None:
        if self._own:
            shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass
class CampaignResult:
    """One strategy's campaign: what it ran, what it cost, how precise and how accurate it ended."""

    strategy: str
    runs: pd.DataFrame  # ranks, rep, value, in the order measured
    gpu_hours: float
    interval_pct: float  # relative half-width of the 95% interval at the target, at the end
    error_pct: float  # |prediction - truth| / truth at the target, at the end
    reached: bool
    steps: int


def run_campaign(
    strategy: str,
    scenario: Scenario,
    profiler: SimulatedProfiler,
    truth: float,
    goal_pct: float = 5.0,
    max_gpu_hours: float = 100.0,
    max_steps: int = 20,
) -> CampaignResult:
    """Follow `strategy` ("grid", "advisor", "gp") until the interval at 4x scale is below `goal_pct`."""
    from extradeep.analysis.advisor import MeasurementAdvisor

    def advisor():
        return MeasurementAdvisor(
            scenario.target, scenario.max_ranks, scenario.gpus_per_node, run_seconds=profiler.run_seconds
        )

    runs = [(r, k) for r in GRID_START for k in (1, 2)]  # the cheap initial set, the same for all
    steps, previous = 0, np.nan
    while True:
        frame = pd.DataFrame([(r, k, profiler.measure(r, k)) for r, k in runs], columns=[RANKS, REP, VALUE])
        fitted = advisor().fit(frame)
        current = fitted.current_.iloc[-1]
        hours = _gpu_hours(frame[RANKS], profiler.run_seconds)
        # Narrow enough, and the prediction held still since the last run: an interval alone can be
        # overconfident when a new hypothesis wins (a constant fitted to few small points).
        moved = 100.0 * abs(current[PREDICTED] - previous) / current[PREDICTED]
        done = bool(current["interval_pct"] <= goal_pct and moved <= goal_pct)
        if done or steps >= max_steps or hours >= max_gpu_hours:
            break
        previous = current[PREDICTED]
        runs += _next_runs(strategy, fitted, frame, scenario)
        steps += 1
    error = 100.0 * abs(current[PREDICTED] - truth) / truth if np.isfinite(current[PREDICTED]) else np.nan
    return CampaignResult(strategy, frame, hours, float(current["interval_pct"]), float(error), done, steps)


def _gpu_hours(ranks, run_seconds: float) -> float:
    return float(np.sum(np.asarray(ranks, float)) * run_seconds / 3600.0)


def _next_runs(strategy: str, fitted, frame: pd.DataFrame, scenario: Scenario) -> list[tuple[int, int]]:
    reps = frame.groupby(RANKS)[REP].max()
    if strategy == "advisor":
        if fitted.model_ is None:
            plan = fitted.propose()
        else:
            plan = fitted.propose(1)
        return [(int(r.ranks), int(r.first_rep) + k) for r in plan.itertuples() for k in range(int(r.reps))]
    if strategy == "grid":
        top = int(reps.index.max())
        if top + GRID_STEP <= scenario.max_ranks:
            return [(top + GRID_STEP, 1), (top + GRID_STEP, 2)]
        return [(int(r), int(k) + 1) for r, k in reps.items()]
    if strategy == "gp":
        x = gp_next(frame, fitted.candidates_, fitted.run_cost)
        return [(x, int(reps[x]) + 1)] if x in reps.index else [(x, 1), (x, 2)]
    raise ValueError(f"unknown strategy {strategy!r}")


def gp_next(frame: pd.DataFrame, candidates, run_cost) -> int:
    """The candidate of largest GP posterior variance per cost (log2 ranks -> log value, RBF + noise)."""
    z = np.log2(frame[RANKS].to_numpy(float))
    y = np.log(frame[VALUE].to_numpy(float))
    y = (y - y.mean()) / (y.std() or 1.0)
    theta = _gp_hyperparameters(z, y)
    cand = np.asarray(candidates, float)
    var = _gp_posterior_variance(z, np.log2(cand), theta)
    measured = set(frame[RANKS].astype(int))
    n = np.array([1 if int(c) in measured else 2 for c in cand])  # a new configuration gets two repetitions
    cost = run_cost(cand)[1] * n
    return int(cand[np.argmax(var / cost)])


def _kernel(a, b, length, scale):
    return scale * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / length**2)


def _gp_hyperparameters(z, y) -> np.ndarray:
    """Length scale, signal and noise variance by maximal marginal likelihood (log parameters)."""

    def nll(log_theta):
        length, scale, noise = np.exp(log_theta)
        K = _kernel(z, z, length, scale) + (noise + 1e-9) * np.eye(len(z))
        try:
            L = np.linalg.cholesky(K)
        except np.linalg.LinAlgError:
            return 1e10
        alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
        return 0.5 * y @ alpha + np.log(np.diag(L)).sum()

    best = min(
        (
            minimize(nll, start, method="L-BFGS-B", bounds=[(-3, 3), (-5, 3), (-9, 1)])
            for start in ([0.0, 0.0, -4.0], [1.0, 0.0, -2.0])
        ),
        key=lambda r: r.fun,
    )
    return np.exp(best.x)


def _gp_posterior_variance(z, zs, theta) -> np.ndarray:
    length, scale, noise = theta
    K = _kernel(z, z, length, scale) + (noise + 1e-9) * np.eye(len(z))
    Ks = _kernel(z, zs, length, scale)
    solved = np.linalg.solve(K, Ks)
    return np.maximum(scale - np.einsum("ij,ij->j", Ks, solved), 0.0)


def compare(scenario: Scenario, goal_pct: float = 5.0, strategies=("grid", "advisor", "gp"), **kw) -> pd.DataFrame:
    """Run every strategy on the same simulated runs; one row per strategy."""
    profiler = SimulatedProfiler(scenario)
    try:
        truth = profiler.truth(scenario.target)
        rows = []
        for name in strategies:
            result = run_campaign(name, scenario, profiler, truth, goal_pct=goal_pct, **kw)
            rows.append(
                {
                    "scenario": scenario.name,
                    "strategy": name,
                    "gpu_hours": result.gpu_hours,
                    "runs": len(result.runs),
                    "configurations": result.runs[RANKS].nunique(),
                    "largest": int(result.runs[RANKS].max()),
                    "interval_pct": result.interval_pct,
                    "error_pct": result.error_pct,
                    "reached": result.reached,
                    "steps": result.steps,
                }
            )
        return pd.DataFrame(rows)
    finally:
        profiler.close()
