"""Issue 20, "Layout": an independently built study (tests/independent_study.py: the DDL of a real
2024.2 export, no extradeep code) on 4-GPU nodes, measured at 2-16 ranks, whose exports keep the
layout only in TARGET_INFO_GPU UUID sets and EXPORT_HOST. Without a flag, `model` finds the nodes
and predicts the epoch time at 2x-4x within 5% (median) and 10% (worst) of the law's truth; the
advisor, started from 2, 4 and 8 ranks, proposes whole nodes and ends within 5% at 32 and 64."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from extradeep.aggregate.experiment import Dataset
from extradeep.analysis.advisor import MeasurementAdvisor
from extradeep.analysis.core import analyse
from extradeep.pipeline import load_experiment

_spec = importlib.util.spec_from_file_location("independent_study", Path(__file__).parents[1] / "independent_study.py")
study = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(study)

MEASURED = [2, 3, 4, 8, 12, 16]
DATA = Dataset(50000, 10000, 64, weak_scaling=True)
N_T, N_V = 50000 // 64, 10000 // 64


@pytest.fixture(scope="module")
def independent(real_nsys_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("independent")
    writer = study.StudyWriter(real_nsys_dir, out)
    for ranks in MEASURED:
        for rep in (1, 2):
            writer.write_run(ranks, rep)
    experiment = load_experiment([out], progress=False, use_cache=False, dataset=DATA)
    return out, experiment, analyse(experiment)


def test_the_study_keeps_its_layout_only_in_gpu_uuids_and_export_host(independent):
    out, _, _ = independent
    path = next(out.glob("*.p8.r1.mpi5.sqlite"))
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    host = conn.execute("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_HOST'").fetchone()[0]
    gpus = conn.execute("SELECT count(*) FROM TARGET_INFO_GPU").fetchone()[0]
    conn.close()
    assert "TARGET_INFO_SYSTEM_ENV" not in tables and "META_DATA_CAPTURE" not in tables
    assert host == "dgx001" and gpus == 4


def test_model_finds_the_nodes_without_a_flag_and_says_from_where(independent):
    _, experiment, analysis = independent
    layout = experiment.settings["layout"]
    assert layout["source"] == "gpu_uuids" and layout["gpus_per_node"] == study.GPUS_PER_NODE
    assert [p["nodes"] for p in layout["points"]] == [1, 1, 1, 2, 3, 4]
    assert layout["signals"] == ["gpu_uuids", "devices", "export_host"] and not layout["warnings"]
    assert any(n.startswith("layout from GPU UUID sets (TARGET_INFO_GPU): 4 GPUs per node") for n in analysis.notes)


def test_epoch_time_across_node_boundaries_within_5_percent_median_10_worst(independent):
    _, _, analysis = independent
    model = analysis.model("epoch time")
    errors = []
    for ranks in (32, 48, 64):
        truth = study.expected_epoch_time(ranks, N_T, N_V)
        errors.append(abs(float(model.predict(float(ranks))) - truth) / truth)
        assert model.interval(float(ranks))[0] >= 0
    assert np.median(errors) <= 0.05 and max(errors) <= 0.10


def test_a_saved_experiment_keeps_the_layout_and_its_source(independent, tmp_path):
    from extradeep.aggregate.experiment import Experiment

    _, experiment, _ = independent
    experiment.save(tmp_path / "saved.sqlite")
    again = Experiment.load(tmp_path / "saved.sqlite")
    assert again.settings["layout"] == experiment.settings["layout"]


@pytest.mark.slow
def test_the_advisor_from_2_4_and_8_ranks_ends_within_5_percent_on_whole_nodes(real_nsys_dir, tmp_path):
    writer = study.StudyWriter(real_nsys_dir, tmp_path / "campaign")
    runs, done, previous = {(p, r) for p in (2, 4, 8) for r in (1, 2)}, set(), None
    for _ in range(8):
        for ranks, rep in sorted(runs - done):
            writer.write_run(ranks, rep)
            done.add((ranks, rep))
        experiment = load_experiment(
            tmp_path / "campaign", params=["ranks"], progress=False, cache_dir=tmp_path / "cache", replay=False
        )
        advisor = MeasurementAdvisor([32, 64], 16).fit(experiment)
        plan, now = advisor.propose(1), advisor.current_
        if advisor.model_ is not None:
            moved = np.inf if previous is None else np.max(np.abs(now["predicted"] - previous) / now["predicted"])
            if (now["interval_pct"] <= 5).all() and moved <= 0.05:
                break
            previous = now["predicted"].to_numpy()
        runs |= {(int(r.ranks), int(r.first_rep) + k) for r in plan.itertuples() for k in range(int(r.reps))}
    assert advisor.gpus_per_node_ == 4 and any("whole nodes" in n for n in advisor.notes_)
    assert all(p <= 4 or p % 4 == 0 for p, _ in done)  # no 6 or 10 ranks on 4-GPU nodes
    for ranks, predicted in zip(now["ranks"], now["predicted"]):
        truth = study.expected_epoch_time(int(ranks), 1, 0)
        assert abs(predicted - truth) / truth <= 0.05
