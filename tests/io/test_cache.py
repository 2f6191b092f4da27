"""The per-file cache shared by many workers: concurrent writers never leave a half entry nor share a
temporary file, and a damaged entry (truncated, garbage, not a result) is a miss that is recomputed."""

import multiprocessing
import os
import pickle
import threading

import pandas as pd
import pytest

from extradeep import load_experiment
from extradeep.io import cache
from extradeep.io.cache import read_cache, store_cache
from extradeep.simulate import simulate


def _result(n: int) -> dict:
    frame = pd.DataFrame({"value": [float(n)] * 2000})  # large enough that a write takes many syscalls
    return {"path": f"file{n}", "sha256": str(n) * 8, "frame": frame, "problem": None}


def _writer(cache_dir, key, n, rounds):
    for _ in range(rounds):
        store_cache(cache_dir, key, _result(n))


def test_concurrent_writers_never_leave_a_half_entry(tmp_path):
    key = "ab" + "0" * 62
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(tmp_path, key, n, 40)) for n in range(4)]
    threads = [threading.Thread(target=_writer, args=(tmp_path, key, n, 40)) for n in range(4, 6)]
    for worker in writers + threads:
        worker.start()
    seen = set()
    while any(w.is_alive() for w in writers + threads):
        entry = read_cache(tmp_path, key)
        if entry is not None:  # every entry read is one writer's whole result
            n = int(entry["path"][4:])
            assert (
                entry["sha256"] == str(n) * 8 and (entry["frame"]["value"] == n).all() and len(entry["frame"]) == 2000
            )
            seen.add(n)
    for worker in writers + threads:
        worker.join()
    assert all(w.exitcode == 0 for w in writers)
    assert read_cache(tmp_path, key)["path"] in {f"file{n}" for n in range(6)}
    leftovers = [p.name for p in (tmp_path / "steps").rglob("*") if p.is_file() and not p.name.endswith(".pkl")]
    assert leftovers == []  # every temporary file was renamed into place


def test_temporary_names_differ_per_process_and_thread(tmp_path, monkeypatch):
    names = []
    real_replace = os.replace

    def spy(src, dst):
        names.append(os.path.basename(src))
        real_replace(src, dst)

    monkeypatch.setattr(cache.os, "replace", spy)
    key = "cd" + "1" * 62
    together = threading.Barrier(3)  # all alive at once, so their thread ids differ

    def store(n):
        together.wait()
        store_cache(tmp_path, key, _result(n))

    threads = [threading.Thread(target=store, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(names)) == 3 and all(str(os.getpid()) in name for name in names)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    simulate(out, app="toy", params={"ranks": [2, 3]}, repetitions=1, epochs=2, train_steps=2, val_steps=1, seed=2)
    return out


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not a result", "empty"])
def test_a_damaged_entry_is_recomputed(tiny_run, tmp_path, damage):
    fresh = load_experiment(tiny_run, ["ranks"], jobs=1, cache_dir=tmp_path, progress=False, replay=False)
    entries = sorted((tmp_path / "steps").glob("??/*.pkl"))
    assert len(entries) == len(fresh.provenance)
    victim = entries[0]
    blob = victim.read_bytes()
    victim.write_bytes(
        {
            "truncated": blob[: len(blob) // 2],
            "garbage": os.urandom(300),
            "not a result": pickle.dumps(["a", "list"]),
            "empty": b"",
        }[damage]
    )
    assert read_cache(tmp_path, victim.stem) is None
    again = load_experiment(tiny_run, ["ranks"], jobs=1, cache_dir=tmp_path, progress=False, replay=False)
    pd.testing.assert_frame_equal(fresh.values, again.values)
    assert not again.problems
    assert read_cache(tmp_path, victim.stem) is not None  # the entry was written again, whole
