"""Layouts read back from simulated profiles equal the layouts the simulator ran, for nsys and Kineto and
every variant (Megatron, DeepSpeed, FSDP markers; NCCL NVTX with payloads, legacy sizes, none), from
the profiles alone where the format records them and with file names where it does not; and on real
profiles the readers neither crash nor claim more than the file shows."""

from __future__ import annotations

import hashlib

import pytest
from shared_data import GPT_TINY, real_exports, real_kineto_traces

from extradeep.columns import (
    CHUNKS,
    DP,
    DP_RANK,
    GPUS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PP,
    RECOMPUTE,
    SCHEDULE,
    STAGE,
    TP,
    TP_RANK,
    ZERO,
)
from extradeep.io.discover import runs_from_names
from extradeep.io.parallel import infer_layout, read_layout, run_layouts
from extradeep.simulate.gpt.config import parse_layout

SHAPE = {"seq": GPT_TINY["seq"], "hidden": GPT_TINY["hidden"]}
# what each format records by itself, per study variant (the rest comes from file names)
FROM_PROFILE = {
    ("megatron", "kineto"): (TP, PP, DP, ZERO, RECOMPUTE, MICRO_BATCH),
    ("megatron", "nsys"): (TP, PP, RECOMPUTE, MICRO_BATCH, SCHEDULE),
    ("deepspeed", "kineto"): (TP, PP, DP, ZERO, RECOMPUTE, MICRO_BATCH),
    ("deepspeed", "nsys"): (TP, PP, RECOMPUTE, MICRO_BATCH),
    ("fsdp", "kineto"): (TP, PP, DP, ZERO, RECOMPUTE, MICRO_BATCH, MICRO_BATCHES),
    ("fsdp", "nsys"): (TP, PP, DP, ZERO, RECOMPUTE, MICRO_BATCH, MICRO_BATCHES),
    ("legacy", "nsys"): (ZERO, RECOMPUTE, MICRO_BATCHES),
    ("no_nccl_nvtx", "nsys"): (RECOMPUTE, MICRO_BATCHES, SCHEDULE),
}
# fields a profile may leave open (an nsys export records no world size: a tied-embedding all-reduce
# between the first and last stage can look like a gradient reduction) but must never get wrong
MAY_TELL = (TP, PP, DP, ZERO, RECOMPUTE, MICRO_BATCH, MICRO_BATCHES, SCHEDULE, CHUNKS)
SUFFIX = {"nsys": ".sqlite", "kineto": ".pt.trace.json.gz"}


def written(layout_label: str) -> dict:
    lay = parse_layout(layout_label)
    return {
        TP: lay.tp,
        PP: lay.pp,
        DP: lay.dp,
        MICRO_BATCH: lay.micro_batch,
        MICRO_BATCHES: lay.micro_batches,
        ZERO: lay.zero,
        RECOMPUTE: lay.recompute,
        CHUNKS: lay.virtual_stages,
        SCHEDULE: lay.schedule,
    }


def study_files(study, fmt: str) -> list[str]:
    return sorted(p for p in study.files["path"] if p.endswith(SUFFIX[fmt]))


@pytest.mark.parametrize("variant, fmt", sorted(FROM_PROFILE))
def test_each_profile_tells_its_layout(gpt_studies, facts_of, variant, fmt):
    study = gpt_studies[variant]
    for entry in study.truth["layouts"]:
        want = written(entry["label"])
        lay = parse_layout(entry["label"])
        for name in (n for n in entry["files"] if n.endswith(SUFFIX[fmt])):
            path = str(study.outdir / name)
            rank = int(name.split(".mpi")[1].split(".")[0])
            fields = infer_layout(facts_of(path), model=SHAPE)
            # with data parallelism its traffic shows: an nsys export then tells dp and the ZeRO stage too
            required = FROM_PROFILE[(variant, fmt)] + (
                (DP, ZERO) if variant in ("megatron", "deepspeed") and lay.dp > 1 else ()
            )
            for key in required:
                if key == MICRO_BATCHES and lay.virtual_stages > 1:
                    continue  # passes = nmb x vpp; the split needs vpp (a file name or Megatron's ranges)
                if key == SCHEDULE and lay.pp == 1:
                    continue
                if key == MICRO_BATCH and lay.tp == lay.pp == 1:
                    continue  # no activation-sized message (tp all-reduce, pp transfer) to divide
                got = fields[key].value
                assert got == want[key], (name, key, got, fields[key].source)
                assert fields[key].source and "file name" not in fields[key].source
            for key in MAY_TELL:
                assert fields[key].value in (None, want[key]), (name, key, fields[key].value, fields[key].source)
            assert fields["passes"].value == lay.micro_batches * lay.virtual_stages, name
            if variant not in ("legacy", "no_nccl_nvtx"):
                coords = dict(zip((TP_RANK, DP_RANK, STAGE), lay.coords(rank)))
                for key, value in coords.items():
                    assert fields[key].value in ((value,) if fmt == "kineto" else (value, None)), (name, key)
                assert fields[TP_RANK].value == coords[TP_RANK] and fields[STAGE].value == coords[STAGE], name


@pytest.mark.parametrize("variant, fmt", sorted(FROM_PROFILE))
def test_each_run_reads_back_the_written_layout(gpt_studies, facts_of, variant, fmt):
    study = gpt_studies[variant]
    runs, problems = runs_from_names(study_files(study, fmt))
    assert not problems
    layouts, problems = run_layouts(runs, model=SHAPE, facts={p: facts_of(p) for p in runs["path"]})
    assert not problems
    keys = list(written(study.truth["layouts"][0]["label"]))
    read = sorted(tuple(row[k] for k in keys) for _, row in layouts.iterrows())
    wanted = sorted(tuple(written(entry["label"]).values()) for entry in study.truth["layouts"])
    assert read == wanted
    for key in keys:
        assert (layouts[key + "_source"] != "not recorded").all(), key


def test_names_fill_what_profiles_leave_open_and_profiles_win(gpt_studies, facts_of):
    study = gpt_studies["no_nccl_nvtx"]
    runs, _ = runs_from_names(study_files(study, "nsys"))
    layouts, _ = run_layouts(runs, facts={p: facts_of(p) for p in runs["path"]})
    row = layouts.iloc[0]
    assert row[TP] == 2 and "file name" in row[TP + "_source"]  # no NCCL ranges: sizes only in the name
    assert row[RECOMPUTE] == "none" and "file name" not in row[RECOMPUTE + "_source"]
    runs[TP] = 4  # a name that contradicts nothing the profile records is taken ...
    layouts, _ = run_layouts(runs, facts=facts_of.cache)
    assert layouts.iloc[0][TP] == 4
    meg = gpt_studies["megatron"]
    runs, _ = runs_from_names(study_files(meg, "kineto"))
    runs[TP] = 8  # ... but a profile's record beats a contradicting name, and says so
    layouts, _ = run_layouts(runs, facts={p: facts_of(p) for p in runs["path"]})
    assert set(layouts[TP]) <= {1, 2}
    assert layouts[TP + "_source"].str.contains("the file name says 8").all()


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_zero_1_and_2_told_apart_with_more_buckets_than_micro_batches(tmp_path, facts_of, fmt):
    """A model of several 40M-parameter gradient buckets per step: ZeRO 1 reduce-scatters all of them
    in the last backward pass (more calls per step than passes), ZeRO 2 in every pass."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import simulate_gpt

    model = GPTModel(layers=4, hidden=2048, heads=16, seq=256, vocab=2048)
    labels = ["tp1.pp1.dp2.mbs1.nmb2.zero1.rc0.vpp1", "tp1.pp1.dp2.mbs1.nmb2.zero2.rc0.vpp1"]
    study = simulate_gpt(tmp_path, labels, model=model, formats=(fmt,), steps=3, framework="deepspeed")
    for entry in study.truth["layouts"]:
        for name in entry["files"]:
            fields = infer_layout(facts_of(study.outdir / name), model={"seq": 256, "hidden": 2048})
            assert fields[ZERO].value == written(entry["label"])[ZERO], (name, fields[ZERO].source)


def test_deepspeeds_reduction_after_the_backward_pass_is_data_parallel_and_the_tied_embedding_is_not(
    tmp_path, facts_of
):
    """DeepSpeed's engine all-reduces ZeRO 0 gradients from the main thread after the backward pass,
    like the tied embedding's all-reduce between the first and the last stage. The Kineto trace's
    process groups tell them apart: the data-parallel group shares only this rank with the pipeline
    group, the embedding's joins two of its stages (and with pp = 4 no data-parallel group exists)."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import simulate_gpt

    labels = ["tp1.pp2.dp2.mbs1.nmb2.zero0.rc0.vpp1", "tp1.pp4.dp1.mbs1.nmb4.zero0.rc0.vpp1"]
    study = simulate_gpt(
        tmp_path, labels, model=GPTModel(**GPT_TINY), formats=("kineto",), steps=3, framework="deepspeed"
    )
    for entry in study.truth["layouts"]:
        want = written(entry["label"])
        for name in entry["files"]:
            fields = infer_layout(facts_of(study.outdir / name), model=SHAPE)
            assert fields[DP].value == want[DP], (name, fields[DP].source)
            assert fields[PP].value == want[PP], (name, fields[PP].source)
            if want[DP] > 1:
                assert "gradient reduction" in fields[DP].source, name


def test_world_comes_from_the_name_when_only_some_ranks_were_profiled(gpt_studies, facts_of):
    """Megatron's --profile-ranks 0: one file of a 4-rank run; p4 in its name is the world size."""
    study = gpt_studies["megatron"]
    entry = study.truth["layouts"][0]  # tp2.pp2.dp1
    only = [str(study.outdir / n) for n in entry["files"] if ".mpi0." in n and n.endswith(".sqlite")]
    runs, _ = runs_from_names(only)
    layouts, _ = run_layouts(runs, facts={p: facts_of(p) for p in only})
    row = layouts.iloc[0]
    assert row[GPUS] == 4 and row[GPUS + "_source"] == "file name (ranks 4)"
    assert (row[TP], row[PP], row[DP]) == (2, 2, 1) and row[DP + "_source"] == "file name (dp 1)"


def test_reading_leaves_the_profiles_untouched(gpt_studies):
    study = gpt_studies["megatron"]
    paths = list(study.files["path"])[:6]
    before = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths]
    for p in paths:
        read_layout(p)
    assert before == [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths]


def test_recorded_memory_is_the_simulated_peak(gpt_studies, facts_of):
    study = gpt_studies["megatron"]
    for entry in study.truth["layouts"]:
        for stage in entry["stages"]:
            rank_file = next(n for n in entry["files"] if f".mpi{stage['rank']}." in n and n.endswith(".json.gz"))
            facts = facts_of(study.outdir / rank_file)
            assert facts.memory["allocated"] == stage["memory"]["peak_allocated"]
            assert facts.memory["reserved"] == stage["memory"]["peak_reserved"]
            nsys = facts_of(study.outdir / rank_file.replace(".pt.trace.json.gz", ".sqlite"))
            assert nsys.memory["reserved"] == stage["memory"]["peak_reserved"]


# -- real profiles: no crash, honest answers --------------------------------------------------------
REAL_EXPECTED = {
    # file: fields the profile must show, as read from it
    "HTA__nccl_parser_config_nccl_data.json.gz": {GPUS: 2, TP: 1, PP: 1, DP: 2, ZERO: 0, "framework": "ddp"},
    "HTA__ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": {GPUS: 1, TP: 1, PP: 1, DP: 1},
    "HTA__cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz": {GPUS: 300, TP: 1, PP: 1, DP: 300},
    "HTA__trace_diff_control_control.json.gz": {GPUS: 8, TP: 1, PP: 1, DP: 8},
    "HTA__trace_filter_sampled_rank-1.json.gz": {GPUS: 128, TP: 1, PP: 1, DP: 128},
    "HTA__critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz": {TP: 1, PP: 1, DP: 1},
    "GindaChen__nsys-ai__mfu_2gpu_before.sqlite": {
        TP: 1,
        PP: 1,
        DP: 2,
        ZERO: 3,
        RECOMPUTE: "full",
        "framework": "fsdp",
    },
    "MohanadOdema__DLProf__nsys_profile.sqlite": {GPUS: None, TP: 1, PP: 1, DP: 1},
}


def test_real_profiles_read_honestly(real_kineto, real_nsys_dir, facts_of):
    checked = 0
    for path in [*real_kineto_traces(), *real_exports()]:
        fields = infer_layout(facts_of(path))
        for key, field in fields.items():
            assert field.source, (path.name, key)
        want = REAL_EXPECTED.get(path.name, {})
        for key, value in want.items():
            assert fields[key].value == value, (path.name, key, fields[key].value, fields[key].source)
        checked += bool(want)
        # never a degree beyond what the file shows: tp x pp x dp within the world when both are known
        degrees = [fields[k].value for k in (TP, PP, DP)]
        if fields[GPUS].value and None not in degrees:
            assert degrees[0] * degrees[1] * degrees[2] == fields[GPUS].value, path.name
    assert checked == len(REAL_EXPECTED)


def test_all_to_all_and_fsdp_point_to_point_are_not_pipeline_stages(real_kineto, real_nsys_dir, facts_of):
    for path, note in (
        (real_kineto("HTA__trace_diff_control_control.json.gz"), "all-to-all"),
        (real_nsys_dir / "GindaChen__nsys-ai__mfu_2gpu_before.sqlite", "FSDP run: not pipeline"),
    ):
        facts = facts_of(path)
        assert infer_layout(facts)[PP].value == 1
        assert any(note in text for text in facts.notes), facts.notes
