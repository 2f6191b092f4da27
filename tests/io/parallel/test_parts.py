"""The per-part frame reproduces the simulator's truth (noise-free runs: every stage's step, compute,
communication, pure communication, idle time and memory) for both formats, and reads real profiles
without crashing."""

from __future__ import annotations

import pytest
from shared_data import GPT_TINY, real_exports, real_kineto_traces

from extradeep.columns import (
    BYTES,
    DETAIL_PARTS,
    GLOBAL_BATCH,
    IN_BACKWARD,
    LAYOUT_PARTS,
    PART,
    PART_BACKWARD,
    PART_BUBBLE,
    PART_DP,
    PART_DP_KERNELS,
    PART_FORWARD,
    PART_IDLE,
    PART_MEMORY,
    PART_OPTIMIZER,
    PART_OTHER_KERNELS,
    PART_POWER,
    PART_PP_KERNELS,
    PART_PP_P2P,
    PART_RECOMPUTE,
    PART_STEP,
    PART_TP_KERNELS,
    PEER_WAIT,
    PURE_TIME,
    TIME,
    VISITS,
    WORKLOAD,
)
from extradeep.io.discover import runs_from_names
from extradeep.io.parallel import PARTS_COLUMNS, layout_parts
from extradeep.io.parallel.parts import file_parts, part_observations, pure_times

SHAPE = {"seq": GPT_TINY["seq"], "hidden": GPT_TINY["hidden"]}
SUFFIX = {"nsys": ".sqlite", "kineto": ".pt.trace.json.gz"}


@pytest.fixture(scope="module")
def megatron_parts(gpt_studies, facts_of):
    """The per-part frame of every format of the Megatron study (from cached facts)."""
    study = gpt_studies["megatron"]
    for path in study.files["path"]:
        facts_of(path)
    out = {}
    for fmt, suffix in SUFFIX.items():
        paths = sorted(p for p in study.files["path"] if p.endswith(suffix))
        out[fmt] = layout_parts(paths, model=SHAPE, facts=facts_of.cache)
    return study, out


def test_frame_has_the_documented_columns_and_parts(megatron_parts):
    _, frames = megatron_parts
    for frame in frames.values():
        assert list(frame.columns) == PARTS_COLUMNS
        assert set(frame["part"]) <= set(LAYOUT_PARTS) | set(DETAIL_PARTS) | {PART_POWER}
        assert (frame.loc[frame["metric"].isin([TIME, PURE_TIME]), "value"] >= 0).all()
        assert not frame.attrs["problems"]


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_parts_equal_the_truth_of_every_stage(megatron_parts, fmt):
    study, frames = megatron_parts
    frame = frames[fmt]
    last = frame["step"].max()
    for entry in study.truth["layouts"]:
        for stage in entry["stages"]:
            name = next(n for n in entry["files"] if f".mpi{stage['rank']}." in n and n.endswith(SUFFIX[fmt]))
            rows = frame[(frame["path"] == str(study.outdir / name)) & (frame["step"] == last)]
            got = rows.set_index([PART, "metric"])["value"]
            assert got[(PART_STEP, TIME)] == pytest.approx(stage["step_time"], abs=2e-9)
            assert got[(PART_IDLE, TIME)] == pytest.approx(stage["idle"], abs=2e-6)
            busy, counts = dict(stage["busy"]), dict(stage["counts"])
            # the optimizer is the split's: its kernels are charged first, so busy and exposed agree
            assert got[(PART_OPTIMIZER, TIME)] == pytest.approx(
                busy.pop(PART_OPTIMIZER), abs=counts[PART_OPTIMIZER] * 1e-9
            )
            assert got[(PART_OPTIMIZER, VISITS)] == counts.pop(PART_OPTIMIZER)
            if PART_RECOMPUTE in busy:
                # the reader sees recomputation in the forward-only kernels (norm, softmax, GELU, dropout)
                # the backward pass runs again; recomputed GEMMs keep backward's share: the sum is exact
                seen = got[(PART_RECOMPUTE, TIME)]
                assert 0 < seen < busy[PART_RECOMPUTE]
                got[(PART_BACKWARD, TIME)] += seen
                got[(PART_BACKWARD, VISITS)] += got[(PART_RECOMPUTE, VISITS)]
                busy[PART_BACKWARD] += busy.pop(PART_RECOMPUTE)
                counts[PART_BACKWARD] += counts.pop(PART_RECOMPUTE)
            for part, seconds in busy.items():
                rounding = counts[part] * 1e-9  # every kernel's ends are written in whole ns
                assert got[(part, TIME)] == pytest.approx(seconds, rel=1e-9, abs=rounding), (name, part)
                assert got[(part, VISITS)] == counts[part], (name, part)
            for part, nbytes in stage["bytes"].items():
                assert got[(part, BYTES)] == nbytes, (name, part)
            for part, pure in stage["pure"].items():
                if part != PART_PP_KERNELS:  # grouped send/recv pair differently on each side: no matching
                    assert got[(part, PURE_TIME)] == pytest.approx(pure, rel=1e-4, abs=5e-8), (name, part)
            detail = {p for p, m in got.index if m == TIME and p in DETAIL_PARTS}
            assert set(busy) - {PART_OPTIMIZER} == detail - {PART_IDLE, PART_RECOMPUTE}


def test_parts_carry_the_run_layout_and_the_rank_place(megatron_parts):
    study, frames = megatron_parts
    frame = frames["kineto"]
    for entry in study.truth["layouts"]:
        lay = entry["layout"]
        rows = frame[frame["path"].str.contains(entry["label"], regex=False)]
        assert set(rows["tp"]) == {lay["tp"]} and set(rows["pp"]) == {lay["pp"]} and set(rows["dp"]) == {lay["dp"]}
        assert set(rows["micro_batches"]) == {lay["micro_batches"]} and set(rows["recompute"]) == {lay["recompute"]}
        assert set(rows["stage"]) == set(range(lay["pp"]))


def test_memory_rows_are_the_recorded_peaks(megatron_parts):
    study, frames = megatron_parts
    kineto = frames["kineto"]
    mem = kineto[kineto["part"] == PART_MEMORY]
    assert set(mem["metric"]) == {BYTES, "reserved"} and set(mem["step"]) == {-1}
    entry = study.truth["layouts"][1]
    for stage in entry["stages"]:
        name = next(n for n in entry["files"] if f".mpi{stage['rank']}." in n and n.endswith(SUFFIX["kineto"]))
        row = mem[(mem["path"] == str(study.outdir / name)) & (mem["metric"] == BYTES)]
        assert row["value"].iloc[0] == stage["memory"]["peak_allocated"]


def test_recompute_and_optimizer_are_told_apart(megatron_parts):
    study, frames = megatron_parts
    frame = frames["nsys"]
    full = frame[frame["recompute"] == "full"]
    none = frame[frame["recompute"] == "none"]
    assert (full.loc[full["part"] == PART_RECOMPUTE, "value"] > 0).all() and len(full[full["part"] == PART_RECOMPUTE])
    assert none[none["part"] == PART_RECOMPUTE].empty
    assert (frame.loc[(frame["part"] == PART_OPTIMIZER) & (frame["metric"] == VISITS), "value"] == 5).all()
    for part in (PART_FORWARD, PART_BACKWARD, PART_TP_KERNELS, PART_DP_KERNELS, PART_OTHER_KERNELS):
        assert part in set(frame["part"])


def test_real_profiles_give_parts_or_nothing_but_never_crash(real_kineto, real_nsys_dir, facts_of):
    for path in [*real_kineto_traces(), *real_exports()]:
        facts = facts_of(path)
        frame = file_parts(facts, {}, 0)
        steps = frame[frame["part"] == PART_STEP]
        assert len(steps) == len(facts.steps)
        assert (frame.loc[frame["metric"] == TIME, "value"] >= 0).all(), path.name
        per_step = frame[frame["metric"] == TIME].pivot_table(index="step", columns="part", values="value")
        if len(per_step):
            assert (per_step[PART_IDLE] <= per_step[PART_STEP] + 1e-12).all(), path.name
    runs, _ = runs_from_names(real_kineto("HTA__trace_filter_sampled_rank-0.json.gz"))
    assert pure_times(runs.assign(rank=0), {runs["path"][0]: facts_of(runs["path"][0])}, frame.iloc[:0]).empty


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_each_step_splits_exactly_into_the_layout_parts(megatron_parts, fmt):
    """The exclusive split sums to the step on every rank and step, and equals the simulator's split
    (from its own labels) except how point-to-point time divides into transfer and waiting, which
    the simulator knows exactly and a profile only bounds: there the sum holds."""
    study, frames = megatron_parts
    frame = frames[fmt]
    split = frame[frame[PART].isin(LAYOUT_PARTS) & (frame["metric"] == TIME)]
    per_step = split.pivot_table(index=["path", "step"], columns=PART, values="value", aggfunc="sum").fillna(0.0)
    parts = [p for p in per_step.columns if p != PART_STEP]
    assert (per_step[parts].sum(axis=1) - per_step[PART_STEP]).abs().max() < 1e-9
    last = frame["step"].max()
    for entry in study.truth["layouts"]:
        for stage in entry["stages"]:
            name = next(n for n in entry["files"] if f".mpi{stage['rank']}." in n and n.endswith(SUFFIX[fmt]))
            got = per_step.loc[(str(study.outdir / name), last)]
            for part, seconds in stage["split"].items():
                if part in (PART_PP_P2P, PART_BUBBLE):
                    continue
                assert got.get(part, 0.0) == pytest.approx(seconds, abs=2e-6), (name, part)
            both = got.get(PART_PP_P2P, 0.0) + got.get(PART_BUBBLE, 0.0)
            assert both == pytest.approx(stage["split"][PART_PP_P2P] + stage["split"][PART_BUBBLE], abs=2e-6)
            assert got.get(PART_PP_P2P, 0.0) <= both


def test_observations_are_the_layout_models_input(megatron_parts):
    """One row per run and LAYOUT_PARTS part, the last stage's split of one whole step, memory the
    largest peak; checked as the layout model checks its input, when that package is present."""
    study, frames = megatron_parts
    obs = part_observations(frames["kineto"], model={"layers": 4, "hidden": 256, "heads": 4, "seq": 256, "vocab": 2048})
    assert set(obs[PART]) == set(LAYOUT_PARTS)
    assert set(obs[WORKLOAD]) == {"gpt"}
    for entry in study.truth["layouts"]:
        lay = entry["layout"]
        rows = obs[
            (obs["tp"] == lay["tp"])
            & (obs["pp"] == lay["pp"])
            & (obs["dp"] == lay["dp"])
            & (obs["zero"] == lay["zero"])
            & (obs["chunks"] == lay["chunks"])
        ]
        shares = rows[rows["metric"] == IN_BACKWARD]
        values = rows[rows["metric"] != IN_BACKWARD].set_index(PART)["value"]
        # the simulator reduces gradient buckets from the autograd thread, as Megatron's DDP with
        # --overlap-grad-reduce does: every run that reduces gradients over d > 1 says so
        assert len(shares) == (lay["dp"] > 1)
        if lay["dp"] > 1:
            assert shares["value"].iloc[0] == 1.0
        assert values[PART_STEP] == pytest.approx(
            sum(values[p] for p in LAYOUT_PARTS if p not in (PART_STEP, PART_MEMORY))
        )
        assert values[PART_STEP] == pytest.approx(entry["stages"][-1]["step_time"], abs=1e-6)
        assert values[PART_MEMORY] == max(s["memory"]["peak_allocated"] for s in entry["stages"])
        assert set(rows[GLOBAL_BATCH]) == {lay["global_batch"]}
    try:
        from extradeep.layouts.tables import check_part_observations
    except ImportError:
        return  # the layout model is another package of this release
    check_part_observations(obs)


@pytest.mark.parametrize("clock_skew_ns", [0.0, 5e6])
def test_rank_skew_leaves_the_data_parallel_sync_for_the_host(tmp_path, clock_skew_ns):
    """With ranks 5% apart in speed, the faster ranks wait in the gradient reduction for the slowest:
    that wait (peer_wait) is skew, not the reduction's cost. Without it every rank's dp_sync is the
    simulator's noise-free one; the observation leaves it out of dp_sync and the step alike. Also
    when each rank's profile keeps its own clock, up to 5 ms apart (separate sessions on several
    hosts): matched collectives end together, which aligns the clocks."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import gpt_truth, simulate_gpt

    layout = "tp1.pp1.dp4.mbs1.nmb2.zero1.rc0.vpp1"
    study = simulate_gpt(
        tmp_path / "s",
        [layout],
        model=GPTModel(**GPT_TINY),
        noise=(0.0, 0.05, 0.0),
        steps=3,
        formats=("kineto",),
        seed=3,
        clock_skew_ns=clock_skew_ns,
    )
    frame = layout_parts(list(study.files["path"]))
    truth = gpt_truth(layout, GPTModel(**GPT_TINY))["parts"][PART_DP]
    # from the second measured step on: the first step's range also runs the tail of the slower
    # warmup step before it (its parameter gathers), which the split charges where it ran
    per_rank = frame[(frame[PART] == PART_DP) & (frame["step"] >= 1)].pivot_table(
        index=["path", "step"], columns="metric", values="value"
    )
    assert per_rank[TIME].max() > 2 * truth  # the faster ranks' raw split holds the wait
    assert (per_rank[TIME] - per_rank[PEER_WAIT]).to_numpy() == pytest.approx(truth, rel=0.15)
    obs = part_observations(frame, GPT_TINY)
    timed = obs[obs["metric"] == TIME].set_index(PART)["value"]
    assert timed[PART_DP] == pytest.approx(truth, rel=0.15)
    assert timed[PART_STEP] == pytest.approx(sum(timed[p] for p in LAYOUT_PARTS if p not in (PART_STEP, PART_MEMORY)))


@pytest.mark.parametrize(
    "name",
    ["HTA__trace_diff_control_control.json.gz", "HTA__nccl_parser_config_nccl_data.json.gz"],
)
def test_real_ddp_traces_reduce_gradients_during_the_backward_pass(real_kineto, facts_of, name):
    """PyTorch's DDP reduces each gradient bucket from an autograd hook as the backward pass fills
    it: in these real DDP traces (HTA's test data) every gradient all-reduce of the data-parallel
    group is launched from the autograd thread, and the reader says so."""
    frame = file_parts(facts_of(real_kineto(name)), {}, 0)
    shares = frame[frame["metric"] == IN_BACKWARD]
    assert len(shares) and (shares[PART] == PART_DP_KERNELS).all()
    assert (shares["value"] == 1.0).all()


def test_work_that_runs_past_its_step_is_charged_where_it_ran(megatron_parts, facts_of):
    """The host runs ahead: ZeRO 2's parameter gathers after the optimizer run in the next step's
    range. The split charges them there, so host_overhead is exactly the time no GPU work at all
    runs in the step's range, read here from the trace's own events (ProfilerStep ranges, kernels,
    copies, memsets); charged by launch, those gathers left that range idle."""
    import gzip
    import json

    study, frames = megatron_parts
    frame = frames["kineto"]
    paths = [p for p in study.files["path"] if ".zero2." in p and p.endswith(SUFFIX["kineto"])]
    assert paths
    carried = 0.0
    for path in paths:
        events = json.loads(gzip.open(path).read())["traceEvents"]
        ranges = {e["ts"]: e["ts"] + e["dur"] for e in events if e["name"].startswith("ProfilerStep#")}
        gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        launched = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
        rows = frame[(frame["path"] == path) & (frame["metric"] == TIME)].set_index(["step", PART])["value"]
        for step, start in facts_of(path).steps[["step", "start"]].itertuples(index=False):
            lo = min(ranges, key=lambda ts: abs(ts - start / 1e3))  # the reader's step is this range
            hi = ranges[lo]
            assert lo == pytest.approx(start / 1e3, abs=1.0)
            running = [(e["ts"], e["ts"] + e["dur"], e["args"].get("correlation")) for e in gpu]
            running = [(a, b, c) for a, b, c in running if b > lo and a < hi]
            busy, end = 0.0, lo
            for a, b, _ in sorted(running):
                busy += max(min(b, hi) - max(a, end), 0.0)
                end = max(end, min(b, hi))
            assert rows[(step, "host_overhead")] == pytest.approx((hi - lo - busy) * 1e-6, abs=1e-8)
            carried += sum(min(b, hi) - max(a, lo) for a, b, c in running if launched.get(c, hi) < lo)
    assert carried > 0  # some step's range ran work launched before it
