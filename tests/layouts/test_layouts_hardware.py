"""Hardware files: GPU presets and tables, the network keys of a system file, prices, and one line
for each mistake."""

from __future__ import annotations

import pytest

from extradeep.errors import InputError
from extradeep.layouts.hardware import GIB, GPU_PRESETS, load_hardware


def test_a_hardware_file_combines_gpu_network_and_prices(tmp_path):
    path = tmp_path / "cluster.toml"
    path.write_text(
        'system = "4gpu-1nic"\ninter-bandwidth = "50 GB/s"\nnics-per-node = 2\nprice-per-gpu-hour = 2.5\n'
        'price-per-kwh = 0.2\npue = 1.25\n[gpu]\npreset = "a100-40gb"\nmemory = "48 GiB"\npower = "0.3 kW"\n'
    )
    hardware = load_hardware(path)
    assert hardware.name == "cluster"
    assert hardware.system.gpus_per_node == 4 and hardware.system.inter_bandwidth == 50e9
    assert hardware.system.inter_bandwidth_per_gpu == 50e9 * 2 / 4
    assert hardware.gpu.memory == 48 * GIB and hardware.gpu.power == 300.0
    assert hardware.gpu.peak_flops == GPU_PRESETS["a100-40gb"].peak_flops  # the rest from the preset
    assert (hardware.price_per_gpu_hour, hardware.price_per_kwh, hardware.pue) == (2.5, 0.2, 1.25)
    assert load_hardware("h100-sxm").gpu == GPU_PRESETS["h100-sxm"]
    assert load_hardware(None).gpu == GPU_PRESETS["a100-80gb"]


@pytest.mark.parametrize(
    "text,problem",
    [
        ('gpu = "tpu"\n', "unknown GPU preset 'tpu'"),
        ('system = "mesh"\n', "unknown system preset 'mesh'"),
        ("colour = 3\n", "unknown key(s) colour"),
        ('[gpu]\npreset = "a100-80gb"\npower = "400 Watt"\n', "gpu.power: cannot read '400 Watt'"),
        ('[gpu]\npeak-flops = "100 TFLOP/s"\n', "[gpu]: missing memory-bandwidth, memory, power"),
        ("pue = 0.8\n", "pue must be >= 1"),
        ("price-per-gpu-hour = -1\n", "price-per-gpu-hour must be a number > 0"),
        ("gpus-per-node = 0\n", "gpus-per-node must be a whole number >= 1"),
        ("gpu = [\n", "not a readable TOML hardware file"),
    ],
)
def test_mistakes_are_one_line_naming_the_file(tmp_path, text, problem):
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_hardware(path)
    assert problem in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_unknown_names_are_refused():
    with pytest.raises(InputError, match="no such hardware file, and not a GPU preset"):
        load_hardware("b200-imaginary")


def test_precision_picks_the_peak_flops(tmp_path):
    path = tmp_path / "h100.toml"
    path.write_text('gpu = "h100-sxm"\nprecision = "fp8"\n')
    fp8 = load_hardware(path)
    assert fp8.gpu.peak_flops == pytest.approx(2 * GPU_PRESETS["h100-sxm"].peak_flops, rel=1e-3)  # fp8 = 2 x bf16
    path.write_text('precision = "tf32"\n[gpu]\npreset = "a100-80gb"\n')
    assert load_hardware(path).gpu.peak_flops == GPU_PRESETS["a100-80gb"].peak_flops / 2
    path.write_text(
        'precision = "fp8"\n[gpu]\npreset = "a100-80gb"\npeak-flops = { bf16 = "300 TFLOP/s", fp8 = "0.6 PFLOP/s" }\n'
    )
    assert load_hardware(path).gpu.peak_flops == pytest.approx(600e12)
    path.write_text('gpu = "a100-80gb"\nprecision = "fp8"\n')
    with pytest.raises(InputError, match="no peak FLOP/s for 'fp8'"):
        load_hardware(path)
