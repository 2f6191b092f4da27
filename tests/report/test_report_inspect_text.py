"""What `extradeep inspect` prints (extradeep.report.inspect_text), checked against what the files hold:
the simulator's truth (steps, each run's parallel layout), SQL on the exports (tables, kernels per
device, the nsys version) and the Kineto traces' JSON as the standard library reads it (rank, GPUs)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from shared_data import GPT_TINY

from extradeep.analysis.layout_text import layout_text
from extradeep.columns import DP, GPUS, MICRO_BATCH, PASSES, PP, TP
from extradeep.report.inspect_text import LABELS, cluster_text, inspect_text, profile_text, run_lines
from extradeep.workflows.inspection import InspectOptions, InspectResult, inspect_profiles

GPT_LAYOUT = "tp2.pp2.dp1.mbs2.nmb4.zero0.rc0.vpp1"
ENUM_LINE = "ENUM_* lookup tables (listed with --json)"


@pytest.fixture(scope="module")
def cifar_run(tmp_path_factory) -> Path:
    """One simulated data-parallel run of 2 ranks: 2 epochs (the first is warm-up), 3 + 1 steps each."""
    from extradeep.simulate import simulate

    out = tmp_path_factory.mktemp("inspect-cifar")
    simulate(out, params={"ranks": [2]}, repetitions=1, epochs=2, train_steps=3, val_steps=1, seed=5, progress=False)
    return out


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    """One simulated Megatron run (tp 2, pp 2, dp 1) of 4 ranks, each as an nsys export and a Kineto trace."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import simulate_gpt

    out = tmp_path_factory.mktemp("inspect-gpt")
    return simulate_gpt(out, [GPT_LAYOUT], model=GPTModel(**GPT_TINY), noise=(0.0, 0.0, 0.0), steps=3)


def _sql(path, query):
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
        return conn.execute(query).fetchall()


def _inspected(*paths, **options) -> InspectResult:
    return inspect_profiles(InspectOptions(paths=tuple(str(p) for p in paths), **options))


def _block(lines: list[str], title: str) -> list[str]:
    """The lines indented under ``title`` (one level deeper than it)."""
    start = lines.index(title)
    indent = " " * (len(title) - len(title.lstrip()) + 2)
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith(indent):
            break
        block.append(line)
    return block


def _field_line(name: str, value) -> str:
    return f"    {LABELS[name]:<30} {value!s:<12}"


def _shown(block: list[str], name: str) -> str:
    """The value a layout block shows for one field ("?" when unknown)."""
    label = f"    {LABELS[name]:<30} "
    (line,) = [x for x in block if x.startswith(label)]
    return line[len(label) :].split()[0]


def test_an_export_shows_its_size_its_simulated_steps_and_the_rows_of_its_tables(cifar_run):
    path = sorted(cifar_run.glob("*.sqlite"))[0]
    truth = json.loads((cifar_run / "truth.json").read_text())
    lines = profile_text(_inspected(path).profiles[0].info).splitlines()
    assert lines[0] == f"{path}  ({path.stat().st_size:,} bytes)"
    measured = truth["epochs"] - 1  # the first epoch is the warm-up
    steps = (
        f"  steps: {truth['epochs']} epoch(s), {measured} measured; {truth['train_steps'] * measured} training "
        f"and {truth['val_steps'] * measured} validation steps measured, "
        f"{truth['train_steps'] + truth['val_steps']} warm-up step(s) excluded"
    )
    assert steps in lines
    tables = [t for (t,) in _sql(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    expected = {t: _sql(path, f'SELECT count(*) FROM "{t}"')[0][0] for t in tables if not t.startswith("ENUM_")}
    expected[ENUM_LINE] = sum(t.startswith("ENUM_") for t in tables)
    shown = dict(reversed(line.split(maxsplit=1)) for line in _block(lines, "  tables (rows):"))
    assert {name: int(n.replace(",", "")) for name, n in shown.items()} == expected
    per_device = dict(_sql(path, "SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId"))
    for device, n in per_device.items():
        (line,) = [x for x in lines if x.startswith(f"  kernels on device {device}: ")]
        counts = line.split(": ", 1)[1].split(", ")
        assert sum(int(c.rsplit(" ", 1)[1].replace(",", "")) for c in counts) == n


@pytest.mark.parametrize(
    "name",
    [
        "quasiben__nvtx-examples__cudf.sqlite",  # before 2022.1: no metadata table
        "LeiWang1999__memfusion_artifact__report1.sqlite",  # EXPORT_META_DATA
        "GindaChen__nsys-ai__mfu_2gpu_before.sqlite",  # META_DATA_EXPORT
    ],
)
def test_the_nsys_version_line_says_what_the_export_records(real_nsys_dir, name):
    path = real_nsys_dir / name
    tables = {t for (t,) in _sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    meta = {}
    for table in {"META_DATA_EXPORT", "EXPORT_META_DATA"} & tables:
        meta = dict(_sql(path, f"SELECT name, value FROM {table}"))
    version, schema = meta.get("EXPORT_PRODUCT_VERSION"), meta.get("EXPORT_SCHEMA_VERSION")
    expected = f"  nsys version: {version or 'not recorded (export older than 2022.1)'}"
    expected += f", schema {schema}" if schema else ""
    assert profile_text(_inspected(path).profiles[0].info).splitlines()[1] == expected


@pytest.mark.parametrize(
    "name",
    [
        "HTA__amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # no distributedInfo
        "HTA__trace_diff_control_control.json.gz",  # rank 3 of 8 (nccl)
        "HTA__trace_filter_sampled_rank-1.json.gz",  # no deviceProperties
    ],
)
def test_a_trace_shows_the_rank_and_gpus_its_json_records(real_kineto, plain_json, name):
    path = real_kineto(name)
    doc = plain_json(path)
    dist = doc.get("distributedInfo") or {}
    lines = profile_text(_inspected(path).profiles[0].info).splitlines()
    rank = f"rank {dist['rank']}" if "rank" in dist else "rank not recorded"
    rank += f" of {dist['world_size']}" if "world_size" in dist else ""
    rank += f" ({dist['backend']})" if dist.get("backend") else ""
    assert lines[1].startswith("  PyTorch profiler (Kineto) trace, ") and lines[1].endswith(f"; {rank}")
    gpus = ", ".join(f"{d['id']}: {d['name']}" for d in doc.get("deviceProperties", []))
    assert lines[2] == f"  GPUs: {gpus or 'none recorded'}"


def test_each_rank_shows_the_layout_it_was_simulated_with(gpt_run):
    truth = gpt_run.truth["layouts"][0]["layout"]
    paths = list(gpt_run.files["path"])
    shape = f"{GPT_TINY['seq']},{GPT_TINY['hidden']}"
    with_shape = _inspected(*paths, model_shape=shape).profiles
    without = _inspected(*paths).profiles
    assert len(with_shape) == len(without) == len(paths)
    title = "  parallel layout (what this profile shows; file names or a manifest can fill the rest):"
    for shaped, plain in zip(with_shape, without):
        block = _block(profile_text(shaped.info).splitlines(), title)
        shown = {name: _shown(block, name) for name in (GPUS, TP, PP, DP, MICRO_BATCH)}
        known = {name: value for name, value in shown.items() if value != "?"}
        assert known == {name: str(truth[name]) for name in known}, shaped.info["path"]  # unknown, never wrong
        # every rank's profile tells tp and pp; message sizes give the micro-batch size once the shape is known
        assert {TP, PP, MICRO_BATCH} <= set(known), shaped.info["path"]
        if shaped.info.get("format") == "kineto":  # process groups and the world size are in the trace
            assert set(known) == set(shown), shaped.info["path"]
        unshaped = _block(profile_text(plain.info).splitlines(), title)
        assert _shown(unshaped, MICRO_BATCH) == "?"  # without the shape: unknown, not a guess


def test_a_folder_lists_its_run_with_the_layout_of_its_files(gpt_run):
    truth = gpt_run.truth["layouts"][0]["layout"]
    result = _inspected(gpt_run.outdir)
    lines = run_lines(result.runs, result.run_params)
    assert lines[0].startswith("parallel layouts per run")
    heads = [line for line in lines if line.startswith("  ") and not line.startswith("    ")]
    ranks = gpt_run.files.groupby("format").size()
    assert len(heads) == 1 and heads[0].endswith(f" rep 1 ({ranks.iloc[0]} files)")  # one format per run
    for name in (GPUS, TP, PP, DP, MICRO_BATCH):
        assert any(line.startswith(_field_line(name, truth[name])) for line in lines[2:]), name
    assert not any(line.startswith(f"    {LABELS[PASSES]}") for line in lines)  # a profile's count, not a run's


def test_the_cluster_layout_is_the_placements_lines_under_a_title(gpt_run):
    result = _inspected(gpt_run.outdir)
    assert result.layout is not None  # the files are named like a study
    lines = cluster_text(result.layout, len(result.profiles)).splitlines()
    assert lines[0] == f"cluster layout of the {len(gpt_run.files)} profiles:"
    assert lines[1:] == [f"  {line}" for line in layout_text(result.layout)]


def test_the_whole_output_is_each_block_in_the_results_order(gpt_run):
    result = _inspected(gpt_run.outdir)
    blocks = [profile_text(p.info) for p in result.profiles]
    blocks.append(cluster_text(result.layout, len(result.profiles)))
    runs = "\n".join(run_lines(result.runs, result.run_params))
    assert inspect_text(result) == "\n\n".join(blocks) + "\n\n" + runs + "\n"
    assert inspect_text(InspectResult()) == ""  # nothing read: nothing printed, not a blank line
