"""Causal structure of the simulated traces: streams, launches, steps, events, collectives."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from extradeep.simulate import simulate

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def _gpu(conn):
    sql = " UNION ALL ".join(f"SELECT start, end, streamId, correlationId FROM {t}" for t in GPU_TABLES)
    return np.array(conn.execute(sql).fetchall(), dtype=np.int64)


def test_ops_on_one_stream_never_overlap(all_sims, ro):
    for sim in all_sims:
        for path in sim.files.path:
            with ro(path) as conn:
                gpu = _gpu(conn)
            for sid in np.unique(gpu[:, 2]):
                on = gpu[gpu[:, 2] == sid]
                on = on[np.argsort(on[:, 0])]
                assert (on[1:, 0] >= on[:-1, 1]).all(), (path, sid)
                assert (on[:, 1] > on[:, 0]).all()


def test_every_gpu_op_starts_after_its_one_launch_call(all_sims, ro):
    for sim in all_sims:
        for path in sim.files.path:
            with ro(path) as conn:
                rows = conn.execute(
                    "SELECT g.start, r.start, r.correlationId FROM ("
                    + " UNION ALL ".join(f"SELECT start, correlationId FROM {t}" for t in GPU_TABLES)
                    + ") g JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"
                ).fetchall()
                n_gpu = len(_gpu(conn))
            assert len(rows) == n_gpu  # exactly one runtime call per GPU op
            assert all(g > r for g, r, _ in rows), path


def test_step_ranges_enclose_their_launches(sim_default, ro):
    for path in sim_default.files.path:
        with ro(path) as conn:
            bad = conn.execute(
                "SELECT count(*) FROM NVTX_EVENTS s JOIN CUPTI_ACTIVITY_KIND_KERNEL k"
                " ON k.start >= s.start AND k.start < s.end"
                " JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId"
                " WHERE s.eventType = 59 AND s.category IN (2, 3)"
                " AND (r.start < s.start OR r.end > s.end OR k.end > s.end)"
            ).fetchone()[0]
            inside = conn.execute(
                "SELECT count(*) FROM NVTX_EVENTS s JOIN CUPTI_ACTIVITY_KIND_RUNTIME r"
                " ON r.start >= s.start AND r.start < s.end WHERE s.eventType = 59 AND s.category IN (2, 3)"
            ).fetchone()[0]
        assert bad == 0 and inside > 0


def test_stream_waits_order_work_after_the_recorded_event(sim_ddp, ro):
    with ro(sim_ddp.files.path[2]) as conn:
        waits = conn.execute(
            "SELECT w.streamId, w.correlationId, e.timestamp FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION w"
            " JOIN CUPTI_ACTIVITY_KIND_CUDA_EVENT e ON e.eventSyncId = w.eventSyncId"
            " WHERE w.syncType = 2"
        ).fetchall()
        gpu = _gpu(conn)
        assert len(waits) > 20
        for sid, wait_corr, done in waits:  # work issued after the wait (larger correlationId)
            later = gpu[(gpu[:, 2] == sid) & (gpu[:, 3] > wait_corr)]
            assert len(later) and (later[:, 0] >= done).all()


def test_collectives_end_together_across_ranks(sim_ddp, ro):
    ends = []
    for path in sim_ddp.files.path:
        with ro(path) as conn:
            ends.append(
                [
                    r[0]
                    for r in conn.execute(
                        "SELECT k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
                        " WHERE s.value LIKE 'nccl%' ORDER BY k.start"
                    )
                ]
            )
    ends = np.array(ends)
    assert ends.shape[1] > 10
    assert (ends.max(axis=0) - ends.min(axis=0) <= 1).all()


def test_ddp_has_a_launch_bound_phase_and_imbalance(sim_ddp, ro):
    with ro(sim_ddp.files.path[0]) as conn:
        tiny = conn.execute(
            "SELECT avg(k.end - k.start), avg(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN StringIds s ON s.id = k.shortName JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"
            " WHERE s.value = 'unrolled_elementwise_kernel'"
        ).fetchone()
        gaps = conn.execute(
            "SELECT count(*) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId WHERE s.value = 'pthread_cond_wait'"
        ).fetchone()[0]
    assert tiny[0] < tiny[1]  # the GPU finishes each tiny kernel faster than the CPU launches the next
    assert gaps == 2 * (5 + 2)
    per_rank = []
    for path in sim_ddp.files.path:
        with ro(path) as conn:
            per_rank.append(
                conn.execute(
                    "SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s"
                    " ON s.id = k.shortName WHERE s.value LIKE 'sm80_xmma%'"
                ).fetchone()[0]
            )
    assert per_rank[-1] > 1.04 * per_rank[0]  # the last rank is slower


def test_same_seed_same_bytes_and_what_if_changes_only_its_kernels(tmp_path, ro):
    kw = dict(params={"ranks": [2]}, repetitions=1, ddp=True)
    a = simulate(tmp_path / "a", **kw)
    b = simulate(tmp_path / "b", **kw)
    c = simulate(tmp_path / "c", kernel_scale={"*gemm*": 0.5}, **kw)
    digest = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()  # noqa: E731
    assert [digest(p) for p in a.files.path] == [digest(p) for p in b.files.path]
    q = (
        "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
        " WHERE s.value NOT LIKE 'nccl%' ORDER BY k.correlationId"
    )
    with ro(a.files.path[0]) as ca, ro(c.files.path[0]) as cc:
        base, scaled = ca.execute(q).fetchall(), cc.execute(q).fetchall()
    assert [n for n, _ in base] == [n for n, _ in scaled]
    for (name, d0), (_, d1) in zip(base, scaled):
        factor = 0.5 if "gemm" in name.lower() else 1.0
        assert d1 == pytest.approx(d0 * factor, abs=2), name
    step = lambda s: s.truth["points"][0]["step_time"]["train"]  # noqa: E731
    assert step(c) < step(a)


def test_nccl_bandwidth_scale_halves_the_bandwidth_term(tmp_path):
    kw = dict(params={"ranks": [4]}, repetitions=1, noise=(0, 0, 0), train_steps=2, val_steps=1)
    base = simulate(tmp_path / "a", **kw).truth
    fast = simulate(tmp_path / "b", nccl_bandwidth_scale=2.0, **kw).truth
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    terms = {
        s: next(r for r in t["regions"] if r["region"] == name)["models"]["train"]["time"]["terms"]
        for s, t in (("base", base), ("fast", fast))
    }
    assert terms["base"][0] == terms["fast"][0]  # latency unchanged
    assert terms["fast"][1]["coefficient"] == pytest.approx(terms["base"][1]["coefficient"] / 2)


def test_fused_buckets_and_nccl_payload_sizes(tmp_path, ro):
    sim = simulate(tmp_path, params={"ranks": [2]}, repetitions=1, buckets=1, train_steps=2, val_steps=1)
    with ro(sim.files.path[0]) as conn:
        sizes = [r[0] for r in conn.execute("SELECT uint64Value FROM NVTX_EVENTS WHERE text = 'ncclAllReduce'")]
        kernels = conn.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
            " WHERE s.value = 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'"
        ).fetchone()[0]
    assert sizes == [94_000_000] * 4 and kernels == 4  # one fused all-reduce per training step
    formula = next(r for r in sim.truth["regions"] if r["region"].startswith("ncclDevKernel_AllReduce"))
    assert formula["models"]["train"]["time"]["formula"].startswith("0.00015 + ")


@pytest.mark.parametrize("layout", ["2026", "2022"])
@pytest.mark.parametrize("marks", ["ranges", "marks", "profiler"])
@pytest.mark.parametrize("strings", ["text", "textId"])
def test_every_mark_style_in_every_layout(tmp_path, ro, layout, marks, strings):
    sim = simulate(
        tmp_path,
        params={"ranks": [2]},
        repetitions=1,
        train_steps=2,
        val_steps=1,
        layout=layout,
        marks=marks,
        nvtx_strings=strings,
        truth_replicates=0,
    )
    with ro(sim.files.path[1]) as conn:
        names = conn.execute(
            "SELECT n.eventType, n.category, coalesce(n.text, s.value) FROM NVTX_EVENTS n"
            " LEFT JOIN StringIds s ON s.id = n.textId"
        ).fetchall()
    texts = [t for _, _, t in names]
    assert all(texts)
    if marks == "ranges":
        assert sum(1 for e, c, _ in names if e == 59 and c == 2) == 2 * 2
        assert {(t, c) for e, c, t in names if e == 33} == {("epoch", 1), ("training_step", 2), ("testing_step", 3)}
    elif marks == "marks":
        assert sum(1 for e, c, t in names if e == 34 and c == 2 and t.endswith("type:started")) == 2 * 2
        assert ("epoch:1,type:ended" in texts) and ("step:0,type:started" in texts)
    else:
        assert [t for t in texts if t.startswith("ProfilerStep#")] == [f"ProfilerStep#{k}" for k in range(6)]
    mpi_as_nvtx = sum(1 for t in texts if t.startswith("MPI_"))
    assert mpi_as_nvtx == (4 if layout == "2022" else 0)


def test_clock_offsets_shift_every_timestamp_of_a_rank(tmp_path, ro):
    kw = dict(params={"ranks": [3]}, repetitions=1, train_steps=1, val_steps=1, truth_replicates=0)
    plain = simulate(tmp_path / "a", **kw)
    shifted = simulate(tmp_path / "b", clock_offset_ns=5e6, **kw)
    offsets = shifted.truth["points"][0]["clock_offsets_ns"][0]
    assert offsets[0] == 0 and all(0 < abs(o) <= 5e6 for o in offsets[1:])
    q = (
        "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start FROM NVTX_EVENTS"
        " UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL SELECT start FROM OSRT_API"
    )
    for rank in range(3):
        with ro(plain.files.path[rank]) as a, ro(shifted.files.path[rank]) as b:
            diff = np.array(b.execute(q).fetchall()) - np.array(a.execute(q).fetchall())
        assert (diff == offsets[rank]).all()
