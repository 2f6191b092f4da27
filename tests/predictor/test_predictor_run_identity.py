"""What is one run (issue 17, items 7 and 8): decided from the exports, and only processes with GPU
work are ranks."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from extradeep.errors import InputError
from extradeep.predictor import predict
from extradeep.predictor.trace import load_trace
from extradeep.simulate import simulate

SMALL = {"repetitions": 1, "train_steps": 2, "val_steps": 1, "truth_replicates": 0, "progress": False}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("identity")
    simulate(root / "new", params={"ranks": [2]}, clock_offset_ns=5e6, **SMALL)
    simulate(root / "old", app="other", params={"ranks": [2]}, layout="2022", **SMALL)
    return root


def test_unrelated_exports_in_one_folder_are_refused_with_one_line(runs, tmp_path):
    # names without parameters: only the exports themselves can tell that these are two runs
    shutil.copy(min((runs / "new").glob("*.sqlite")), tmp_path / "a.sqlite")
    shutil.copy(min((runs / "old").glob("*.sqlite")), tmp_path / "b.sqlite")
    with pytest.raises(InputError, match="not one run .*Nsight Systems version"):
        predict(tmp_path)


def test_the_ranks_of_one_run_with_their_own_clocks_are_one_run(runs, tmp_path):
    for i, path in enumerate(sorted((runs / "new").glob("*.sqlite"))):
        shutil.copy(path, tmp_path / f"rank{i}.sqlite")
    pred = predict(tmp_path)
    assert len(pred.files) == 2


def test_a_process_without_gpu_work_is_not_a_rank(runs, tmp_path):
    """A helper process (launcher, data loader) that made two runtime calls: the simulated rank's
    first two runtime calls, repeated under another process id."""
    target = tmp_path / "one.sqlite"
    shutil.copy(min((runs / "new").glob("*.sqlite")), target)
    with sqlite3.connect(target) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
        rows = conn.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start LIMIT 2").fetchall()
        tid = columns.index("globalTid")
        helper = [tuple(v + (7 << 24) if k == tid else v for k, v in enumerate(row)) for row in rows]
        conn.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({', '.join('?' * len(columns))})", helper)
    trace = load_trace([target], jobs=1)
    assert len(trace.files) == 1
    assert any("without GPU work" in note and "are not ranks" in note for note in trace.problems)


def test_a_single_process_export_with_a_helper_process_is_one_rank_and_its_path_adds_up(real_nsys_dir):
    """The real memfusion export (issue 17 item 8): a helper process made two runtime calls and no GPU
    work. It is one rank, and the critical path's ops account for the span they are shares of (the
    export's CPU time is real teardown work: cuModuleUnload, thousands of calls)."""
    path = real_nsys_dir / "LeiWang1999__memfusion_artifact__report1.sqlite"
    prediction = predict(path)
    assert prediction.files["rank"].tolist() == [0]
    span = float(prediction.breakdown["span"].iloc[0])
    path_ops = prediction.critical_path
    # the path's ops and the waits between them make up the span; the classes add up to it too
    assert float(path_ops["contribution"].sum() + path_ops["wait"].sum()) == pytest.approx(span, rel=1e-3)
    parts = prediction.breakdown[["compute", "communication", "memory", "cpu_overhead", "idle"]].iloc[0]
    assert float(parts.sum()) == pytest.approx(span, rel=1e-3)
    by_name = path_ops.groupby("name")["contribution"].sum().sort_values()
    assert by_name.index[-1] == "cuModuleUnload"  # what the CPU share is made of, visible to the user
    assert by_name.iloc[-1] > 0.8 * float(parts["cpu_overhead"])
    assert float(prediction.steps["measured"].iloc[0]) == pytest.approx(span, rel=0.01)
