"""`extradeep layouts PROFILES`: watts per GPU calibrated on the GPU power samples of
simulated nsys exports, energy in the written table, one line for a folder without samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from shared_data import GPT_TINY

from extradeep.cli import main
from extradeep.layout_profiles import read_profiled_runs
from extradeep.layouts.hardware import load_hardware


@pytest.fixture
def tiny_toml(tmp_path):
    path = tmp_path / "tiny.toml"
    keys = {"layers": "layers", "hidden": "hidden", "heads": "heads", "seq": "seq-len", "vocab": "vocab"}
    path.write_text("".join(f"{keys[k]} = {v}\n" for k, v in GPT_TINY.items()))
    return path


def test_power_profiles_calibrate_the_searchs_energy(gpt_studies, tiny_toml, tmp_path, capsys):
    study = gpt_studies["megatron"]
    out = tmp_path / "search.csv"
    args = ["layouts", "--model", str(tiny_toml), "--gpus", "8", "--global-batch", "16"]
    assert main([*args, str(study.outdir), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"profile samples ({len(study.truth['layouts'])} runs)" in text
    table = pd.read_csv(out)
    truth = [e["power"] for e in study.truth["layouts"]]
    fits = table[table["fits"]]
    assert fits["power_w"].between(0.5 * min(truth), 1.5 * max(truth)).all()  # not the 400 W data sheet
    assert np.allclose(fits["energy_kwh"], fits["gpus"] * fits["power_w"] * fits["time"] / 3.6e6)


def test_profiles_move_compute_to_another_gpu_as_their_kernel_classes_say(gpt_studies, tiny_toml, tmp_path):
    study = gpt_studies["megatron"]
    out = tmp_path / "both.csv"
    args = [
        "layouts",
        "--model",
        str(tiny_toml),
        "--gpus",
        "8",
        "--global-batch",
        "16",
        str(study.outdir),
    ]
    assert main([*args, "--search-hardware", "a100-80gb,h100-sxm", "-o", str(out)]) == 0
    table = pd.read_csv(out)
    keys = ["gpus", "tp", "pp", "dp", "micro_batch", "zero", "recompute"]
    a100, h100 = (table[table["hardware"] == name].set_index(keys) for name in ("a100-80gb", "h100-sxm"))
    assert h100["estimate"].all() and not a100["estimate"].any()
    moved = (h100["compute"] / a100["compute"]).dropna()
    profiled = read_profiled_runs([str(study.outdir)], {k: v for k, v in GPT_TINY.items()})
    gemm, memory = profiled.kernel_classes["gemm_time"], profiled.kernel_classes["memory_time"]
    a, h = load_hardware("a100-80gb").gpu, load_hardware("h100-sxm").gpu
    classes = (gemm * a.peak_flops / h.peak_flops + memory * a.memory_bandwidth / h.memory_bandwidth) / (gemm + memory)
    assert np.median(moved) == pytest.approx(np.median(classes), rel=0.15)
