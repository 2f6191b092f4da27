"""Fixtures for analysis tests: a runtime law with a known formula that stands in for a fitted Model."""

import numpy as np
import pandas as pd
import pytest


class LawModel:
    """A runtime law with a known formula, standing in for a fitted Model (same interface)."""

    def __init__(self, law, growth="O(1)", key=0.0, width=0.1):
        self.law, self._growth, self._key, self.width, self.smape = law, growth, key, width, 0.0

    def predict(self, X):
        return self.law(np.asarray(X, dtype=float))

    def interval(self, X, level=0.95):
        y = self.predict(X)
        return y * (1 - self.width), y * (1 + self.width)

    def formula(self):
        return self._growth

    def growth(self):
        return self._growth

    def growth_key(self):
        return self._key


@pytest.fixture
def law():
    """The LawModel class: law(lambda p: 1000 / p) behaves like a fitted runtime model."""
    return LawModel


# Per-step truth of a small synthetic application (seconds), as functions of the ranks p.
TRUTH = {
    ("gemm", "kernel", "computation"): {"train": lambda p: 0.020 + 0 * p, "val": lambda p: 0.008 + 0 * p},
    ("ncclAllReduce", "kernel", "communication"): {"train": lambda p: 4e-4 * p * np.log2(p)},
    ("[CUDA memcpy HtoD]", "memcpy", "memory"): {"train": lambda p: 0.002 + 0 * p, "val": lambda p: 0.002 + 0 * p},
    ("cudaLaunchKernel", "cuda_api", "cuda_api"): {"train": lambda p: 0.001 + 0 * p},
}
IDLE = 0.003  # seconds of each step with no GPU activity


def truth_step(p, phase):
    """Expected NVTX step time: GPU work in sequence plus the idle gap."""
    gpu = sum(laws[phase](p) for (r, k, c), laws in TRUTH.items() if phase in laws and c != "cuda_api")
    return gpu + IDLE


def synthetic_step_sums(ranks_list, reps=2, noise=0.01, seed=0):
    """Reader-format step sums (one row per file, region, phase, step) drawn from TRUTH."""
    rng = np.random.default_rng(seed)
    rows, file_id = [], 0
    for p in ranks_list:
        for rep in range(1, reps + 1):
            for rank in range(p):
                file_id += 1
                for phase, n_steps in (("train", 4), ("val", 2)):
                    for step in range(n_steps):
                        for (region, kind, category), laws in TRUTH.items():
                            if phase in laws:
                                value = laws[phase](p) * rng.lognormal(0, noise)
                                rows.append((file_id, rank, rep, p, region, kind, category, phase, step, value))
                        rows.append(
                            (
                                file_id,
                                rank,
                                rep,
                                p,
                                "step",
                                "step",
                                "step",
                                phase,
                                step,
                                truth_step(p, phase) * rng.lognormal(0, noise),
                            )
                        )
    frame = pd.DataFrame(
        rows, columns=["file", "rank", "rep", "ranks", "region", "kind", "category", "phase", "step", "value"]
    )
    return frame.assign(metric="time", epoch=1)


def synthetic_experiment(ranks_list, dataset=None, **kw):
    from extradeep.aggregate.experiment import Experiment, dataset_dict
    from extradeep.aggregate.medians import aggregate

    values, points = aggregate(synthetic_step_sums(ranks_list, **kw), ["ranks"], min_points=5)
    provenance = pd.DataFrame({"path": [f"/x/app.p{p}.r1.mpi0.sqlite" for p in ranks_list], "ranks": ranks_list})
    settings = {"min_points": 5, "fixed_params": {}, "dataset": dataset_dict(dataset), "notes": []}
    return Experiment(["ranks"], values, points, provenance, settings, [])


@pytest.fixture(scope="session")
def synthetic():
    """(experiment factory, per-step truth function, dataset) of the synthetic application."""
    from extradeep.aggregate.experiment import Dataset

    dataset = Dataset(train_samples=51200, val_samples=10240, batch_per_rank=64)
    return synthetic_experiment, truth_step, dataset
