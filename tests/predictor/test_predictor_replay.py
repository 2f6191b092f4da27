"""Replaying measured durations reproduces measured step times (simulator and real export)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from extradeep.predictor import predict
from extradeep.predictor.graph import EDGE_KINDS, OpGraph
from extradeep.predictor.replay import plan_replay, replay
from extradeep.simulate.engine import WAKE_NS

REAL_2GPU = "GindaChen__nsys-ai__mfu_2gpu_before.sqlite"


def test_replay_reproduces_measured_step_times(ddp_prediction):
    steps = ddp_prediction.steps
    assert len(steps) == 4 * 2 * 4  # ranks x epochs x (train + val steps)
    err = steps["error"].abs()
    assert err.median() <= 0.03
    assert err.max() <= 0.03
    summary = ddp_prediction.summary
    base = summary[summary["scenario"] == "measured durations"]
    assert set(base["phase"]) == {"train", "val"}
    steady = steps[~steps["warmup"]]
    want = steady["error"].abs().groupby(steady["phase"]).max().reindex(base["phase"]).to_numpy()
    assert base["max_abs_error"].to_numpy() == pytest.approx(want)


def test_graph_has_every_dependency_kind_of_a_ddp_run(ddp_prediction):
    g = ddp_prediction.graph
    kinds = set(np.asarray(EDGE_KINDS)[np.unique(g.edge_kind)])
    assert {"queue", "launch", "event", "blocking", "collective"} <= kinds
    nodes = g.nodes
    # every GPU op is launched by exactly one CPU call
    launched = g.dst[g.edge_kind == EDGE_KINDS.index("launch")]
    gpu_ops = nodes.index[nodes["is_gpu"] & (nodes["role"] == "op")]
    assert np.array_equal(np.sort(launched), np.sort(gpu_ops.to_numpy()))
    # a blocking stream sync at every step end got a wake node
    wakes = nodes[nodes["role"] == "wake"]
    assert (wakes["name"].str.startswith("cudaStreamSynchronize")).sum() >= len(ddp_prediction.steps)


def test_measured_step_times_match_the_nvtx_ranges(ddp_run, ddp_prediction):
    from extradeep.io.nsys.events import nvtx
    from extradeep.io.sqlite import open_readonly
    from extradeep.io.steps import find_steps

    path = sorted(ddp_run.glob("*.mpi0.sqlite"))[0]
    with open_readonly(path) as conn:
        table = find_steps(nvtx(conn))
    want = np.sort((table.steps["end"] - table.steps["start"]).to_numpy() * 1e-9)
    got = ddp_prediction.steps
    got = np.sort(got[(got["rank"] == 0) & ~got["warmup"]]["measured"].to_numpy())
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12)


def test_real_two_gpu_export_replays_its_span(real_2gpu):
    path, pred = real_2gpu
    for p, tol in ((pred, 0.03), (predict(path, gpu_gaps="keep"), 1e-3)):
        span = p.steps
        assert list(span["phase"].unique()) == ["span"] and len(span) == 2
        assert (span["error"].abs() <= tol).all(), span
    assert any("no NVTX step marks" in n for n in pred.notes)
    assert len(pred.collectives) == 33 and (pred.collectives["ranks"] == 2).all()


def _graph(dur, edges, release, gap=None, lag=None) -> OpGraph:
    n = len(dur)
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    order = np.argsort(dst, kind="stable")
    nodes = pd.DataFrame({"name": [f"op{i}" for i in range(n)], "rank": 0, "role": "op"})
    return OpGraph(
        nodes=nodes,
        src=src[order],
        dst=dst[order],
        lag=np.zeros(len(src)) if lag is None else np.asarray(lag, float)[order],
        edge_kind=np.zeros(len(src), dtype=int),
        dur=np.asarray(dur, float),
        gap=np.zeros(n) if gap is None else np.asarray(gap, float),
        release=np.asarray(release, float),
        coll_offset=np.zeros(n),
    )


def _brute_force(g: OpGraph):
    """Reference: relax every edge until nothing changes (Bellman-Ford style longest path)."""
    has_pred = np.zeros(g.n, bool)
    has_pred[g.dst] = True
    start = np.where(has_pred, 0.0, g.release + g.gap)
    for _ in range(g.n + 1):
        cand = np.full(g.n, -np.inf)
        np.maximum.at(cand, g.dst, start[g.src] + g.dur[g.src] + g.lag)
        new = np.where(has_pred, cand + g.gap, start)
        if np.allclose(new, start):
            break
        start = new
    return start, start + g.dur


def test_level_replay_matches_brute_force_on_random_dags():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(5, 60))
        edges = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(3 * n, 2)) if a < b]
        has_pred = np.zeros(n, bool)
        for _, b in edges:
            has_pred[b] = True
        release = np.where(has_pred, -np.inf, rng.uniform(0, 1, n))
        g = _graph(
            rng.uniform(0, 1, n),
            edges,
            release,
            gap=np.where(has_pred, rng.uniform(0, 0.2, n), 0),
            lag=rng.uniform(-0.1, 0.3, len(edges)),
        )
        res = replay(g)
        want_start, want_end = _brute_force(g)
        assert np.allclose(res.start, want_start) and np.allclose(res.end, want_end)
        # each bound start is explained by its binding edge
        b = res.binding
        ok = b >= 0
        assert np.allclose(res.start[ok], res.end[g.src[b[ok]]] + g.lag[b[ok]] + g.gap[ok])


def test_walking_node_by_node_replays_exactly_what_the_level_steps_replay(ddp_prediction):
    """plan_replay picks a node-by-node walk for narrow graphs (chains: one or two ranks) and NumPy
    steps per level otherwise; both give the same timeline to the bit, with changed durations too."""
    rng = np.random.default_rng(1)
    graphs = [ddp_prediction.graph]
    for n in (8, 40, 200):
        edges = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(3 * n, 2)) if a < b]
        graphs.append(_graph(rng.uniform(0, 1, n), edges, rng.uniform(0, 1, n), lag=rng.uniform(-0.1, 0.3, len(edges))))
    for g in graphs:
        plan = plan_replay(g)
        dur = g.dur * rng.uniform(0.5, 2.0, g.n)
        walked = replay(g, dataclasses.replace(plan, walk=True), dur=dur)
        stepped = replay(g, dataclasses.replace(plan, walk=False), dur=dur)
        assert np.array_equal(walked.start, stepped.start) and np.array_equal(walked.end, stepped.end)
        assert np.array_equal(walked.binding, stepped.binding)


def test_a_dependency_cycle_is_reported():
    g = _graph([1, 1, 1], [(0, 1), (1, 2), (2, 1)], [0, -np.inf, -np.inf])
    with pytest.raises(ValueError, match="cycle"):
        plan_replay(g)


def test_every_real_export_replays_or_is_refused_in_one_line(real_nsys_dir, predicted):
    from extradeep.errors import InputError

    replayed = 0
    for path in sorted(real_nsys_dir.glob("*.sqlite")):
        if path.name == REAL_2GPU:
            continue  # replayed in its own test
        try:
            pred = predicted(path)
        except InputError as exc:
            assert "no CUDA activity" in str(exc) and "\n" not in str(exc)
            continue
        replayed += 1
        assert (pred.steps["error"].abs() <= 0.03).all(), (path.name, pred.steps)
        b = pred.breakdown
        assert np.allclose(b[["compute", "communication", "memory", "cpu_overhead", "idle"]].sum(axis=1), b["span"])
    assert replayed >= 7


@pytest.mark.parametrize("marks", ["marks", "profiler"])
def test_replay_with_other_step_conventions_and_the_2022_schema(tmp_path, marks):
    from extradeep.simulate import simulate

    simulate(
        tmp_path,
        params={"ranks": [2]},
        repetitions=1,
        epochs=2,
        train_steps=2,
        val_steps=1,
        marks=marks,
        layout="2022",
        ddp=True,
        seed=2,
    )
    pred = predict(tmp_path)
    assert len(pred.steps) == 2 * 2 * 3
    assert pred.steps["error"].abs().max() <= 0.03


def test_a_blocking_call_hands_its_time_to_its_wake(ddp_prediction):
    """The call -> wake queue edge duplicates the blocking edge; the call must still arrive (duration
    0), else its measured time is counted twice: once on the call, once on its wake."""
    g = ddp_prediction.graph
    nodes = g.nodes
    key = ["rank", "queue", "start", "name"]
    wakes = nodes[nodes["role"] == "wake"][key].reset_index(names="wake")
    pairs = nodes[nodes["role"] == "op"][key].reset_index(names="call").merge(wakes, on=key)
    calls, wake_ids = pairs["call"].to_numpy(), pairs["wake"].to_numpy()
    assert len(pairs) == len(wakes) >= len(ddp_prediction.steps)
    assert np.all(g.dur[calls] == 0.0)
    # counted once: the call and its wake together hold at most the call's measured time
    measured = (nodes["end"] - nodes["start"]).to_numpy()
    assert np.all(g.dur[calls] + g.dur[wake_ids] <= measured[calls] + 1e-12)
    # what remains after the wait is the simulator's wake-up time
    assert np.allclose(g.dur[wake_ids], WAKE_NS * 1e-9, atol=2e-9)
