"""The parts of a step against independent counts: FLOPs summed over all GPUs equal the paper's
formula, the 1F1B bubble is (p - 1) / m of the pipeline's work, collectives move the bytes a ring
moves, parts are never negative and sum to the step, and the space holds exactly the valid layouts."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from extradeep.layouts.hardware import Hardware
from extradeep.layouts.parts import NAMES, PRIOR, compose, nominal_features
from extradeep.layouts.space import enumerate_layouts, layout_frame
from extradeep.layouts.workload import TransformerShape, padded_vocab, training_flops
from extradeep.system import System

SHAPE = TransformerShape(layers=24, hidden=2048, heads=16, seq_len=1024, vocab=51200)
HARDWARE = Hardware(system=System(8, 200e9, 3e-6, 25e9, 8e-6, 8, "test"))


@pytest.fixture(scope="module")
def layouts() -> pd.DataFrame:
    return enumerate_layouts(
        SHAPE, [8, 16, 64], 128, 8, micro_batches=(1, 2, 4), zero=(0, 1, 3), recompute=("none", "selective", "full")
    )


def test_flops_summed_over_all_gpus_equal_the_formula(layouts):
    """Nominal GEMM seconds x peak x layers per stage x micro-batches x GPUs, plus the output layer
    on the t x d GPUs of the last stage, give Narayanan et al.'s eq. 3 (recomputation) or its 72 form."""
    full = layouts[layouts["recompute"] != "selective"]
    fx = nominal_features(full, HARDWARE)
    peak = HARDWARE.gpu.peak_flops
    t, p, d, m = (full[c].to_numpy(float) for c in ("tp", "pp", "dp", "micro_batches"))
    total = fx["gemm"] * peak * fx["layers_per_stage"] * m * t * p * d + fx["logit_gemm"] * peak * m * t * d
    vocab = padded_vocab(full["vocab"], full["tp"])
    expected = np.where(
        full["recompute"] == "full",
        training_flops(full["global_batch"], SHAPE.seq_len, SHAPE.layers, SHAPE.hidden, vocab, True),
        training_flops(full["global_batch"], SHAPE.seq_len, SHAPE.layers, SHAPE.hidden, vocab, False),
    )
    assert np.allclose(total, expected, rtol=1e-12)


def test_parts_are_sane_and_sum_to_the_step(layouts):
    parts = compose(nominal_features(layouts, HARDWARE), PRIOR)
    names = [k for k in parts if k != "step"]
    assert all((parts[k] >= 0).all() for k in names)
    assert np.allclose(sum(parts[k] for k in names), parts["step"])
    t, p, d = (layouts[c].to_numpy() for c in ("tp", "pp", "dp"))
    assert (parts["tp_comm"][t == 1] == 0).all() and (parts["tp_comm"][t > 1] > 0).all()
    assert (parts["pp_bubble"][p == 1] == 0).all() and (parts["pp_p2p"][p == 1] == 0).all()
    alone = (d == 1) & (p == 1)  # with p > 1 the first and last stage still sum the tied embedding's gradients
    assert (parts["dp_sync"][alone] == 0).all() and (parts["dp_sync"][~alone] > 0).all()


def test_the_1f1b_bubble_is_p_minus_1_over_m_of_the_work(layouts):
    one_f_one_b = layouts[(layouts["pp"] > 1) & (layouts["schedule"] == "1f1b")]
    parts = compose(nominal_features(one_f_one_b, HARDWARE), PRIOR)
    fx = nominal_features(one_f_one_b, HARDWARE)
    c = dict(zip(NAMES, PRIOR))
    logits = fx["m"] * (c["gemm"] * fx["logit_gemm"] + c["memory"] * fx["logit_memory"])
    pipeline_work = parts["compute"] - logits + parts["tp_comm"] + parts["host_overhead"] + parts["pp_p2p"]
    p, m = one_f_one_b["pp"].to_numpy(float), one_f_one_b["micro_batches"].to_numpy(float)
    assert np.allclose(parts["pp_bubble"] / pipeline_work, (p - 1) / m)


def test_interleaving_divides_the_bubble_by_the_chunks():
    """With v chunks the bubble is (p - 1) / v slots of a micro-batch's work, and that work sends v
    times the boundary activations: bubble_v v - bubble_1 = (p - 1)(v - 1)(p2p + overhead)."""
    frame = layout_frame(
        pd.DataFrame({"tp": [1], "pp": [4], "dp": [2], "micro_batch": [1], "global_batch": [16]}), SHAPE
    )
    plain = compose(nominal_features(frame, HARDWARE), PRIOR)
    inter = compose(nominal_features(frame.assign(schedule="interleaved", chunks=3), HARDWARE), PRIOR)
    m, p, v = 8, 4, 3
    per_micro_batch = plain["pp_p2p"][0] / m + dict(zip(NAMES, PRIOR))["microbatch_overhead"]
    assert inter["pp_bubble"][0] * v - plain["pp_bubble"][0] == pytest.approx((p - 1) * (v - 1) * per_micro_batch)
    assert inter["pp_bubble"][0] < plain["pp_bubble"][0]
    assert inter["pp_p2p"][0] == pytest.approx(v * plain["pp_p2p"][0])


def test_data_parallel_sync_moves_what_a_hierarchical_ring_moves():
    """t = 8 puts one GPU of each DP group on each node: a ring over d nodes moving 2 (d - 1) / d of
    the gradients at the NIC's bandwidth, with 2 (d - 1) latencies. Computed by hand here."""
    d = 16
    frame = layout_frame(
        pd.DataFrame({"tp": [8], "pp": [1], "dp": [d], "micro_batch": [1], "global_batch": [d]}), SHAPE
    )
    fx = nominal_features(frame, HARDWARE)
    vocab = padded_vocab(SHAPE.vocab, 8)
    params = (SHAPE.layers * (12 * SHAPE.hidden**2 + 13 * SHAPE.hidden) + (vocab + SHAPE.seq_len) * SHAPE.hidden) / 8
    system = HARDWARE.system
    expected = 2 * (d - 1) / d * params * 2 / system.inter_bandwidth_per_gpu + 2 * (d - 1) * system.inter_latency
    assert fx["dp_inter"][0] == pytest.approx(expected, rel=1e-9)
    assert fx["dp_intra"][0] == 0


def test_tensor_parallel_all_reduces_per_layer():
    """Six ring all-reduces of b s h 16-bit activations per layer and micro-batch with full
    recomputation, four without: 2 (t - 1) / t of the message each over the node's links."""
    for recompute, count in (("full", 6), ("none", 4)):
        frame = layout_frame(
            pd.DataFrame(
                {"tp": [4], "pp": [1], "dp": [2], "micro_batch": [2], "global_batch": [8], "recompute": [recompute]}
            ),
            SHAPE,
        )
        fx = nominal_features(frame, HARDWARE)
        message = 2 * SHAPE.seq_len * SHAPE.hidden * 2
        one = 2 * 3 / 4 * message / HARDWARE.system.intra_bandwidth + 2 * 3 * HARDWARE.system.intra_latency
        assert fx["tp_intra"][0] == pytest.approx(count * one, rel=1e-9)


def test_the_space_holds_exactly_the_valid_layouts():
    """Against a brute-force walk over every (t, p, d, micro-batch) of the GPU counts."""
    gpus, batch, node = [16, 48, 64], 96, 8
    found = enumerate_layouts(SHAPE, gpus, batch, node, micro_batches=(1, 2, 3, 4), zero=(0,))
    expected = set()
    for n, t, p, mb in itertools.product(gpus, range(1, 65), range(1, 65), (1, 2, 3, 4)):
        if n % (t * p) or t > node or SHAPE.heads % t or SHAPE.layers % p:
            continue
        d = n // (t * p)
        if batch % (d * mb) == 0:
            expected.add((n, t, p, d, mb))
    assert set(map(tuple, found[["gpus", "tp", "pp", "dp", "micro_batch"]].to_numpy().tolist())) == expected
    assert len(found) == len(expected)


def test_one_data_parallel_rank_lists_only_the_lowest_zero_stage(layouts):
    """ZeRO shards over the data-parallel ranks: with one, stages 1 and 3 are stage 0's run again."""
    single = layouts[layouts["dp"] == 1]
    assert len(single) and set(single["zero"]) == {0}
    many = layouts[layouts["dp"] > 1]
    assert set(many["zero"]) == {0, 1, 3}
    only_sharded = enumerate_layouts(SHAPE, [8], 128, 8, micro_batches=(1,), zero=(1, 3))
    assert set(only_sharded.loc[only_sharded["dp"] == 1, "zero"]) == {1}


def test_zero_3_gathers_hide_under_the_compute_they_run_beside():
    """ZeRO 3 gathers each layer's parameters before its passes and reduce-scatters its gradients
    after them, beside the compute (DeepSpeed and FSDP prefetch by design): the step waits for the
    traffic the compute cannot cover. ZeRO 0's one all-reduce after the backward pass hides nothing.
    On fast links the gathers vanish under the compute; on slow ones the step waits for nearly all."""
    base = {"tp": [1, 1], "pp": [1, 1], "dp": [16, 16], "micro_batch": [4, 4], "global_batch": [256, 256]}
    frame = layout_frame(pd.DataFrame({**base, "zero": [0, 3]}), SHAPE)
    fx = nominal_features(frame, HARDWARE)
    parts = compose(fx, PRIOR)
    traffic = PRIOR[NAMES.index("tp8")] * fx["dp_intra"] + PRIOR[NAMES.index("network")] * fx["dp_inter"]
    assert parts["dp_sync"][0] == pytest.approx(traffic[0], rel=1e-9)  # ZeRO 0: all of it
    assert fx["dp_beside_inter"][1] > 0.5 * fx["dp_inter"][1]  # ZeRO 3: most of it runs beside the compute
    assert parts["dp_sync"][1] < 0.6 * traffic[1]
    slow = Hardware(system=System(8, 200e9, 3e-6, 25e6, 8e-6, 8, "slow"))  # a thousand times slower network
    slow_fx = nominal_features(frame, slow)
    waited = compose(slow_fx, PRIOR)["dp_sync"][1]
    slow_traffic = PRIOR[NAMES.index("tp8")] * slow_fx["dp_intra"] + PRIOR[NAMES.index("network")] * slow_fx["dp_inter"]
    assert waited == pytest.approx(slow_traffic[1], rel=0.05)


def test_zero_2_reduce_scatters_in_every_micro_batch_and_zero_1_once():
    """ZeRO 2 keeps only its shard of the gradients, so every micro-batch's backward pass
    reduce-scatters all of them (DeepSpeed's stage 2, the simulator): four times the micro-batches,
    four times the reduce-scatters; ZeRO 1 reduces the accumulated gradients once per step."""
    rows = {"tp": [1] * 4, "pp": [1] * 4, "dp": [16] * 4, "micro_batch": [1] * 4, "zero": [1, 1, 2, 2]}
    frame = layout_frame(pd.DataFrame({**rows, "global_batch": [32, 128, 32, 128]}), SHAPE)
    fx = nominal_features(frame, HARDWARE)
    sync = fx["dp_intra"] + fx["dp_inter"]
    assert sync[1] == pytest.approx(sync[0], rel=1e-9)  # ZeRO 1: m = 2 and m = 8 alike
    beside = fx["dp_beside_intra"] + fx["dp_beside_inter"]  # ZeRO 2: its reduce-scatters, m per step
    assert beside[0] == beside[1] == 0 and beside[3] == pytest.approx(4 * beside[2], rel=1e-9)
    scatter = beside[2] / 2  # m = 2
    assert sync[2] - beside[2] == pytest.approx(sync[0] - scatter, rel=1e-9)  # the same gather after the step
    assert sync[3] - beside[3] == pytest.approx(sync[2] - beside[2], rel=1e-9)
