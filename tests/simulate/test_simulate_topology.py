"""The simulator's topology: exports carry the node layout as nsys writes it; collectives cost alpha-beta."""

import json
import sqlite3

import numpy as np
import pytest

from extradeep.errors import InputError
from extradeep.simulate import simulate
from extradeep.system import PRESETS, collective_time, cost_features, load_system


@pytest.fixture(scope="module")
def topo(tmp_path_factory):
    out = tmp_path_factory.mktemp("topo")
    return simulate(
        out,
        params={"ranks": [2, 6]},
        repetitions=1,
        epochs=1,
        train_steps=2,
        val_steps=0,
        topology="4gpu-1nic-per-gpu",
        truth_ranks=[16],
        truth_replicates=0,
        noise=(0, 0, 0),
    )


def _rows(path, sql):
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_exports_carry_hosts_and_the_nodes_gpus(topo):
    files = topo.files[topo.files["ranks"] == 6].sort_values("rank")
    hosts, devices = [], []
    for row in files.itertuples():
        gpus = _rows(row.path, "SELECT id, uuid FROM TARGET_INFO_GPU ORDER BY id")
        assert len(gpus) == 4 and len({u for _, u in gpus}) == 4
        hosts.append(_rows(row.path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")[0][0])
        devices.append(_rows(row.path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    assert hosts[:4] == [hosts[0]] * 4 and hosts[4] == hosts[5] != hosts[0]
    assert devices == [[(r % 4,)] for r in range(6)]


def test_truth_records_layout_and_true_collective_times(topo):
    truth = json.loads((topo.outdir / "truth.json").read_text())
    assert truth["topology"]["gpus_per_node"] == 4
    system = PRESETS["4gpu-1nic-per-gpu"]
    by_ranks = {p["params"]["ranks"]: p for p in truth["points"] + truth["truth_points"]}
    assert [by_ranks[r]["nodes"] for r in (2, 6, 16)] == [1, 2, 4]
    for ranks, point in by_ranks.items():
        reduce = next(c for c in point["collectives"] if c["collective"] == "allreduce")
        expected = collective_time("allreduce", "ring", ranks, reduce["bytes"], system)[0]
        assert reduce["pure_s"] == pytest.approx(expected + 4e-6, rel=1e-9)
    # crossing the node boundary costs the slower link: the per-step all-reduce jumps
    steps = {
        r: next(c["pure_per_step_s"] for c in p["collectives"] if c["collective"] == "allreduce")
        for r, p in by_ranks.items()
    }
    assert steps[6] > 3 * steps[2]


def test_cost_features_follow_the_algorithms():
    p = np.array([2, 4, 8, 16])
    ring = cost_features("allreduce", "ring", p, 1e6, 4)
    assert np.allclose(ring[:2, 0], 2 * (p[:2] - 1)) and np.allclose(ring[2:, 2], 2 * (p[2:] - 1))
    assert np.allclose(ring[:2, 1], 2 * (p[:2] - 1) / p[:2] * 1e6) and not ring[2:, :2].any()
    tree = cost_features("allreduce", "tree", p, 1e6, 4)
    assert np.allclose(tree[:, 0] + tree[:, 2], 2 * np.log2(p))
    hier = cost_features("allreduce", "hierarchical", p, 1e6, 4)
    assert np.allclose(hier[2:, 3], 2 * (p[2:] / 4 - 1) / (p[2:] / 4) * 1e6 / 4)


def test_system_file_reads_units_and_refuses_nonsense(tmp_path):
    good = tmp_path / "sys.toml"
    good.write_text('preset = "dgx-8-nvswitch"\ninter-bandwidth = "12.5 GB/s"\ninter-latency = "10 us"\n')
    system = load_system(good)
    assert (
        system.gpus_per_node == 8 and system.inter_bandwidth == 12.5e9 and system.inter_latency == pytest.approx(1e-5)
    )
    bad = tmp_path / "bad.toml"
    bad.write_text("gpus-per-node = 0\n")
    with pytest.raises(InputError, match="gpus-per-node"):
        load_system(bad)
    with pytest.raises(InputError, match="preset"):
        load_system(tmp_path / "missing.toml")
