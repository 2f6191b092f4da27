"""`extradeep inspect`: counts equal direct SQL counts on every real export; bad files one line each."""

from __future__ import annotations

import hashlib
import json

import pytest

from extradeep.cli import main
from extradeep.io.nsys.inspect import inspect_export


@pytest.fixture
def count(sql):
    """count(path, table, where="") -> rows of a table by SQL (0 when the table is absent)."""

    def count_rows(path, table, where=""):
        exists = sql(path, f"SELECT count(*) FROM sqlite_master WHERE type='table' AND name='{table}'")[0][0]
        return sql(path, f"SELECT count(*) FROM {table} {where}")[0][0] if exists else 0

    return count_rows


def test_counts_equal_sql(real_export, sql, count):
    info = inspect_export(real_export)
    path = real_export
    tables = [r[0] for r in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")]
    assert info["tables"] == {t: count(path, t) for t in tables}
    kernels = "CUPTI_ACTIVITY_KIND_KERNEL"
    nccl = "JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nccl%'" if kernels in tables else ""
    n_nccl = sql(path, f"SELECT count(*) FROM {kernels} k {nccl}")[0][0] if kernels in tables else 0
    expected = {
        "computation": count(path, kernels) - n_nccl,
        "communication": n_nccl,  # no MPI tables or MPI domains in the real exports
        "memory": count(path, "CUPTI_ACTIVITY_KIND_MEMCPY") + count(path, "CUPTI_ACTIVITY_KIND_MEMSET"),
        "cuda_api": count(path, "CUPTI_ACTIVITY_KIND_RUNTIME"),
        "nvtx": count(path, "NVTX_EVENTS", "WHERE eventType IN (34, 59, 60)"),
        "os": count(path, "OSRT_API"),
        "library": count(path, "CUBLAS_EVENTS") + count(path, "CUDNN_EVENTS"),
    }
    assert info["counts_by_category"] == expected
    if kernels in tables:
        by_device = sql(path, f"SELECT deviceId, count(*) FROM {kernels} GROUP BY deviceId")
        assert {d: sum(c.values()) for d, c in info["kernels_by_device"].items()} == {str(d): n for d, n in by_device}
    gpu_table = next((t for t in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU") if t in tables), None)
    assert len(info["gpus"]) == (count(path, gpu_table) if gpu_table else 0)
    assert info["path"] == str(path)


def test_versions_and_gpus_across_layouts(real):
    old = inspect_export(real("quasiben__nvtx-examples__cudf.sqlite"))
    assert old["nsys_version"] is None and [g["name"] for g in old["gpus"]] == ["Quadro RTX 8000"] * 2
    oldest = inspect_export(real("lockfuehrer__beast_ressoruces__report2.sqlite"))  # TARGET_INFO_CUDA_GPU only
    assert [g["name"] for g in oldest["gpus"]] == ["Tesla V100-PCIE-32GB"] * 2
    new = inspect_export(real("LeiWang1999__memfusion_artifact__report1.sqlite"))
    assert new["nsys_version"] == "2023.1.2.43" and [g["id"] for g in new["gpus"]] == [0, 1, 2, 3]
    assert new["nvtx_domains"] == {"TensorRT": 59}


def test_two_gpu_export_shows_nccl_as_communication_on_both_devices(real):
    info = inspect_export(real("GindaChen__nsys-ai__mfu_2gpu_before.sqlite"))
    devices = info["kernels_by_device"]
    assert set(devices) == {"0", "1"}
    assert devices["0"]["communication"] == 33 and devices["1"]["communication"] == 33
    assert info["counts_by_category"]["communication"] == 66
    assert info["top_ranges"][0][0] in {"ncclSend", "ncclRecv"} and info["top_ranges"][0][1] == 132
    assert info["steps"]["found"] is False and "ncclSend" in info["steps"]["problem"]


def test_steps_section_on_simulator_output(sim_marks_old, truth_of):
    truth = truth_of(sim_marks_old)
    info = inspect_export(sorted(sim_marks_old.glob("*.sqlite"))[0])
    steps = info["steps"]
    assert steps["found"] and steps["epochs"] == truth["epochs"] and steps["measured_epochs"] == truth["epochs"] - 1
    assert steps["train_steps"] == truth["train_steps"] and steps["val_steps"] == truth["val_steps"]
    assert steps["warmup_steps"] == truth["train_steps"] + truth["val_steps"]
    assert "Extra-Deep marks" in steps["convention"]["train"]
    assert info["nsys_version"].startswith("2022.1")


def test_cli_reads_everything_and_leaves_inputs_identical(real_nsys_dir, tmp_path, capsys):
    files = sorted(real_nsys_dir.glob("*.sqlite"))
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    text = tmp_path / "text.sqlite"
    text.write_text("not a database\n" * 20)
    rc = main(["inspect", "--json", str(empty), *map(str, files), str(text)])
    out, err = capsys.readouterr()
    assert rc == 0
    doc = json.loads(out)
    assert [f["path"] for f in doc["files"]] == [str(p) for p in files]
    assert len(doc["problems"]) == 2 and all("\n" not in p for p in doc["problems"])
    error_lines = [line for line in err.splitlines() if line.startswith("extradeep: error:")]
    assert len(error_lines) == 2 and str(empty) in error_lines[0] and str(text) in error_lines[1]
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == before


def test_cli_fails_only_when_nothing_is_readable(tmp_path, capsys, sim_ranges):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    assert main(["inspect", str(empty)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    good = sorted(sim_ranges.glob("*.sqlite"))[0]
    assert main(["inspect", str(good), str(empty), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "steps: 2 epoch(s), 1 measured" in out and "Extra-Deep ranges" in out


@pytest.mark.parametrize("option", ["--train-step-pattern", "--epoch-pattern"])
def test_cli_patterns_reach_the_reader(real, capsys, option):
    path = real("YoonKyonghwan__EfficientCenterFormer__baseline.sqlite")
    args = ["inspect", str(path), "--json", "--train-step-pattern", "reader"]
    if option == "--epoch-pattern":
        args += ["--epoch-pattern", "nothing-matches-this", "--warmup-steps", "2"]
    assert main(args) == 0
    steps = json.loads(capsys.readouterr().out)["files"][0]["steps"]
    assert steps["found"] and steps["train_steps"] == (302 if option == "--epoch-pattern" else 303)


def test_cli_expands_directories(sim_ranges, capsys):
    assert main(["inspect", "--json", str(sim_ranges)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["path"] for f in doc["files"]] == sorted(str(p) for p in sim_ranges.glob("*.sqlite"))


def test_an_experiment_saved_by_extradeep_is_named_as_such(sim_ranges, tmp_path, capsys):
    from extradeep import load_experiment

    saved = tmp_path / "exp.sqlite"
    load_experiment(sim_ranges, cache_dir=tmp_path / "cache", progress=False).save(saved)
    good = sorted(sim_ranges.glob("*.sqlite"))[0]
    assert main(["inspect", str(saved), str(good)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == (
        f"extradeep: error: {saved}: an experiment saved by extradeep, not an "
        "Nsight Systems export (read it with `extradeep model FILE` or "
        "`extradeep report FILE`)"
    )
    assert "nsys version" in captured.out and str(saved) not in captured.out
