"""What the profiles give the layout search: the memory estimate calibrated on the peaks nsys
records lands within 10% (median) of the simulator's peak at unmeasured layouts, the profiled GPU's
capacity bounds what fits, and a layout that does not fit says why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from shared_data import MEDIUM_GPT, MEDIUM_SHAPE

from extradeep.layout_profiles import read_profiled_runs
from extradeep.layouts.hardware import load_hardware
from extradeep.layouts.model import LayoutModel
from extradeep.simulate.gpt.frames import truth_frame

UNMEASURED = [
    "tp4.pp2.dp8.mbs1.nmb8",
    "tp2.pp4.dp8.mbs1.nmb16",
    "tp1.pp1.dp64.mbs2.nmb2",
    "tp8.pp1.dp32.mbs1.nmb4",
    "tp1.pp1.dp8.mbs4.nmb4",
    "tp2.pp1.dp4.mbs2.nmb8.zero1",
]


def test_memory_calibrated_on_recorded_peaks_is_within_ten_percent(a100_study):
    _, model, _ = a100_study
    assert model.memory_calibrated_
    truth = truth_frame(UNMEASURED, MEDIUM_GPT)
    calibrated = np.abs(model.predict(truth)["peak_memory"] / truth["peak_memory"] - 1)
    physics = LayoutModel(interval=None).fit(None)  # the memory formula with its default constants
    uncalibrated = np.abs(physics.predict(truth)["peak_memory"] / truth["peak_memory"] - 1)
    assert np.median(calibrated) < 0.10 and np.median(calibrated) < np.median(uncalibrated)


def test_the_profiled_gpus_memory_bounds_what_fits(a100_study):
    paths, _, _ = a100_study
    profiled = read_profiled_runs(paths[:2], MEDIUM_SHAPE)
    truth = json.loads((Path(paths[0]).parent / "truth.json").read_text())
    assert profiled.gpu_memory == truth["gpu"]["memory"] and profiled.gpu_name == truth["gpu"]["name"]
    assert profiled.hardware(load_hardware("a100-40gb")).gpu.memory == truth["gpu"]["memory"]
