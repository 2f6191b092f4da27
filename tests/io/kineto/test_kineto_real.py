"""Every real Kineto trace: inspect, per-step sums and predict agree with a direct count over the JSON."""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pytest

from extradeep.cli import main
from extradeep.io.formats import KINETO
from extradeep.io.kineto.inspect import inspect_trace
from extradeep.io.read import read_profile

pytestmark = pytest.mark.real


def _complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]


def _is_nccl(name: str) -> bool:
    return name.lower().removeprefix("void ").lstrip().startswith("nccl")


def test_inspect_counts_match_the_json(real_trace, plain_json):
    doc = plain_json(real_trace)
    events = _complete(doc)
    by_cat = Counter(e.get("cat") for e in events)
    kernels = [e["name"] for e in events if e.get("cat") == "kernel"]
    info = inspect_trace(real_trace)
    assert {k: v for k, v in info["trace_categories"].items() if not k.startswith("flow:")} == {
        str(k): v for k, v in by_cat.items()
    }
    counts = info["counts_by_category"]
    assert counts["computation"] + counts["communication"] == len(kernels)
    assert counts["communication"] == sum(map(_is_nccl, kernels)) == info["nccl_kernels"]
    assert counts["memory"] == by_cat["gpu_memcpy"] + by_cat["gpu_memset"]
    assert counts["cuda_api"] == by_cat["cuda_runtime"] + by_cat["cuda_driver"]
    dist = doc.get("distributedInfo") or {}
    assert info["rank"] == dist.get("rank") and info["world_size"] == dist.get("world_size")
    assert len(info["gpus"]) == len(doc.get("deviceProperties") or [])
    flows = sum(1 for e in doc["traceEvents"] if e.get("ph") in ("s", "f", "t"))
    assert sum(v for k, v in info["trace_categories"].items() if k.startswith("flow:")) == flows


def test_step_sums_match_the_json(real_trace, plain_json):
    """Steps = ProfilerStep ranges (first one warm-up); kernel visits = kernels whose launching runtime
    call (same correlation id) starts inside a kept step, counted here straight from the JSON."""
    doc = plain_json(real_trace)
    events = _complete(doc)
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("cpu_op", "user_annotation") and e["name"].startswith("ProfilerStep#")
    )
    if not steps:
        pytest.skip("trace without ProfilerStep ranges (covered by the inspect and predict tests)")
    sha = hashlib.sha256(real_trace.read_bytes()).hexdigest()
    frame = read_profile(real_trace)
    assert hashlib.sha256(real_trace.read_bytes()).hexdigest() == sha  # inputs are read-only
    assert frame.attrs["format"] == KINETO
    kept = steps[1:] if len(steps) > 1 else steps
    step_rows = frame[(frame["region"] == "step") & (frame["metric"] == "time")]
    np.testing.assert_allclose(
        np.sort(step_rows["value"].to_numpy()), np.sort([float(b - a) * 1e-6 for a, b in kept]), rtol=0, atol=1e-12
    )
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    expected = 0
    for e in events:
        if e.get("cat") == "kernel":
            t = launch.get(e.get("args", {}).get("correlation"), e["ts"])
            expected += any(a <= t < b for a, b in kept)
    visits = frame[(frame["kind"] == "kernel") & (frame["metric"] == "visits") & (frame["phase"] == "train")]
    assert visits["value"].sum() == expected
    assert (frame["value"] >= 0).all()


@pytest.mark.slow
def test_predict_and_inspect_cli_without_traceback(real_trace, capsys):
    """One line on error (the CPU-only trace has nothing to replay), never a traceback."""
    assert main(["inspect", str(real_trace)]) == 0
    code = main(["predict", str(real_trace)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if "cpu_only" in real_trace.name:
        assert code == 2 and "CPU-only" in err
    else:
        assert code == 0 and "Step time" in out


def test_multi_rank_replay_matches_measured(real_kineto):
    """Two ranks of one 128-rank job: NCCL kernels match across the ranks and the replay reproduces
    the measured step time."""
    from extradeep.predictor import predict

    paths = [real_kineto(f"HTA__trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
    pred = predict(paths)
    assert pred.collectives["ranks"].min() == 2 and len(pred.collectives) == 10
    steps = pred.steps[pred.steps["phase"] == "train"]
    assert np.abs(steps["error"].to_numpy()).max() < 0.01


def test_nccl_message_sizes_from_collective_metadata(real_kineto, plain_json):
    from extradeep.io.kineto.load import load

    path = real_kineto("HTA__nccl_parser_config_nccl_data.json.gz")
    width = {"Float": 4, "Long": 8}  # the dtypes this trace's collectives use
    expected = sorted(
        int(e["args"]["In msg nelems"]) * width[e["args"]["dtype"]]
        for e in _complete(plain_json(path))
        if e.get("cat") == "kernel" and "In msg nelems" in e["args"]
    )
    gpu = load(path).gpu
    assert expected and sorted(gpu.loc[gpu["msg_bytes"] > 0, "msg_bytes"]) == expected


@pytest.mark.parametrize(
    "trace, src, dst",
    [
        # HolisticTraceAnalysis's own tests expect these GPU->GPU sync edges (cudaEventRecord on one stream,
        # cudaStreamWaitEvent on another) in its critical-path test traces
        (
            "HTA__critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz",
            ("ampere_sgemm_128x64_nn", "gpu0/s20"),
            ("[CUDA memset]", "gpu0/s24"),
        ),
        (
            "HTA__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
            ("fft2d_c2r_32x32", "gpu0/s20"),
            ("elementwise_kernel", "gpu0/s7"),
        ),
    ],
)
def test_event_waits_link_streams_as_hta_expects(real_kineto, trace, src, dst):
    from extradeep.predictor.graph import EDGE_KINDS, build_graph
    from extradeep.predictor.trace import load_trace

    graph = build_graph(load_trace([real_kineto(trace)], jobs=1))
    nodes, event = graph.nodes, graph.edge_kind == EDGE_KINDS.index("event")
    edges = {
        (nodes.at[s, "name"], nodes.at[s, "queue"], nodes.at[d, "name"], nodes.at[d, "queue"])
        for s, d in zip(graph.src[event], graph.dst[event])
    }
    assert (*src, *dst) in edges


@pytest.mark.parametrize(
    "trace",
    ["HTA__ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "HTA__trace_diff_test_test.json.gz"],
)
def test_critical_path_follows_the_gpu_where_it_lags(real_kineto, plain_json, trace):
    """Where a step's GPU work (launched inside its ProfilerStep range) ends after the CPU's step end,
    the path ends at that GPU op, as HolisticTraceAnalysis's does, and GPU time is on it; where the
    GPU lags by most of the step, the path is mostly GPU work. Expected windows from the JSON directly."""
    from extradeep.predictor import predict

    path = real_kineto(trace)
    events = _complete(plain_json(path))
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("cpu_op", "user_annotation") and e["name"].startswith("ProfilerStep#")
    )
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = [
        (launch.get(e["args"].get("correlation"), e["ts"]), e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    expected = []
    for lo, hi in steps[1:]:  # the first ProfilerStep is the warm-up
        tail = max(end for t, end in gpu if lo <= t < hi)
        expected.append((float(max(hi, tail) - lo), float(max(tail - hi, 0) / (hi - lo))))
    pred = predict(path, gpu_gaps="keep")  # replays the measured GPU idle too, so times are the trace's
    b = pred.breakdown.sort_values("step_id")
    np.testing.assert_allclose(b["span"], [s * 1e-6 for s, _ in expected], rtol=1e-3)
    gpu_share = (b["compute"] + b["communication"] + b["memory"]) / b["span"]
    lag = np.array([lag for _, lag in expected])
    assert (gpu_share[lag > 0.01] > 0.05).all()
    assert (gpu_share[lag > 0.8] > 0.9).all()  # ns_resolution: the GPU ends each step ~90 % of a step late
