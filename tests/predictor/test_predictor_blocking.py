"""Which calls block (`predictor.blocking`): on the real traces an asynchronous copy into pageable
host memory waits for its copy and gets a wake; other copies do not."""

from __future__ import annotations

import pytest

from extradeep.predictor.graph import EDGE_KINDS

pytestmark = pytest.mark.real


def _events(plain_json, path):
    return [e for e in plain_json(path)["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]


@pytest.mark.parametrize(
    "trace",
    [
        "HTA__trace_diff_control_control.json.gz",
        "HTA__trace_diff_test_test.json.gz",
        "HTA__trace_filter_sampled_rank-0.json.gz",
    ],
)
def test_pageable_copies_are_waits_and_the_others_are_not(trace, real_kineto, plain_json, predicted):
    """cudaMemcpyAsync to pageable host memory waits for its copy (CUDA's documented behaviour);
    copies from pinned memory and on the device do not, whatever their timing."""
    path = real_kineto(trace)
    events = _events(plain_json, path)
    copy_of = {e["args"]["correlation"]: e["name"] for e in events if e.get("cat") == "gpu_memcpy"}
    pageable = {c for c, n in copy_of.items() if n.startswith("Memcpy DtoH") and "Pageable" in n}
    graph = predicted(path).graph
    n = graph.nodes
    blocking = (graph.edge_kind == EDGE_KINDS.index("blocking")) & (n["role"].to_numpy()[graph.dst] == "wake")
    calls = graph.src[blocking & (n["name"].to_numpy()[graph.src] == "cudaMemcpyAsync")]
    waited = set(n["corr"].to_numpy()[calls].tolist())
    assert pageable and waited == pageable
