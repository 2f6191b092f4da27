"""What to profile for the layout model: the planned runs stay within the budget, and a model
calibrated on them predicts the simulator's truth at 64-512 GPUs at least as well as one calibrated
on the usual data-parallel sweep of the same cost."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.columns import GPUS, RECOMPUTE, STEP_TIME
from extradeep.errors import InputError
from extradeep.layouts.design import naive_runs, plan_layout_runs
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.workload import TransformerShape
from extradeep.simulate.gpt.config import RECOMPUTE_MODES, GPTModel
from extradeep.simulate.gpt.frames import truth_frame, truth_parts

MODEL = GPTModel(layers=8, hidden=1024, heads=16, seq=1024, vocab=51200, name="gpt-medium")
SHAPE = TransformerShape(layers=8, hidden=1024, heads=16, seq_len=1024, vocab=51200)
TARGETS = [
    "tp4.pp2.dp8.mbs1.nmb8",
    "tp2.pp4.dp8.mbs1.nmb16",
    "tp1.pp1.dp64.mbs2.nmb2",
    "tp8.pp1.dp32.mbs1.nmb4",
    "tp2.pp2.dp128.mbs1.nmb4",
]


def label(r) -> str:
    return (
        f"tp{r.tp}.pp{r.pp}.dp{r.dp}.mbs{r.micro_batch}.nmb{r.micro_batches}.zero{r.zero}"
        f".rc{RECOMPUTE_MODES.index(getattr(r, RECOMPUTE))}"
    )


def held_out_error(runs, truth) -> float:
    """Median relative error at the targets of a layout model calibrated on the runs' simulated profiles."""
    observed = truth_frame([label(r) for r in runs.itertuples()], MODEL)
    model = LayoutModel(interval=None).fit(None, truth_parts(observed))
    return float(np.median(np.abs(model.predict(truth)[STEP_TIME] / truth[STEP_TIME] - 1)))


@pytest.fixture(scope="module")
def truth():
    return truth_frame(TARGETS, MODEL)


def test_planned_runs_beat_the_data_parallel_sweep_of_the_same_cost(truth):
    naive = naive_runs(SHAPE, 16, budget_gpu_hours=2.6)
    budget = float(naive["gpu_hours"].sum())
    assert list(naive[GPUS]) == [1, 2, 4, 8, 16]
    targeted = plan_layout_runs(SHAPE, 16, budget_gpu_hours=budget, targets=truth)
    spread = plan_layout_runs(SHAPE, 16, budget_gpu_hours=budget)
    for plan in (targeted, spread):
        assert plan["gpu_hours"].sum() <= budget + 1e-9 and (plan[GPUS] <= 16).all()
        assert (np.diff(plan["cumulative_gpu_hours"]) > 0).all()
    naive_error = held_out_error(naive, truth)
    assert held_out_error(targeted, truth) <= naive_error
    assert held_out_error(spread, truth) <= naive_error


def test_a_plan_needs_a_budget_or_a_count():
    with pytest.raises(InputError, match="budget"):
        plan_layout_runs(SHAPE, 16)
    runs = plan_layout_runs(SHAPE, 4, runs=3)
    assert len(runs) == 3 and (runs[GPUS] <= 4).all()
