"""read_export: per-step sums against simulator truth, an independent oracle, launch-time assignment,
conservation of events, and the output contract."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from extradeep.io.nsys.read import read_export
from extradeep.io.settings import ReaderSettings
from extradeep.io.sums import OUTPUT_COLUMNS

GPU_KINDS = ("kernel", "memcpy", "memset", "step")
# CPU-side kinds whose visits truth.json lists (it leaves out OS calls of helper threads and user NVTX)
CPU_KINDS = ("cuda_api", "mpi", "cudnn", "cublas", "nccl_nvtx")


def per_step_medians(df: pd.DataFrame) -> dict:
    """(region, kind, phase, metric) -> median over the file's steps, absent steps counting as 0."""
    n_steps = df[(df["region"] == "step") & (df["metric"] == "visits")].groupby("phase").size()
    out = {}
    for key, group in df[df["phase"] != "between"].groupby(["region", "kind", "phase", "metric"]):
        values = list(group["value"]) + [0.0] * (n_steps[key[2]] - len(group))
        out[key] = float(np.median(values))
    return out


@pytest.mark.parametrize("fixture", ["sim_ranges", "sim_marks_old", "sim_profiler"])
def test_per_step_values_match_truth(request, truth_of, fixture):
    """Median over steps per file, then over the rank files of a point, equals the noise-free truth:
    every metric of GPU regions and steps, visits of CPU-side calls on the main thread. Regions the
    truth does not list must be absent (0)."""
    outdir = request.getfixturevalue(fixture)
    truth = truth_of(outdir)
    checked = 0
    for point in truth["points"]:
        per_file = [per_step_medians(read_export(outdir / name)) for name in point["files"]]
        expected = {(r["region"], r["kind"], r["phase"], r["metric"]): r["value"] for r in point["per_step"]}
        for key in set(expected) | {k for medians in per_file for k in medians}:
            region, kind, phase, metric = key
            if kind not in GPU_KINDS + CPU_KINDS or (kind in CPU_KINDS and metric != "visits"):
                continue
            value = np.median([medians.get(key, 0.0) for medians in per_file])
            assert value == pytest.approx(expected.get(key, 0.0), rel=1e-4), key
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("fixture", ["sim_ranges", "sim_marks_old"])
def test_between_steps_per_epoch_match_truth(request, truth_of, fixture):
    outdir = request.getfixturevalue(fixture)
    truth = truth_of(outdir)
    for point in truth["points"]:
        expected = {(r["region"], r["kind"], r["metric"]): r["value"] for r in point["between_per_epoch"]}
        assert expected
        for name in point["files"]:
            df = read_export(outdir / name)
            between = df[(df["phase"] == "between") & df["kind"].isin(GPU_KINDS)]
            assert (between["step"] == -1).all()
            for epoch, group in between.groupby("epoch"):
                got = group.groupby(["region", "kind", "metric"])["value"].sum().to_dict()
                assert got.keys() == expected.keys()
                for key, value in expected.items():
                    assert got[key] == pytest.approx(value, rel=1e-6), (epoch, key)


def naive_kernel_sums(path, steps: pd.DataFrame, sql) -> dict:
    """Oracle: kernels placed by their launching runtime call, with plain Python loops over SQL rows."""
    names = dict(sql(path, "SELECT id, value FROM StringIds"))
    launch = {
        ((tid >> 24) & 0xFFFFFF, corr): start
        for start, tid, corr in sql(path, "SELECT start, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    }
    sums = defaultdict(float)
    spans = list(steps.itertuples(index=False))
    for start, end, pid_global, corr, name in sql(
        path, "SELECT start, end, globalPid, correlationId, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ):
        t = launch.get(((pid_global >> 24) & 0xFFFFFF, corr), start)
        for s in spans:
            if s.start <= t < s.end:
                sums[(names[name], s.epoch, s.phase, s.step)] += (end - start) * 1e-9
                break
    return sums


def test_bucketing_equals_naive_oracle(sim_profiler, sql):
    from extradeep.io.nsys import events
    from extradeep.io.sqlite import open_readonly
    from extradeep.io.steps import find_steps

    path = sorted(sim_profiler.glob("*.sqlite"))[-1]
    steps = find_steps(events.nvtx(open_readonly(path)), None, path).steps
    expected = naive_kernel_sums(path, steps, sql)
    df = read_export(path)
    got = df[(df["kind"] == "kernel") & (df["metric"] == "time") & (df["phase"] != "between")]
    got = {(r.region, r.epoch, r.phase, r.step): r.value for r in got.itertuples()}
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15)


def test_gpu_work_follows_its_launch_not_its_own_start(tmp_path, sim_ranges, altered_copy, sql):
    """Move one kernel's execution far past its step (it still belongs to the launching step), then move
    the launch call of another kernel into the next step (that kernel moves with it)."""
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    base = read_export(src)
    steps = base[(base["region"] == "step") & (base["metric"] == "time")]
    # a kernel that runs once per training step
    visits = base[(base["kind"] == "kernel") & (base["metric"] == "visits") & (base["phase"] == "train")]
    once = visits.groupby("region")["value"].agg(["max", "size"])
    name = once[(once["max"] == 1) & (once["size"] == (steps["phase"] == "train").sum())].index[0]
    name_id = sql(src, f"SELECT id FROM StringIds WHERE value = '{name}'")[0][0]
    nvtx_steps = sql(
        src, "SELECT start, end FROM NVTX_EVENTS WHERE eventType = 59 AND text LIKE 'train step %' ORDER BY start"
    )
    first, second = nvtx_steps[-2], nvtx_steps[-1]  # last epoch: train steps 2 and 3
    kernel = f"(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE shortName = {name_id} AND start > {first[0]} ORDER BY start LIMIT 1)"
    late = altered_copy(
        src,
        tmp_path,
        f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 5000000000, "
        f"end = end + 5000000000 WHERE rowid = {kernel}",
        name="late.sqlite",
    )
    df = read_export(late)
    count = df[(df["region"] == name) & (df["metric"] == "visits") & (df["phase"] == "train")]
    assert count.groupby("step")["value"].sum().to_dict() == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}
    corr = sql(src, f"SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = {kernel}")[0][0]
    moved = altered_copy(
        src,
        tmp_path,
        f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = {second[0] + 10}, "
        f"end = {second[0] + 20} WHERE correlationId = {corr}",
        name="moved.sqlite",
    )
    df = read_export(moved)
    count = df[(df["region"] == name) & (df["metric"] == "visits") & (df["phase"] == "train")]
    assert count.groupby("step")["value"].sum().to_dict() == {0: 1.0, 1: 1.0, 3: 2.0}


def test_every_event_is_counted_once_or_reported(sim_ranges, sql):
    """Visits over all buckets plus `not_counted` equal the rows of every table read (NVTX ranges
    other than the step and epoch marks)."""
    from extradeep.io.nsys import events
    from extradeep.io.sqlite import open_readonly
    from extradeep.io.steps import find_steps

    path = sorted(sim_ranges.glob("*.sqlite"))[0]
    df = read_export(path)
    tables = [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "OSRT_API",
        "CUBLAS_EVENTS",
        "CUDNN_EVENTS",
        "MPI_COLLECTIVES_EVENTS",
    ]
    present = {r[0] for r in sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(tables) <= present
    total = sum(sql(path, f"SELECT count(*) FROM {t}")[0][0] for t in tables)
    marks = find_steps(events.nvtx(open_readonly(path)), None, path).mark_rows
    total += sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)")[0][0] - len(marks)
    counted = df[(df["metric"] == "visits") & (df["kind"] != "step")]["value"].sum()
    assert df.attrs["not_counted"] > 0  # the warm-up epoch
    assert counted + df.attrs["not_counted"] == total


def test_output_contract(sim_marks_old):
    path = sorted(sim_marks_old.glob("*.sqlite"))[0]
    df = read_export(path, ReaderSettings())
    assert list(df.columns) == OUTPUT_COLUMNS
    assert set(df["phase"]) == {"train", "val", "between"}
    assert set(df["metric"]) == {"time", "visits", "bytes"}
    assert (df["value"] != 0).all()
    assert df.loc[df["phase"] == "between", "step"].eq(-1).all()
    assert set(df["category"]) <= {
        "computation",
        "communication",
        "memory",
        "nvtx",
        "cuda_api",
        "os",
        "library",
        "step",
    }
    nccl = df["region"].str.startswith("nccl") & (df["kind"] == "kernel")
    assert nccl.any() and (df.loc[nccl, "category"] == "communication").all()
    step_time = df[(df["region"] == "step") & (df["metric"] == "time")]
    assert step_time["value"].between(1e-4, 10).all()  # seconds, not nanoseconds
    assert df.attrs["n_steps"] == {"train": 4, "val": 2}
    assert "Extra-Deep marks" in df.attrs["convention"]["train"]
    # 2022 layout: MPI calls are NVTX ranges in the "MPI" domain, read as communication, not as NVTX.
    # The simulator calls MPI between epochs: counted as "between" of the earlier epoch once epoch 0 is kept.
    full = read_export(path, {"warmup_epochs": 0})
    mpi = full[full["kind"] == "mpi"]
    assert set(mpi["region"]) == {"MPI_Allreduce", "MPI_Barrier"} and (mpi["category"] == "communication").all()
    assert set(zip(mpi["epoch"], mpi["phase"])) == {(0, "between")}
    assert not full[full["kind"] == "nvtx"]["region"].str.startswith("MPI_").any()


def test_demangled_names_setting(sim_ranges):
    path = sorted(sim_ranges.glob("*.sqlite"))[0]
    short, long = read_export(path), read_export(path, {"kernel_names": "demangled"})
    k_short, k_long = short[short["kind"] == "kernel"], long[long["kind"] == "kernel"]
    assert set(k_short["region"]) != set(k_long["region"])
    assert k_short["value"].sum() == pytest.approx(k_long["value"].sum())
    nccl = k_long[k_long["category"] == "communication"]["region"]
    assert len(nccl) and nccl.str.contains("nccl", case=False).all()


def test_real_nvtx_only_export_with_user_pattern(real):
    """NVTX-only 2022.4 export (no CUPTI tables, names via textId): frames as steps by a pattern."""
    path = real("YoonKyonghwan__EfficientCenterFormer__baseline.sqlite")
    df = read_export(path, {"train_step_pattern": "3D_backbone"})
    assert set(df["kind"]) == {"step", "nvtx"}
    assert df.attrs["n_steps"] == {"train": 303}  # 304 frames, the first dropped as warm-up
    assert any("only one epoch" in n for n in df.attrs["notes"])
    visits = df[(df["metric"] == "visits") & (df["kind"] == "nvtx")]
    assert visits["value"].sum() + df.attrs["not_counted"] == 1824 - 304
