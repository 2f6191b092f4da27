"""Layout-model fixtures, computed once per session: the published vTrain tables, the
leave-one-model-out check on them, and a model calibrated on all of them."""

from __future__ import annotations

import pandas as pd
import pytest
from shared_data import MEDIUM_GPT, MEDIUM_PROFILED, MEDIUM_SHAPE

from extradeep.layout_profiles import read_profiled_runs
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.validation import VTRAIN_CLUSTER, leave_one_model_out, vtrain_tables
from extradeep.simulate.gpt.study import simulate_gpt


@pytest.fixture(scope="session")
def vtrain(published):
    """(single-node table, multi-node table) as read by read_layout_table."""
    published("vtrain_single_node.csv")
    published("vtrain_multi_node.csv")
    return vtrain_tables(published())


@pytest.fixture(scope="session")
def held_out(published):
    """(per-layout predictions, summary per left-out model) of the leave-one-model-out check."""
    published("vtrain_multi_node.csv")
    return leave_one_model_out(published())


@pytest.fixture(scope="session")
def vtrain_model(vtrain):
    """A layout model calibrated on every vTrain layout (no intervals: fast)."""
    return LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(pd.concat(vtrain, ignore_index=True))


# -- simulated A100 profiles of a medium GPT on <= 4 GPUs (nsys only): kernel classes, memory, transfer --


@pytest.fixture(scope="session")
def a100_study(tmp_path_factory):
    """(paths, layout model calibrated on the profiles' parts, kernel-class observations) of four
    simulated A100 runs on <= 4 GPUs, read once."""
    out = tmp_path_factory.mktemp("a100_study")
    simulate_gpt(out, MEDIUM_PROFILED, model=MEDIUM_GPT, steps=3, formats=("nsys",), noise=(0.01, 0.005, 0.005))
    paths = sorted(str(p) for p in out.glob("*.sqlite"))
    profiled = read_profiled_runs(paths, MEDIUM_SHAPE)
    return paths, LayoutModel().fit(None, profiled.parts), profiled.kernel_classes
