"""The GPT simulator's truth is self-consistent, its schedule obeys causality, and its memory peak is the
configured one (closed form of Korthikanti et al. and the 1F1B in-flight count, computed independently)."""

from __future__ import annotations

import numpy as np
import pytest
from shared_data import GPT_TINY

from extradeep.columns import PART_DP_KERNELS, PART_OTHER_KERNELS, PART_PP_KERNELS, PART_TP_KERNELS
from extradeep.errors import InputError
from extradeep.simulate.engine import LAUNCH_LATENCY_NS
from extradeep.simulate.gpt import memory as mem
from extradeep.simulate.gpt.config import GPTModel, parse_layout
from extradeep.simulate.gpt.run import simulate_run
from extradeep.simulate.gpt.schedule import stage_actions
from extradeep.simulate.gpt.study import gpt_truth
from extradeep.simulate.gpt.truth import layout_truth
from extradeep.system import System, load_system

COMM_PARTS = (PART_TP_KERNELS, PART_PP_KERNELS, PART_DP_KERNELS, PART_OTHER_KERNELS)

TINY = GPTModel(**GPT_TINY)


def all_truths(studies):
    for study in studies.values():
        yield from study.truth["layouts"]


def test_critical_path_parts_sum_to_the_step_time(gpt_studies):
    for truth in all_truths(gpt_studies):
        parts = truth["critical_path"]
        assert sum(parts.values()) == pytest.approx(truth["step_time"], rel=1e-9), truth["label"]
        assert all(v >= 0 for v in parts.values())
        assert truth["step_time"] > 0


def test_stage_parts_stay_within_the_step(gpt_studies):
    for truth in all_truths(gpt_studies):
        assert truth["parts"] == truth["stages"][-1]["split"]
        for stage in truth["stages"]:
            assert sum(stage["split"].values()) == pytest.approx(stage["step_time"], rel=1e-12)
            assert min(stage["split"].values()) >= 0
            compute = sum(v for k, v in stage["busy"].items() if k not in COMM_PARTS)
            # idle = step - union(compute kernels) and the union never exceeds their sum
            assert compute >= stage["step_time"] - stage["idle"] - 1e-12
            assert 0 <= stage["idle"] <= stage["step_time"]
            for part, pure in stage["pure"].items():
                assert 0 < pure <= stage["busy"][part] * (1 + 1e-9), (truth["label"], part)


def test_one_rank_per_stage_gives_the_truth_of_all_ranks():
    layout = parse_layout("tp2.pp2.dp2.mbs1.nmb4.zero1.rc0.vpp1")
    args = (TINY, layout, load_gpu_a100(), load_system("dgx-8-nvswitch"))
    full = layout_truth(simulate_run(*args, steps=3, ranks="all", warmup_factor=1.0))
    heads = layout_truth(simulate_run(*args, steps=3, ranks="stages", warmup_factor=1.0))
    assert heads["step_time"] == pytest.approx(full["step_time"], rel=1e-12)
    for a, b in zip(full["stages"], heads["stages"]):
        assert a["busy"] == pytest.approx(b["busy"], rel=1e-12)
        assert a["memory"]["peak_allocated"] == b["memory"]["peak_allocated"]


def load_gpu_a100():
    from extradeep.simulate.gpt.config import load_gpu

    return load_gpu("a100-80gb")


def test_memory_peak_is_the_configured_one(gpt_studies):
    """Static bytes by ZeRO stage plus min(pp - stage, nmb) micro-batches of activations in flight,
    the logits of the last stage and the recomputation buffer: an independent closed form. The
    attention core keeps 5 bytes per score, 7 where Megatron's fused softmax kernel does not take the
    shape (b a / t not a multiple of 4) and PyTorch's fp32 softmax output is kept instead."""
    checked = 0
    for truth in all_truths(gpt_studies):
        layout = parse_layout(truth["label"])
        if layout.schedule != "1f1b" or layout.zero == 3:
            continue
        for stage in truth["stages"]:
            s = stage["stage"]
            core = 5 if (layout.micro_batch * TINY.heads // layout.tp) % 4 == 0 else 7
            static = sum(mem.aligned(v) for v in mem.static_bytes(TINY, layout, s).values())
            act = mem.aligned(
                layout.micro_batch
                * TINY.seq
                * TINY.hidden
                * (
                    {
                        "none": 10 + 24 / layout.tp + core * TINY.heads * TINY.seq / (TINY.hidden * layout.tp),
                        "selective": 10 + 24 / layout.tp,
                        "full": 2,
                    }[layout.recompute]
                )
            )
            in_flight = min(layout.pp - s, layout.micro_batches)
            layers = TINY.layers // layout.pp
            logits = mem.aligned(layout.micro_batch * TINY.seq * TINY.vocab / layout.tp * 4)
            full_layer = mem.aligned(mem.layer_activation_bytes(TINY, layout, "none"))
            last = s == layout.pp - 1
            extra = max(logits if last else 0, full_layer if layout.recompute == "full" else 0)
            expected = static + in_flight * layers * act + extra
            assert stage["memory"]["peak_allocated"] == pytest.approx(expected, rel=1e-12), (truth["label"], s)
            checked += 1
    assert checked >= 4


def test_zero3_peak_holds_at_most_two_gathered_layers(gpt_studies):
    truth = next(t for t in all_truths(gpt_studies) if t["layout"]["zero"] == 3)
    layout = parse_layout(truth["label"])
    stage = truth["stages"][0]
    static = sum(mem.aligned(v) for v in mem.static_bytes(TINY, layout, 0).values())
    acts = TINY.layers * mem.aligned(mem.layer_activation_bytes(TINY, layout)) * layout.micro_batches
    gathered = mem.aligned(mem.gathered_layer_bytes(TINY, layout))
    logits = mem.aligned(mem.logits_bytes(TINY, layout))
    assert (
        static + TINY.layers * mem.aligned(mem.layer_activation_bytes(TINY, layout))
        <= stage["memory"]["peak_allocated"]
    )
    assert stage["memory"]["peak_allocated"] <= static + acts + logits + 2 * gathered


def test_sharding_lowers_the_static_memory():
    base = parse_layout("tp1.pp1.dp4.mbs1.nmb1.zero0")
    sizes = [sum(mem.static_bytes(TINY, parse_layout(f"tp1.pp1.dp4.mbs1.nmb1.zero{z}"), 0).values()) for z in range(4)]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 4
    params = mem.rank_params(TINY, base, 0)
    assert sizes[0] == pytest.approx(params * 16) and sizes[3] == pytest.approx(params * 16 / 4)


def test_schedule_is_causal():
    """Noisy run: kernels on one stream never overlap, none starts before its launch plus the launch
    latency, and the members of a collective end together."""
    layout = parse_layout("tp2.pp2.dp1.mbs1.nmb4.zero0.rc0.vpp1")
    run = simulate_run(TINY, layout, load_gpu_a100(), load_system("dgx-8-nvswitch"), steps=3, noise=(0.05, 0.02, 0.02))
    ends = {}
    for rank in run.ranks:
        tl = run.timeline(rank)
        launch = {r["corr"]: r for r in tl.runtime}
        for stream in {g["stream"] for g in tl.gpu}:
            ops = sorted((g for g in tl.gpu if g["stream"] == stream), key=lambda g: g["start"])
            starts = np.array([g["start"] for g in ops])
            stops = np.array([g["end"] for g in ops])
            assert (starts[1:] >= stops[:-1] - 1e-6).all()
        for g in tl.gpu:
            assert g["start"] >= launch[g["corr"]]["start"] + LAUNCH_LATENCY_NS - 1e-6
            if g["comm"] and g["comm"]["role"] == "tp":
                ends.setdefault(tuple(g["comm"]["joins"]), set()).add(round(g["end"], 3))
    assert ends and all(len(v) == 1 for v in ends.values())


def test_pipeline_bubble_matches_the_classic_count():
    """With communication made free, a 1F1B step is (m + p - 1) forward-backward slots of one stage
    plus the optimizer (Narayanan et al.'s bubble count, computed here from the stage's own work):
    the bubble emerges from the dependencies."""
    fast = System(8, 1e15, 1e-9, 1e15, 1e-9, 8, "free links")
    model = GPTModel(layers=8, hidden=1024, heads=16, seq=1024, vocab=1024)
    for p, m in ((2, 4), (4, 8), (4, 4)):
        layout = parse_layout(f"tp1.pp{p}.dp1.mbs1.nmb{m}.zero0.rc0.vpp1")
        truth = layout_truth(
            simulate_run(model, layout, load_gpu_a100(), fast, steps=3, ranks="stages", warmup_factor=1.0)
        )
        middle = truth["stages"][1]  # neither embedding nor logits: one stage's pure layer work
        slot = middle["per_micro_batch"]["forward"] + middle["per_micro_batch"]["backward"]
        classic = (m + p - 1) * slot
        passes = truth["step_time"] - truth["critical_path"]["optimizer"]
        # above: the first and last stages add the embedding and the logits to their slots
        assert classic <= passes <= classic * 1.05, (p, m, passes / classic)


def test_truth_without_files_scales_to_512_gpus():
    truth = gpt_truth(
        "tp8.pp4.dp16.mbs1.nmb8.zero1.rc2.vpp1", TINY.__class__(layers=8, hidden=512, heads=8, seq=256, vocab=2048)
    )
    assert truth["layout"]["gpus"] == 512
    assert len(truth["stages"]) == 4
    assert sum(truth["critical_path"].values()) == pytest.approx(truth["step_time"], rel=1e-9)
    assert truth["critical_path"][PART_DP_KERNELS] >= 0 and truth["fits"]


def test_interleaving_shortens_the_bubble():
    model = GPTModel(layers=8, hidden=1024, heads=16, seq=1024, vocab=1024)
    plain = gpt_truth("tp1.pp4.dp1.mbs1.nmb4.zero0.rc0.vpp1", model)
    interleaved = gpt_truth("tp1.pp4.dp1.mbs1.nmb4.zero0.rc0.vpp2", model)
    assert interleaved["step_time"] < plain["step_time"]


@pytest.mark.parametrize(
    "label, problem",
    [
        ("tp3.pp1.dp1", "divide by tp"),
        ("tp1.pp3.dp1", "do not split"),
        ("tp1.pp2.dp1.nmb3.vpp2", "multiple of pp"),
        ("tp1.pp2.dp2.zero3", "pp = 1"),
        ("tp1.pp1.dp1.zero5", "zero stage"),
    ],
)
def test_impossible_layouts_are_one_line_errors(label, problem):
    with pytest.raises(InputError, match=problem):
        gpt_truth(label, TINY)


def test_every_micro_batch_passes_each_stage_once_each_way():
    for p, m, v in ((1, 3, 1), (3, 5, 1), (2, 4, 2), (4, 8, 3)):
        sends, recvs = {}, {}
        for s in range(p):
            acts = stage_actions(s, p, m, "interleaved" if v > 1 else "1f1b", v)
            assert sorted(a[1:] for a in acts if a[0] == "fwd") == sorted(a[1:] for a in acts if a[0] == "bwd")
            assert sum(a[0] == "fwd" for a in acts) == m * v
            for a in acts:
                if a[0] == "p2p":
                    for key in a[2]:
                        sends[key] = sends.get(key, 0) + 1
                    for key in a[3]:
                        recvs[key] = recvs.get(key, 0) + 1
        assert sends == recvs and set(sends.values()) <= {1}


def test_megatron_falls_back_to_pytorchs_softmax_where_its_fused_kernel_does_not_fit(gpt_studies):
    """Megatron's fused causal softmax takes b x the rank's heads only in multiples of 4 (TINY: 4 heads,
    s = 256). Elsewhere the profile shows PyTorch's fp32 path: per layer and micro-batch a mask fill
    in the forward and one in the backward (none in the fused runs), and the fallback's kernels (casts,
    scale, mask fill, softmax) take several times the fused kernel's time per score."""
    from extradeep.io.kineto.load import load

    fallback = "masked_fill_kernel|AUnaryFunctor|direct_copy_kernel_cuda|cunn_SoftMax"
    fused_time, unfused_time, seen = [], [], set()
    for study in gpt_studies.values():
        kineto = study.files[(study.files["format"] == "kineto") & (study.files["rank"] == 0)]
        for label, path in zip(kineto["layout"], kineto["path"]):
            layout = parse_layout(label)
            fused = (layout.micro_batch * TINY.heads // layout.tp) % 4 == 0
            gpu = load(path).gpu
            names = gpu["name"].astype(str)
            fills = int(names.str.contains("masked_fill_kernel").sum())
            fused_kernels = names.str.contains("scaled_upper_triang_masked_softmax_warp")
            steps, passes = 3, 2 + (layout.recompute != "none")
            layers = TINY.layers // layout.pp * layout.micro_batches * steps
            per_score = layers * layout.micro_batch * (TINY.heads // layout.tp) * TINY.seq**2
            if fused:
                assert fills == 0 and fused_kernels.sum() == layers * passes, label
                fused_time.append(_busy(gpu[fused_kernels]) / per_score)
            else:
                assert fills == layers * passes and not fused_kernels.any(), label
                if layout.pp > 1:  # rank 0 then holds no output layer, whose cross entropy runs cunn_SoftMax too
                    unfused_time.append(_busy(gpu[names.str.contains(fallback)]) / per_score)
            seen.add(fused)
    assert seen == {True, False} and unfused_time
    assert min(unfused_time) > 3 * max(fused_time)


def _busy(kernels) -> float:
    return float((kernels["end"] - kernels["start"]).sum())
