"""Power and energy: power read from simulated nsys GPU metric samples matches the simulator's,
a power model calibrated on them predicts unmeasured layouts better than the nominal figure, and
the search's energy, perf/W and perf/$ follow their definitions."""

from __future__ import annotations

import numpy as np
import pytest
from shared_data import GPT_TINY

from extradeep.columns import GLOBAL_BATCH, PART, PART_POWER
from extradeep.io.parallel import layout_parts
from extradeep.layout_profiles import power_observations
from extradeep.layouts.energy import PowerModel
from extradeep.layouts.hardware import Hardware, load_hardware
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.search import search_layouts
from extradeep.layouts.workload import TransformerShape
from extradeep.simulate.gpt.config import GPTModel
from extradeep.simulate.gpt.frames import truth_frame

MEDIUM = GPTModel(layers=8, hidden=1024, heads=16, seq=1024, vocab=51200, name="gpt-medium")
MEDIUM_SHAPE = TransformerShape(layers=8, hidden=1024, heads=16, seq_len=1024, vocab=51200)
PROFILED = ["tp2.pp2.dp1.mbs1.nmb4", "tp1.pp1.dp2.mbs2.nmb4", "tp2.pp1.dp2.mbs1.nmb8", "tp1.pp2.dp2.mbs1.nmb8.rc2"]
TARGETS = [
    "tp4.pp2.dp8.mbs1.nmb8",
    "tp8.pp2.dp4.mbs1.nmb16",
    "tp2.pp4.dp8.mbs1.nmb16",
    "tp1.pp1.dp64.mbs2.nmb2",
    "tp8.pp1.dp32.mbs1.nmb4",
    "tp2.pp2.dp128.mbs1.nmb4",
]


@pytest.fixture(scope="module")
def calibrated():
    """(layout model, power model) calibrated on the simulator's truth of four runs on <= 4 GPUs."""
    observed = truth_frame(PROFILED, MEDIUM)
    layout_model = LayoutModel(interval=None).fit(observed.drop(columns=["power"]))
    return layout_model, PowerModel().fit(layout_model, observed)


def test_power_samples_in_nsys_exports_give_the_simulators_power(gpt_studies):
    study = gpt_studies["megatron"]
    paths = sorted(str(p) for p in study.outdir.glob("*.sqlite"))
    frame = layout_parts(paths)
    assert (frame[PART] == PART_POWER).any()
    measured = power_observations(frame, GPT_TINY)
    truth = {e["label"]: e["power"] for e in study.truth["layouts"]}
    assert len(measured) == len(truth)
    for _, row in measured.iterrows():
        label = f"tp{row['tp']}.pp{row['pp']}.dp{row['dp']}"
        expected = [v for k, v in truth.items() if k.startswith(label) and f"zero{row['zero']}" in k]
        assert row["power"] == pytest.approx(expected[0], rel=0.03)
    kineto_only = layout_parts(sorted(str(p) for p in study.outdir.glob("*.pt.trace.json.gz")))
    assert not (kineto_only[PART] == PART_POWER).any()  # Kineto records no power: nothing is made up


def test_calibrated_power_beats_the_nominal_figure_on_unmeasured_layouts(calibrated):
    layout_model, power = calibrated
    assert power.source_.startswith("profile samples") and 0 <= power.idle_ < power.busy_
    truth = truth_frame(TARGETS, MEDIUM)
    predicted = power.predict(layout_model.predict(truth))
    error = np.abs(predicted / truth["power"] - 1)
    nominal = np.abs(load_hardware(None).gpu.power / truth["power"] - 1)
    assert np.median(error) < 0.15 and np.median(error) < np.median(nominal) / 2


def test_search_reports_energy_perf_per_watt_and_per_cost(calibrated):
    layout_model, power = calibrated
    priced = Hardware(price_per_gpu_hour=2.0, price_per_kwh=0.25, pue=1.2)
    table = search_layouts(layout_model, MEDIUM_SHAPE, [64], 256, hardware=priced, power=power, micro_batches=(1, 2))
    assert table.attrs["power_source"] == power.source_
    fits = table[table["fits"]]
    assert np.allclose(fits["power_w"], power.predict(fits, priced))
    joules = fits["gpus"] * fits["power_w"] * fits["time"] * 1.2
    assert np.allclose(fits["energy_kwh"], joules / 3.6e6)
    assert np.allclose(fits["perf_per_watt"], fits[GLOBAL_BATCH] / joules)
    assert np.allclose(
        fits["perf_per_cost"], fits[GLOBAL_BATCH] / (fits["gpus"] * fits["time"] / 3600 * 2.0 + joules / 3.6e6 * 0.25)
    )
    nominal = search_layouts(layout_model, MEDIUM_SHAPE, [64], 256, hardware=priced, micro_batches=(1, 2))
    assert nominal.attrs["power_source"] == "system file" and (nominal["power_w"] == priced.gpu.power).all()
