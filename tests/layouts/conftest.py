"""Layout-model fixtures, computed once per session: the published vTrain tables, the
leave-one-model-out check on them, and a model calibrated on all of them."""

from __future__ import annotations

import pandas as pd
import pytest

from extradeep.layouts.model import LayoutModel
from extradeep.layouts.validation import VTRAIN_CLUSTER, leave_one_model_out, vtrain_tables


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
