"""Other GPU types: kernel classes read from simulated A100 profiles move the layout model's compute
to an H100 as the simulator's H100 truth moves it, and the moved predictions are labelled estimates
with wider intervals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_data import MEDIUM_GPT as MODEL
from shared_data import MEDIUM_PROFILED as PROFILED

from extradeep.columns import PART_COMPUTE, STEP_TIME
from extradeep.layouts.transfer import (
    COMMUNICATION,
    COMPUTE,
    MEMORY,
    kernel_classes,
    transferred_model,
)
from extradeep.simulate.gpt.frames import truth_frame
from extradeep.simulate.gpt.names import KERNELS, NCCL_KERNELS

TARGETS = ["tp4.pp2.dp8.mbs1.nmb8", "tp2.pp4.dp8.mbs1.nmb16", "tp8.pp1.dp32.mbs1.nmb4", "tp1.pp1.dp8.mbs2.nmb4"]


def test_simulated_kernels_are_classed_as_the_simulator_issues_them():
    names = {key: demangled for key, (_, demangled) in KERNELS.items()}
    frame = pd.DataFrame({"name": list(names.values()), "collective": ""})
    classes = dict(zip(names, kernel_classes(frame)))
    gemms = {k for k, v in names.items() if "gemm" in v.lower()}
    assert gemms and all(classes[k] == COMPUTE for k in gemms)
    assert all(classes[k] == MEMORY for k in ("layernorm_fwd", "softmax_fwd", "gelu_fwd", "dropout_add"))
    nccl = pd.DataFrame({"name": list(NCCL_KERNELS.values()), "collective": "allreduce"})
    assert (kernel_classes(nccl) == COMMUNICATION).all()


def test_class_times_add_up_to_the_simulators_compute_busy_time(a100_study):
    _, _, observed = a100_study
    truth_file = Path(a100_study[0][0]).parent / "truth.json"
    truth = {e["label"]: e for e in json.loads(truth_file.read_text())["layouts"]}
    assert len(observed) == len(PROFILED)
    for _, row in observed.iterrows():
        entry = next(e for k, e in truth.items() if k.startswith(f"tp{row['tp']}.pp{row['pp']}.dp{row['dp']}."))
        busy = entry["stages"][-1]["busy"]
        compute = sum(busy.get(p, 0.0) for p in ("forward", "backward", "recompute", "optimizer"))
        assert row["gemm_time"] + row["memory_time"] == pytest.approx(compute, rel=0.05)
        assert row["gemm_time"] > row["memory_time"] > 0


def test_kernel_classes_move_compute_to_another_gpu_as_the_simulator_does(a100_study):
    _, model, observed = a100_study
    moved = transferred_model(model, observed, "h100-sxm")
    a100, h100 = truth_frame(PROFILED, MODEL), truth_frame(PROFILED, MODEL, gpu="h100-sxm")
    true_ratio = h100[PART_COMPUTE] / a100[PART_COMPUTE]
    plain_ratio = model.predict(a100, "h100-sxm")[PART_COMPUTE] / model.predict(a100)[PART_COMPUTE]
    moved_ratio = moved.predict(a100, "h100-sxm")[PART_COMPUTE] / moved.predict(a100)[PART_COMPUTE]
    assert np.median(np.abs(np.log(moved_ratio / true_ratio))) < np.median(np.abs(np.log(plain_ratio / true_ratio)))
    targets = truth_frame(TARGETS, MODEL, gpu="h100-sxm")
    plain, transferred = model.predict(targets, "h100-sxm"), moved.predict(targets, "h100-sxm")
    error = {
        k: np.median(np.abs(p[STEP_TIME] / targets[STEP_TIME] - 1))
        for k, p in (("plain", plain), ("moved", transferred))
    }
    assert error["moved"] <= error["plain"] and error["moved"] < 0.2
    assert transferred["estimate"].all()
    here = moved.predict(truth_frame(TARGETS, MODEL))
    assert (
        (transferred["step_time_high"] / transferred["step_time_low"])
        > (here["step_time_high"] / here["step_time_low"])
    ).all()
