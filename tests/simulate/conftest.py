"""Session-scoped simulator runs shared by the simulator tests (small configurations)."""

from __future__ import annotations

import pytest

from extradeep.io.sqlite import open_readonly
from extradeep.simulate import simulate


@pytest.fixture(scope="session")
def ro():
    """Open an export read-only (simulator output and real exports alike), as the library does."""
    return open_readonly


@pytest.fixture(scope="session")
def sim_default(tmp_path_factory):
    return simulate(tmp_path_factory.mktemp("sim_default"), params={"ranks": [2, 3]}, repetitions=1)


@pytest.fixture(scope="session")
def sim_exact(tmp_path_factory):
    """No noise: the rows must reproduce truth.json exactly."""
    return simulate(
        tmp_path_factory.mktemp("sim_exact"),
        params={"ranks": [2, 4], "batch": [32, 64]},
        repetitions=1,
        noise=(0.0, 0.0, 0.0),
    )


@pytest.fixture(scope="session")
def sim_2022(tmp_path_factory):
    return simulate(
        tmp_path_factory.mktemp("sim_2022"),
        params={"ranks": [2]},
        repetitions=1,
        layout="2022",
        marks="marks",
        nvtx_strings="textId",
    )


@pytest.fixture(scope="session")
def sim_ddp(tmp_path_factory):
    return simulate(
        tmp_path_factory.mktemp("sim_ddp"), params={"ranks": [4]}, repetitions=1, ddp=True, marks="profiler"
    )


@pytest.fixture(scope="session")
def all_sims(sim_default, sim_exact, sim_2022, sim_ddp):
    return [sim_default, sim_exact, sim_2022, sim_ddp]
