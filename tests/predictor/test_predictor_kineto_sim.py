"""A simulated DDP-like run written as nsys exports and as Kineto traces replays to the same step
times, with the CUDA event waits and syncs of the Kineto traces in the graph."""

from __future__ import annotations

import numpy as np

from extradeep.predictor import predict
from extradeep.predictor.graph import EDGE_KINDS


def _edge_counts(graph) -> dict:
    kinds, counts = np.unique(graph.edge_kind, return_counts=True)
    return {EDGE_KINDS[k]: int(c) for k, c in zip(kinds, counts)}


def test_kineto_and_nsys_replay_alike(ddp_both_formats):
    nsys_paths, kineto_paths = ddp_both_formats
    assert len(nsys_paths) == len(kineto_paths) == 4
    a, b = predict(nsys_paths), predict(kineto_paths)
    key = ["rank", "epoch", "phase", "step"]
    sa = a.steps.set_index([c for c in key if c in a.steps]).sort_index()
    sb = b.steps.set_index([c for c in key if c in b.steps]).sort_index()
    assert len(sa) == len(sb) == 4 * 2 * 4
    np.testing.assert_allclose(sb["measured"].to_numpy(), sa["measured"].to_numpy(), rtol=1e-6)
    np.testing.assert_allclose(sb["replayed"].to_numpy(), sa["replayed"].to_numpy(), rtol=0.01)
    # the same dependencies: event waits and blocking syncs come from the cuda_sync rows
    ca, cb = _edge_counts(a.graph), _edge_counts(b.graph)
    assert cb.get("event", 0) > 0 and cb["event"] == ca["event"]
    assert cb["blocking"] == ca["blocking"]
