"""`extradeep layouts --power-profiles`: watts per GPU calibrated on the GPU power samples of
simulated nsys exports, energy in the written table, one line for a folder without samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from shared_data import GPT_TINY

from extradeep.cli import main


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
    assert main([*args, "--power-profiles", str(study.outdir), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"profile samples ({len(study.truth['layouts'])} runs)" in text
    table = pd.read_csv(out)
    truth = [e["power"] for e in study.truth["layouts"]]
    fits = table[table["fits"]]
    assert fits["power_w"].between(0.5 * min(truth), 1.5 * max(truth)).all()  # not the 400 W data sheet
    assert np.allclose(fits["energy_kwh"], fits["gpus"] * fits["power_w"] * fits["time"] / 3.6e6)


def test_power_profiles_that_are_not_profiles_is_one_line(tiny_toml, capsys):
    code = main(
        [
            "layouts",
            "--model",
            str(tiny_toml),
            "--gpus",
            "8",
            "--global-batch",
            "16",
            "--power-profiles",
            str(tiny_toml),
        ]
    )
    assert code != 0
    err = capsys.readouterr().err
    assert "--power-profiles" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_kernel_profiles_move_only_the_other_gpu_types(gpt_studies, tiny_toml, tmp_path):
    study = gpt_studies["megatron"]
    args = ["layouts", "--model", str(tiny_toml), "--gpus", "8", "--global-batch", "16"]
    args += ["--search-hardware", "a100-80gb,h100-sxm"]
    plain, moved = tmp_path / "plain.csv", tmp_path / "moved.csv"
    assert main([*args, "-o", str(plain)]) == 0
    assert main([*args, "--kernel-profiles", str(study.outdir), "-o", str(moved)]) == 0
    keys = ["hardware", "gpus", "tp", "pp", "dp", "micro_batch", "zero", "recompute"]
    both = pd.read_csv(plain).merge(pd.read_csv(moved), on=keys, suffixes=("_plain", "_moved"))
    same = both[both["hardware"] == "a100-80gb"]
    other = both[both["hardware"] == "h100-sxm"]
    assert len(same) and len(other) and other["estimate_moved"].all() and not same["estimate_moved"].any()
    assert np.allclose(same["time_plain"], same["time_moved"], rtol=1e-6)  # the calibration GPU stays put
    assert not np.allclose(other["compute_plain"], other["compute_moved"], rtol=1e-2)  # compute moves there
