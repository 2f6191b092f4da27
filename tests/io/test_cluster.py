"""The execution layer on a real Dask cluster (a LocalCluster of 2 worker processes): the same
models as the local path, a worker killed mid-run still gives the study with a note, a call whose
worker dies twice is reported and the rest kept; plus the one-line refusals (no Dask, bad address,
unreachable scheduler)."""

import os
import signal
import sys

import cloudpickle
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from extradeep import analyse, load_experiment
from extradeep.errors import InputError
from extradeep.io import cluster
from extradeep.io.execute import WorkerLost, run_tasks
from extradeep.simulate import simulate

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import test modules
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client():
    # "local": the LocalCluster extradeep starts itself (one thread per worker process, scheduler retries off)
    with cluster.connect("local", jobs=2) as connected:
        connected.wait_for_workers(2, timeout=60)
        yield connected


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("cluster-study")
    simulate(
        out, app="toy", params={"ranks": [2, 3, 4, 5, 6]}, repetitions=1, epochs=2, train_steps=2, val_steps=1, seed=3
    )
    local = load_experiment(out, ["ranks"], jobs=1, use_cache=False, progress=False)
    return out, local


def _same_values(one, other):
    pd.testing.assert_frame_equal(one.values, other.values)
    pd.testing.assert_frame_equal(one.points, other.points)


def _same_models(one, other):
    _same_values(one, other)
    assert one.settings["exposure"] == other.settings["exposure"]
    first, second = analyse(one), analyse(other)
    for table in ("application_models", "region_models"):
        mine, theirs = getattr(first, table), getattr(second, table)
        pd.testing.assert_frame_equal(mine.drop(columns="model"), theirs.drop(columns="model"))
        assert list(map(repr, mine["model"])) == list(map(repr, theirs["model"]))  # terms and coefficients


def test_cluster_gives_the_models_of_the_local_path(client, study, tmp_path):
    directory, local = study
    seen = []
    on_cluster = load_experiment(
        directory, ["ranks"], cache_dir=tmp_path, scheduler=client, progress=lambda done, total, path: seen.append(done)
    )
    _same_models(local, on_cluster)
    assert seen == list(range(1, len(local.provenance) + 1))  # progress counted every file once
    cached = load_experiment(directory, ["ranks"], cache_dir=tmp_path, scheduler=client, progress=False)
    _same_values(local, cached)
    assert (
        cached.settings["exposure"] == local.settings["exposure"]
    )  # the entries the workers and the caller stored read back the same


def test_a_worker_killed_mid_run_still_finishes_with_a_note(client, study):
    directory, local = study
    pids = client.run(os.getpid)
    victim = min(pids.values())

    def kill_once(done, total, path):
        if done == 2:
            os.kill(victim, signal.SIGKILL)

    on_cluster = load_experiment(
        directory, ["ranks"], use_cache=False, scheduler=client, progress=kill_once, replay=False
    )
    client.wait_for_workers(2, timeout=300)  # the nanny restarts the worker
    _same_values(local, on_cluster)
    assert any("worker" in note and "left the cluster" in note for note in on_cluster.settings["notes"])
    assert not on_cluster.problems


def _dies_on_first_try(marker, value):
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)  # the worker process dies, as in an out-of-memory kill
    return value * 2


def _always_dies_for(bad, value):
    if value == bad:
        os._exit(1)
    return value * 2


def test_a_call_whose_worker_died_is_retried_once(client, tmp_path):
    calls = [(str(tmp_path / "marker"), value) for value in range(6)]
    results, notes = run_tasks(_dies_on_first_try, calls, client=client)
    assert results == [value * 2 for value in range(6)]
    assert any("ran a second time" in note for note in notes)


def test_a_call_whose_worker_dies_twice_is_reported_and_the_rest_kept(client):
    results, _ = run_tasks(_always_dies_for, [(3, value) for value in range(6)], client=client)
    client.wait_for_workers(2, timeout=300)
    assert [r for i, r in enumerate(results) if i != 3] == [value * 2 for value in range(6) if value != 3]
    assert isinstance(results[3], WorkerLost) and "died twice" in results[3]


def test_local_pool_retries_alone_and_reports(tmp_path):
    results, _ = run_tasks(_always_dies_for, [(3, value) for value in range(6)], jobs=2)
    assert [r for i, r in enumerate(results) if i != 3] == [value * 2 for value in range(6) if value != 3]
    assert isinstance(results[3], WorkerLost)
    results, _ = run_tasks(_dies_on_first_try, [(str(tmp_path / "m"), v) for v in range(4)], jobs=2)
    assert results == [0, 2, 4, 6]


def test_unreachable_scheduler_and_bad_address_are_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1)
    with (
        pytest.raises(InputError, match=r"tcp://127.0.0.1:9: cannot reach the Dask scheduler"),
        cluster.connect("tcp://127.0.0.1:9"),
    ):
        pass
    with pytest.raises(InputError, match="is no scheduler address"), cluster.connect("my cluster"):
        pass


def test_without_dask_a_scheduler_is_refused_in_one_line(monkeypatch, capsys, tmp_path):
    from extradeep.cli import main

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    assert main(["model", str(tmp_path), "--scheduler", "tcp://127.0.0.1:8786"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        (
            "extradeep: error: --scheduler: needs Dask: pip install 'extradeep[cluster]' "
            "(dask[distributed] and dask-jobqueue)"
        )
    ]


def test_scheduler_from_the_environment(monkeypatch):
    monkeypatch.setenv(cluster.SCHEDULER_ENV, "tcp://10.0.0.1:8786")
    assert cluster.scheduler_from_env(None) == "tcp://10.0.0.1:8786"
    assert cluster.scheduler_from_env("local") == "local"
    monkeypatch.delenv(cluster.SCHEDULER_ENV)
    assert cluster.scheduler_from_env(None) is None
