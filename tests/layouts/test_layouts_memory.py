"""Peak memory per GPU: model states against the ZeRO paper's formulas, activations against
Korthikanti et al.'s, every layout that really ran fits, and calibration recovers known factors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from extradeep.layouts.memory import GIB, MemoryModel, fit_reasons
from extradeep.layouts.space import layout_frame
from extradeep.layouts.workload import TransformerShape

SHAPE = TransformerShape(layers=32, hidden=4096, heads=32, seq_len=2048, vocab=51200)


def one(**layout) -> pd.DataFrame:
    base = {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 2, "global_batch": 64}
    return layout_frame(pd.DataFrame([{**base, **layout}]), SHAPE)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_model_states_follow_the_zero_paper(stage):
    """Rajbhandari et al. (ZeRO, 2020), mixed-precision Adam with K = 12: 2 + 2 + K bytes per
    parameter, the optimizer states divided by N_d from stage 1, the gradients from 2, the weights at 3."""
    d = 8
    parts = MemoryModel().parts(one(dp=d, zero=stage)).iloc[0]
    psi = SHAPE.parameters  # one stage, no tensor parallelism: every parameter (+ position embeddings)
    expected = {
        0: (2 + 2 + 12) * psi,
        1: (2 + 2) * psi + 12 * psi / d,
        2: 2 * psi + (2 + 12) * psi / d,
        3: (2 + 2 + 12) * psi / d,
    }[stage]
    states = parts["weights"] + parts["gradients"] + parts["optimizer_states"]
    assert states == pytest.approx(expected, rel=1e-9)


def test_activations_follow_korthikanti():
    """Per layer and micro-batch, without sequence parallelism: s b h (10 + 24/t + 5 a s / (h t))
    bytes with no recomputation, s b h (10 + 24/t) with selective, 2 s b h kept with full; a stage
    of 1F1B holds p micro-batches."""
    s, b, h, a, layers = 2048, 2, 4096, 32, 32
    for t, p in ((1, 1), (2, 4), (8, 2)):
        dp = 64 // (t * p)
        full_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
        cases = {
            "none": p * layers / p * full_layer,
            "selective": p * layers / p * s * b * h * (10 + 24 / t) + s * b * h * 5 * a * s / (h * t),
            "full": p * layers / p * 2 * s * b * h + full_layer,
        }
        for recompute, expected in cases.items():
            frame = one(tp=t, pp=p, dp=dp, micro_batch=b, global_batch=dp * b * 16, recompute=recompute)
            first = MemoryModel()._stage(frame, first=True)
            assert first["activations"][0] == pytest.approx(expected, rel=1e-9), (t, p, recompute)


def test_every_layout_that_ran_fits(vtrain):
    """vTrain measured all 1,528 layouts on A100 80 GB GPUs: none may be called infeasible
    (Calculon, uncalibrated, calls 6 of the 88 multi-node ones infeasible)."""
    for table in vtrain:
        peak = MemoryModel().peak(table)
        fits, reasons = fit_reasons(peak, 80 * GIB)
        assert fits.all(), table.loc[~fits, ["workload", "tp", "pp", "dp", "micro_batch"]].head()
        assert (peak > 0).all() and (reasons == "").all()


def test_infeasible_layouts_say_why():
    fits, reasons = fit_reasons([90 * GIB, 77 * GIB, 10 * GIB], 80 * GIB)
    assert list(fits) == [False, False, True]  # 77 GiB leaves less than the 5% headroom of 80
    assert reasons[0] == "needs 90.0 GiB per GPU, has 80 GiB (76 usable)" and reasons[2] == ""


def test_calibration_recovers_known_factors():
    """Peaks made with a known activation factor and overhead: fitting a default model on them gives both back."""
    frames = pd.concat(
        [one(micro_batch=b, tp=t, dp=8 // t, global_batch=8 // t * b * 4) for b in (1, 2, 4) for t in (1, 2, 8)]
    )
    truth = MemoryModel(activation_scale=1.3, overhead=3.5 * GIB)
    fitted = MemoryModel().fit(frames, truth.peak(frames))
    assert fitted.activation_scale == pytest.approx(1.3, rel=1e-4)
    assert fitted.overhead == pytest.approx(3.5 * GIB, rel=1e-3)
    assert np.allclose(fitted.peak(frames), truth.peak(frames), rtol=1e-4)


@pytest.mark.parametrize(
    "layout",
    [
        "tp1.pp4.dp1.mbs2.nmb4.zero0.rc2.vpp2",  # m = p: Megatron's warm-up takes every micro-batch
        "tp2.pp2.dp1.mbs1.nmb2.zero0.rc1.vpp2",
        "tp1.pp4.dp1.mbs2.nmb8.zero0.rc2.vpp2",  # m = 2p: 1F1B after the warm-up
        "tp2.pp4.dp2.mbs1.nmb4.zero1.rc0.vpp1",
        "tp8.pp2.dp1.mbs1.nmb4.zero0.rc0.vpp1",  # b a / t = 2: PyTorch's fp32 softmax keeps 4-byte scores
        "tp8.pp1.dp2.mbs1.nmb2.zero1.rc1.vpp1",  # and recomputes them in its working buffer
    ],
)
def test_uncalibrated_peak_is_the_simulators(layout):
    """The simulator allocates and frees as its schedule runs (Megatron's, interleaving included),
    so its peak is truth the formulas did not make. With m = p every forward of an interleaved step
    runs before any backward, and the last stage holds every micro-batch's logits at once."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import gpt_truth

    shape = {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 51200}
    truth = gpt_truth(layout, GPTModel(**shape))["peak_memory"]
    frame = simulated_layout(layout, TransformerShape(layers=8, hidden=1024, heads=16, seq_len=1024, vocab=51200))
    assert MemoryModel(overhead=0.0).peak(frame)[0] == pytest.approx(truth, rel=0.02)


def simulated_layout(label: str, shape: TransformerShape) -> pd.DataFrame:
    """The layout frame of a simulator layout label (tp2.pp1.dp4.mbs1.nmb2.zero3.rc0.vpp1)."""
    from extradeep.simulate.gpt.config import parse_layout

    lay = parse_layout(label)
    row = {
        "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "micro_batch": lay.micro_batch, "micro_batches": lay.micro_batches,
        "zero": lay.zero, "recompute": lay.recompute, "chunks": lay.virtual_stages, "schedule": lay.schedule,
    }  # fmt: skip
    return layout_frame(pd.DataFrame([row]), shape)


@pytest.mark.parametrize(
    "layout",
    [
        "tp1.pp1.dp4.mbs1.nmb2.zero3.rc2.vpp1",
        "tp1.pp1.dp4.mbs2.nmb2.zero3.rc1.vpp1",
        "tp2.pp1.dp4.mbs1.nmb2.zero3.rc0.vpp1",
    ],
)
def test_zero3_holds_two_gathered_layers_beside_the_recomputation_buffer(layout):
    """ZeRO 3 gathers a layer's full weights for its pass and prefetches the next: two layers'
    worth beside a layer's recomputation buffer, and beside the output layer's logits only where
    they need more. On a shape whose recomputed layer outweighs the logits (hidden 2,048,
    vocabulary 32,000) that is 7-14% of the simulator's peak, which its schedule reaches."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import gpt_truth

    shape = TransformerShape(layers=4, hidden=2048, heads=16, seq_len=1024, vocab=32000)
    gpt = GPTModel(layers=4, hidden=2048, heads=16, seq=1024, vocab=32000)
    truth = gpt_truth(layout, gpt)["peak_memory"]
    parts = MemoryModel(overhead=0.0).parts(simulated_layout(layout, shape)).iloc[0]
    assert parts["gathered_weights"] > 0.02 * truth
    assert parts["peak"] == pytest.approx(truth, rel=0.01)
