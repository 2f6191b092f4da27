"""`--json` through orjson (issue 17, item 21) says exactly what the standard library said: the same
document, NaN and infinity as null, numpy numbers as plain numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from extradeep.analysis.core import analyse_table
from extradeep.modeling import read_extrap_text, write_extrap_text
from extradeep.report import jsonout


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    """Two regions with known laws, a line and a constant."""
    p = np.repeat([4.0, 8, 16, 32, 64], 2)
    frames = [
        pd.DataFrame({"p": p, "value": 3 + 0.5 * p, "region": "linear", "metric": "time"}),
        pd.DataFrame({"p": p, "value": 7.0, "region": "constant", "metric": "time"}),
    ]
    path = tmp_path_factory.mktemp("json") / "laws.txt"
    write_extrap_text(path, pd.concat(frames, ignore_index=True), ["p"])
    table = read_extrap_text(path)
    return analyse_table(table, table.attrs["params"])


def test_orjson_and_the_standard_library_write_the_same_document(analysis):
    document = jsonout.models_document(analysis, None, None, None, 0.95)
    fast = json.loads(jsonout.dumps(document))
    plain = json.loads(json.dumps(jsonout._clean(document), allow_nan=False))
    assert fast == plain
    regions = {r["region"]: r for r in fast["regions"]}
    assert regions["linear"]["model"]["formula"] == "3 + 0.5 * p"
    assert regions["constant"]["model"]["formula"] == "7"
    assert [m["point"]["p"] for m in regions["linear"]["measured"]] == [4.0, 8.0, 16.0, 32.0, 64.0]


def test_nan_and_numpy_numbers_become_null_and_numbers():
    data = json.loads(jsonout.dumps({"a": np.float64("nan"), "b": np.int64(3), "c": float("inf"), 4: np.float32(0.5)}))
    assert data == {"a": None, "b": 3, "c": None, "4": 0.5}
