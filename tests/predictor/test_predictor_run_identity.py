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
