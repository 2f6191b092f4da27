"""Collective matching, pure durations, clock alignment, alpha-beta fits and ring/tree models."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from extradeep.predictor.collectives import (
    clock_offsets,
    collective_groups,
    collective_kind,
    fit_alpha_beta,
    model_time,
    rescale_collective,
)
from extradeep.predictor.trace import load_trace


@pytest.fixture(scope="module")
def ddp_trace(ddp_run):
    return load_trace(sorted(ddp_run.glob("*.sqlite")))


def test_collectives_match_across_all_ranks(ddp_trace):
    ops = ddp_trace.ops
    groups = collective_groups(ops)
    nccl = ops[(ops["kind"] == "kernel") & ops["name"].str.startswith("nccl")]
    mpi = ops[ops["kind"] == "mpi"]  # MPI_Barrier / MPI_Allreduce at epoch boundaries
    assert len(mpi) > 0 and set(mpi["name"]) == {"MPI_Barrier", "MPI_Allreduce"}
    assert len(groups) == len(nccl) + len(mpi)  # every NCCL kernel and MPI collective found its peers
    per_group = groups.groupby("group").agg(ranks=("rank", "nunique"), names=("name", "nunique"), n=("rank", "size"))
    assert (per_group["ranks"] == 4).all() and (per_group["names"] == 1).all() and (per_group["n"] == 4).all()
    # members of one collective end together (the simulator's collectives do), and start at different times
    ends = ops.loc[groups["node"], "end"].groupby(groups["group"].to_numpy()).agg(np.ptp)
    assert (ends[groups.drop_duplicates("group").set_index("group")["name"].str.startswith("nccl")] == 0).all()


def test_pure_duration_excludes_waiting(ddp_prediction):
    c = ddp_prediction.collectives
    assert (c["pure"] > 0).all() and (c["wait"] >= 0).all()
    assert np.allclose(c["pure"] + c["wait"], c["end"] - c["first_start"])
    assert c["wait"].max() > c["pure"].median()  # rank imbalance makes early ranks wait


def test_clock_offsets_are_recovered_from_collective_ends(ddp_trace):
    ops = ddp_trace.ops.copy()
    shift = {0: 0, 1: 1_500_000, 2: -730_000, 3: 12}
    ops["start"] += ops["rank"].map(shift)
    ops["end"] += ops["rank"].map(shift)
    offsets = clock_offsets(ops, {r: f"file{r}" for r in range(4)})
    assert offsets == {f"file{r}": s for r, s in shift.items()}


def test_ring_and_tree_formulas():
    a, v = 3e-6, 1e-3
    for p in (2, 4, 64):
        assert model_time("all_reduce", p, a, v) == pytest.approx(2 * (p - 1) * a + 2 * (p - 1) / p * v)
        for kind in ("all_gather", "reduce_scatter"):
            assert model_time(kind, p, a, v) == pytest.approx((p - 1) * a + (p - 1) / p * v)
        assert model_time("all_reduce", p, a, v, "tree") == pytest.approx(2 * math.log2(p) * a + 2 * v)
    assert model_time("send_recv", 64, a, v) == pytest.approx(a + v)


def test_rescaling_keeps_the_measured_point_and_follows_the_model():
    a, v = 4e-6, 2e-3
    measured = model_time("all_reduce", 4, a, v)
    alpha = model_time("all_reduce", 4, a, 0.0)
    assert rescale_collective("all_reduce", measured, alpha, 4, 4) == pytest.approx(measured)
    assert rescale_collective("all_reduce", measured, alpha, 4, 64) == pytest.approx(model_time("all_reduce", 64, a, v))


def test_alpha_beta_fit_recovers_latency_and_bandwidth():
    rng = np.random.default_rng(1)
    m = rng.uniform(1e5, 1e8, 40)
    t = 2e-5 + m / 5e10
    fits = fit_alpha_beta(pd.DataFrame({"name": "ncclAllReduce", "bytes": m, "pure": t}))
    fit = fits["ncclAllReduce"]
    assert fit.sized and fit.alpha == pytest.approx(2e-5, rel=1e-3) and fit.bandwidth == pytest.approx(5e10, rel=1e-3)
    unsized = fit_alpha_beta(pd.DataFrame({"name": "x", "bytes": 0.0, "pure": [3e-4, 2e-4]}))["x"]
    assert not unsized.sized and unsized.alpha == pytest.approx(2e-4)


@pytest.mark.parametrize(
    "name,kind",
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "all_reduce"),
        ("ncclKernel_AllGather_RING_LL", "all_gather"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING", "reduce_scatter"),
        ("ncclDevKernel_SendRecv", "send_recv"),
        ("ncclDevKernel_Broadcast_RING_LL", "broadcast"),
    ],
)
def test_collective_kind_from_kernel_name(name, kind):
    assert collective_kind(name) == kind


def test_separate_clocks_are_aligned_to_the_simulators_offsets(tmp_path):
    from extradeep.predictor import predict
    from extradeep.simulate import simulate

    sim = simulate(
        tmp_path,
        params={"ranks": [4]},
        repetitions=1,
        epochs=1,
        train_steps=2,
        val_steps=0,
        ddp=True,
        seed=4,
        clock_offset_ns=5e6,
    )
    truth = sim.truth["points"][0]["clock_offsets_ns"][0]
    assert any(truth)
    pred = predict(tmp_path)
    assert pred.files.sort_values("rank")["offset_ns"].tolist() == pytest.approx(truth, abs=1000)
    assert pred.steps["error"].abs().max() <= 0.03
    assert any("clocks aligned" in n for n in pred.notes)


def test_message_sizes_come_from_nccls_nvtx_ranges(ddp_run, ddp_prediction):
    import json

    truth = json.loads((ddp_run / "truth.json").read_text())["nccl_model"]
    c = ddp_prediction.collectives
    allreduce = c[c["name"].str.contains("AllReduce")]
    assert len(allreduce) > 0 and (allreduce["bytes"] == truth["bucket_bytes"]).all()
    assert (c.loc[c["name"].str.startswith("nccl"), "bytes"] > 0).all()
