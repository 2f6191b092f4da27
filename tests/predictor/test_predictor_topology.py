"""`ranks=P` across a node boundary: collectives re-costed on the cluster layout and the system's
links, against the simulator's run regenerated at P ranks (its truth)."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.predictor import predict
from extradeep.predictor.whatif import rescale_on_layout
from extradeep.simulate import simulate
from extradeep.system import PRESETS, collective_time

# 4 GPUs per node sharing one NIC: the network is ~30x slower per GPU than NVLink
RUN = dict(repetitions=1, epochs=2, train_steps=3, val_steps=1, ddp=True, seed=11, topology="4gpu-1nic")
SPEC = "ranks=8; comm.algorithm=ring"


@pytest.fixture(scope="module")
def one_node_and_two(tmp_path_factory):
    inside = simulate(tmp_path_factory.mktemp("p4"), params={"ranks": [4]}, **RUN).outdir
    across = simulate(tmp_path_factory.mktemp("p8"), params={"ranks": [8]}, **RUN).outdir
    return inside, predict(across).summary


def _train(summary, scenario, column):
    row = summary[(summary["scenario"] == scenario) & (summary["phase"] == "train")]
    return float(row[column].iloc[0])


def test_ranks_across_a_node_boundary_with_the_system_file(one_node_and_two):
    inside, truth = one_node_and_two
    told = predict(inside, what_if=SPEC, system="4gpu-1nic")
    want = _train(truth, "measured durations", "measured")
    got = _train(told.summary, SPEC, "predicted")
    before = _train(told.summary, "measured durations", "measured")
    assert want > 1.5 * before  # the network makes the all-reduce exposed: a change worth predicting
    assert got == pytest.approx(want, rel=0.03)
    assert abs((got - before) - (want - before)) <= 0.05 * (want - before)
    # the exports' host names give the layout (they agree with the file), the system file the links
    assert any("layout from the profiles' host names" in n and "ranks=8: 2" in n for n in told.notes)
    assert not any(n.startswith("WARNING") for n in told.notes)


def test_without_the_network_the_what_if_warns(one_node_and_two):
    inside, truth = one_node_and_two
    bare = predict(inside, what_if=SPEC)
    assert any("layout from the profiles' host names" in n for n in bare.notes)  # 4 GPUs per node, no flag
    assert any(n.startswith("WARNING: the traced run lies inside one node") for n in bare.notes)
    # it assumed the node's links, as it says: faster than the truth
    assert _train(bare.summary, SPEC, "predicted") < _train(truth, "measured durations", "measured")


@pytest.mark.parametrize("algorithm", ["ring", "tree", "hierarchical"])
@pytest.mark.parametrize("kind", ["allreduce", "allgather", "broadcast"])
def test_rescale_on_layout_recovers_the_system_cost(kind, algorithm):
    system = PRESETS["dgx-8-nvswitch"]
    for p_from, p_to in ((4, 32), (8, 64), (16, 6), (24, 128)):
        pure = float(collective_time(kind, algorithm, p_from, 25e6, system)[0])
        want = float(collective_time(kind, algorithm, p_to, 25e6, system)[0])
        got = rescale_on_layout(kind, pure, 0.0, p_from, p_to, algorithm, 8, system)
        assert got == pytest.approx(want, rel=1e-9)
    # twice the bandwidth halves the volume term, nothing else
    pure = float(collective_time(kind, algorithm, 16, 25e6, system)[0])
    volume = pure - float(collective_time(kind, algorithm, 16, 0.0, system)[0])
    halved = rescale_on_layout(kind, pure, 0.0, 16, 16, algorithm, 8, system, bandwidth=2.0)
    assert np.isclose(halved, pure - volume / 2)
