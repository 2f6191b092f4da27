"""The modeling process gives the same points and models as modeling in the GUI's own process."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.errors import InputError


def _open(path):
    from extradeep.gui.workspace import open_source

    return open_source(lambda *a, **k: None, path)


def test_a_chunk_modeled_in_the_process_equals_one_modeled_here(gui_experiment):
    from extradeep.gui.modeling_process import run_remote
    from extradeep.gui.workspace import model_chunk

    ws = _open(gui_experiment)
    rows = ws.regions.index[:12].tolist()
    options = {"n_terms": 1, "min_points": 5}
    here = model_chunk(ws, rows, options, ws.cutoff(0))
    there = run_remote(ws, model_chunk, rows, options, ws.cutoff(0))
    assert set(there["points"]) == set(here["points"]) and here["points"]
    for row, points in here["points"].items():
        np.testing.assert_array_equal(there["points"][row].X, points.X)
        np.testing.assert_array_equal(there["points"][row].value, points.value)
    modeled = [r for r in rows if here["models"][r]["model"] is not None]
    assert modeled
    for row in rows:
        a, b = here["models"][row], there["models"][row]
        assert (a["formula"], a["reason"]) == (b["formula"], b["reason"])
        if a["model"] is not None:  # the same model: the same predictions and intervals, to the bit
            x = np.vstack([here["points"][row].X, 2 * here["points"][row].X])  # measured and beyond
            np.testing.assert_array_equal(a["model"].predict(x), b["model"].predict(x))
            np.testing.assert_array_equal(a["model"].interval(x)[1], b["model"].interval(x)[1])
            assert a["model"].smape == b["model"].smape


def test_an_input_error_in_the_process_arrives_as_one_line(gui_experiment, tmp_path):
    from extradeep.gui.modeling_process import run_remote
    from extradeep.gui.workspace import model_chunk

    ws = _open(gui_experiment)
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"not a database at all" * 10)
    ws.reopen = (ws.reopen[0], broken, None, "a token of its own")
    with pytest.raises(InputError, match="broken.sqlite"):
        run_remote(ws, model_chunk, [0], {}, np.inf)


def test_a_new_opening_is_read_again_in_the_process(gui_experiment, tmp_path):
    """Reopening after the file changed must not model the old contents."""
    import shutil

    from extradeep.gui.modeling_process import run_remote
    from extradeep.gui.workspace import model_chunk

    path = tmp_path / "exp.sqlite"
    shutil.copy(gui_experiment, path)
    first = _open(path)
    run_remote(first, model_chunk, [0], {}, np.inf)
    path.write_bytes(b"replaced by something unreadable" * 10)
    second = _open(gui_experiment)
    second.reopen = (second.reopen[0], path, None, "the second opening")
    with pytest.raises(InputError):
        run_remote(second, model_chunk, [0], {}, np.inf)


def test_after_the_process_dies_the_next_call_starts_a_new_one(gui_experiment):
    import multiprocessing
    import os
    import signal
    from concurrent.futures.process import BrokenProcessPool

    from extradeep.gui.modeling_process import pool, run_remote
    from extradeep.gui.workspace import model_chunk

    ws = _open(gui_experiment)
    pool().submit(int).result()  # started
    for child in multiprocessing.active_children():  # only the modeling process is a child here
        os.kill(child.pid, signal.SIGKILL)
    with pytest.raises(BrokenProcessPool):
        run_remote(ws, model_chunk, [0], {}, np.inf)
    part = run_remote(ws, model_chunk, [0], {}, np.inf)
    assert 0 in part["models"]
