"""truth.json agrees with the written rows, its formulas and the paper's epoch equations."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest

from extradeep.simulate import simulate
from extradeep.simulate.catalogue import evaluate

STEP_SQL = """
SELECT st.rowid, CASE st.category WHEN 2 THEN 'train' ELSE 'val' END, g.region, sum(g.end - g.start),
       count(*), sum(g.bytes)
FROM NVTX_EVENTS st
JOIN NVTX_EVENTS ep ON ep.eventType = 59 AND ep.category = 1 AND st.start >= ep.start AND st.end <= ep.end
JOIN (SELECT k.start, k.end, s.value AS region, NULL AS bytes FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.shortName
      UNION ALL SELECT start, end, CASE copyKind WHEN 1 THEN '[CUDA memcpy HtoD]' ELSE '[CUDA memcpy DtoH]' END,
        bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY
      UNION ALL SELECT start, end, '[CUDA memset]', bytes FROM CUPTI_ACTIVITY_KIND_MEMSET) g
  ON g.start >= st.start AND g.start < st.end
WHERE st.eventType = 59 AND st.category IN (2, 3) AND ep.text != 'epoch 0'
GROUP BY st.rowid, g.region
"""
STEP_TIME_SQL = """
SELECT st.rowid, CASE st.category WHEN 2 THEN 'train' ELSE 'val' END, 'step', st.end - st.start, 1, NULL
FROM NVTX_EVENTS st JOIN NVTX_EVENTS ep ON ep.eventType = 59 AND ep.category = 1
  AND st.start >= ep.start AND st.end <= ep.end
WHERE st.eventType = 59 AND st.category IN (2, 3) AND ep.text != 'epoch 0'
"""


def measured_per_step(files, ro) -> dict:
    """(region, phase, metric) -> median over ranks of the median over steps, from plain SQL."""
    per_rank = defaultdict(list)
    for path in files:
        steps = defaultdict(list)
        with ro(path) as conn:
            for _sid, phase, region, ns, visits, nbytes in conn.execute(STEP_SQL + " UNION ALL " + STEP_TIME_SQL):
                steps[(region, phase, "time")].append(ns / 1e9)
                steps[(region, phase, "visits")].append(visits)
                if nbytes is not None:
                    steps[(region, phase, "bytes")].append(nbytes)
        for key, values in steps.items():
            per_rank[key].append(np.median(values))
    return {key: float(np.median(v)) for key, v in per_rank.items()}


def test_truth_per_step_equals_the_rows_without_noise(sim_exact, ro):
    truth = json.loads((sim_exact.outdir / "truth.json").read_text())
    assert truth == json.loads(json.dumps(sim_exact.truth))
    for point in truth["points"]:
        measured = measured_per_step([sim_exact.outdir / f for f in point["files"]], ro)
        expected = {
            (r["region"], r["phase"], r["metric"]): r["value"]
            for r in point["per_step"]
            if r["kind"] in ("kernel", "memcpy", "memset", "step")
        }
        assert set(measured) == set(expected)
        for key, value in expected.items():
            assert measured[key] == pytest.approx(value, rel=1e-5, abs=1e-8), key


def test_formulas_reproduce_the_noise_free_values(sim_exact):
    truth = sim_exact.truth
    models = {r["region"]: r["models"] for r in truth["regions"]}
    checked = 0
    for point in truth["points"]:
        for row in point["per_step"]:
            if row["kind"] in ("kernel", "memcpy", "memset"):
                terms = [
                    (t["coefficient"], {k: tuple(v) for k, v in t["exponents"].items()})
                    for t in models[row["region"]][row["phase"]][row["metric"]]["terms"]
                ]
                assert evaluate(terms, point["params"]) == pytest.approx(row["value"], rel=1e-5, abs=1e-8)
                checked += 1
    assert checked > 100


def test_growth_classes_and_batch_dependence_are_in_the_formulas(sim_exact):
    regions = sim_exact.truth["regions"]
    models = {r["region"]: r["models"]["train"]["time"]["formula"] for r in regions if "train" in r["models"]}
    assert {r["region"] for r in regions if r["warmup_only"]} == {"fft2d_r2c_32x32", "winograd_nonfused_4x4_fwd"}
    assert {r["region"] for r in regions if r["between"]} == {"reduce_kernel", "[CUDA memcpy DtoH]"}
    assert models["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].endswith("* p * log2(p)")
    assert "p^0.5" in models["ncclDevKernel_Broadcast_RING_LL"]
    assert "log2(p)" in models["DeviceRadixSortOnesweepKernel"]
    assert models["bn_bw_1C11_kernel_new"].endswith("* b")
    assert models["[CUDA memcpy HtoD]"].count("+") == 1


def test_epoch_values_follow_the_paper_equations(sim_exact):
    truth = sim_exact.truth
    d = truth["dataset"]
    for point in truth["points"]:
        ranks, batch = point["params"]["ranks"], point["params"]["batch"]
        assert point["n_t"] == math.floor(d["train_samples"] / ranks / batch)
        assert point["n_v"] == math.floor(d["val_samples"] / ranks / batch)
        step = point["step_time"]
        assert point["epoch_time"] == pytest.approx(point["n_t"] * step["train"] + point["n_v"] * step["val"])
        per_step = {(r["region"], r["phase"]): r["value"] for r in point["per_step"] if r["metric"] == "time"}
        per_epoch = {r["region"]: r["value"] for r in point["per_epoch"] if r["metric"] == "time"}
        name = "bn_fw_tr_1C11_kernel_NCHW"
        assert per_epoch[name] == pytest.approx(
            point["n_t"] * per_step[(name, "train")] + point["n_v"] * per_step[(name, "val")]
        )
        by_cat = point["epoch_time_by_category"]
        # compute and memory share one stream (serial); communication overlaps them
        assert by_cat["computation"] + by_cat["memory"] < point["epoch_time"] < sum(by_cat.values()) * 1.2


def test_noisy_rows_scatter_around_the_expected_values(sim_default, ro):
    point = sim_default.truth["points"][1]
    measured = measured_per_step([sim_default.outdir / f for f in point["files"]], ro)
    rows = [
        r for r in point["per_step"] if r["kind"] in ("kernel", "memcpy", "memset", "step") and r["metric"] == "time"
    ]
    errors = {
        r["region"] + "/" + r["phase"]: abs(measured[(r["region"], r["phase"], "time")] / r["expected"] - 1)
        for r in rows
    }
    local = [e for k, e in errors.items() if not k.startswith("nccl")]
    assert np.median(local) < 0.05 and max(local) < 0.15, errors
    assert any(e > 0 for e in local)  # noise is really there
    # collectives wait for the slowest rank: one run's wait varies a lot, but never goes negative
    nccl = next(r for r in rows if r["region"] == "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    assert nccl["expected"] > nccl["value"]
    assert measured[(nccl["region"], "train", "time")] > 0.98 * nccl["value"]


def test_file_names_follow_the_extradeep_convention(sim_exact):
    names = set(sim_exact.files.path.map(lambda p: p.rsplit("/", 1)[-1]))
    assert "cifar10.p4.b64.r1.mpi3.sqlite" in names and "cifar10.p2.b32.r1.mpi0.sqlite" in names
    assert len(names) == (2 + 4) * 2


def test_cpu_side_visits_are_counted_per_step(sim_exact):
    point = sim_exact.truth["points"][0]
    visits = {(r["region"], r["kind"], r["phase"]): r["value"] for r in point["per_step"] if r["metric"] == "visits"}
    assert visits[("cudaStreamSynchronize_v3020", "cuda_api", "train")] == 1
    assert visits[("cudnnConvolutionForward", "cudnn", "val")] == 2 + 2  # two conv kernels, two fprop
    assert visits[("ncclAllReduce", "nccl_nvtx", "train")] == 2


def test_extra_parameters_scale_compute_and_name_files(tmp_path):
    sim = simulate(
        tmp_path, params={"ranks": [2], "seq": [128, 256]}, repetitions=1, train_steps=1, val_steps=1, noise=(0, 0, 0)
    )
    names = sorted(p.rsplit("/", 1)[-1] for p in sim.files.path)
    assert names[0] == "cifar10.p2.s128.r1.mpi0.sqlite"
    gemm = next(r for r in sim.truth["regions"] if r["region"] == "implicit_convolve_sgemm")
    assert gemm["models"]["train"]["time"]["formula"] == "4.6875e-05 * s"  # 6 ms at s = 128
    values = [
        next(
            r["value"]
            for r in p["per_step"]
            if r["region"] == "implicit_convolve_sgemm" and r["metric"] == "time" and r["phase"] == "train"
        )
        for p in sim.truth["points"]
    ]
    assert values[1] == pytest.approx(2 * values[0])


def test_truth_lists_only_kinds_the_layout_can_hold(sim_2022):
    kinds = {r["kind"] for p in sim_2022.truth["points"] for r in p["per_step"]}
    assert kinds == {"kernel", "memcpy", "memset", "step", "cuda_api", "nccl_nvtx"}


def test_ddp_collectives_follow_the_ring_cost_model(tmp_path):
    truth = simulate(
        tmp_path,
        params={"ranks": [1, 8]},
        repetitions=1,
        ddp=True,
        noise=(0, 0, 0),
        train_steps=2,
        val_steps=1,
        imbalance=0.0,
    ).truth
    m = truth["nccl_model"]
    a, bw, launch, size = m["alpha_s"], m["bandwidth_Bps"], m["launch_s"], m["bucket_bytes"]
    for point in truth["points"]:
        p = point["params"]["ranks"]
        got = next(
            r
            for r in point["per_step"]
            if r["region"] == "ncclDevKernel_AllReduce_Sum_f32_RING_LL" and r["metric"] == "time"
        )["value"]
        assert got == pytest.approx(4 * (launch + 2 * (p - 1) * a + 2 * (p - 1) / p * size / bw), rel=1e-6)
