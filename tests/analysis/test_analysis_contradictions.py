"""Numbers that contradict each other are caught and explained (issue 17, item 9): a part of the
epoch time larger than the epoch time, or parts plus idle far beyond it."""

from __future__ import annotations

import pytest

from extradeep import load_experiment
from extradeep.analysis.core import analyse, contradiction_notes
from extradeep.simulate import simulate

SMALL = {"repetitions": 1, "train_steps": 2, "val_steps": 1, "truth_replicates": 0, "progress": False}


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    root = tmp_path_factory.mktemp("contradictions")
    simulate(root / "runs", params={"ranks": [1, 2, 3, 4, 5]}, **SMALL)
    return analyse(load_experiment(root / "runs", cache_dir=root / "cache", progress=False))


def test_consistent_simulated_parts_get_no_note(analysis):
    assert contradiction_notes(analysis.application_points, analysis.params) == []
    assert not any("not as shares" in note for note in analysis.notes)


def test_computation_longer_than_the_epoch_is_explained(analysis):
    """Kernels that ran on two streams at once, counted once each: the summed computation at 3 ranks
    becomes 1.2x the step time while the step time and the idle time stay as measured."""
    points = analysis.application_points.copy()
    at3 = points["ranks"] == 3
    epoch = points.loc[at3 & (points["quantity"] == "epoch time"), "value"].iloc[0]
    points.loc[at3 & (points["quantity"] == "computation"), "value"] = 1.2 * epoch
    notes = contradiction_notes(points, analysis.params)
    assert len(notes) == 1
    assert "ranks=3" in notes[0] and "computation" in notes[0] and "is longer than the epoch time" in notes[0]
    assert "at the same time" in notes[0]
