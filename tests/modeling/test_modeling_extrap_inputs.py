"""Extra-P's own text-format test inputs (data/extrap_text_inputs, see its MANIFEST.md): every file
that Extra-P 4.2.5 models is modeled, region for region, with no traceback.

The regions Extra-P 4.2.5 modeled in each file are recorded in extrap_4.2.5_models.json
(benchmarks/extrap_record_text.py); the files cover tabs as separators, one to four parameters,
parameters named x, y, z, segmented and strong-scaling data.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from extradeep.cli import main
from extradeep.modeling import model_extrap_text, read_extrap_text

INPUTS = Path(__file__).resolve().parent / "data" / "extrap_text_inputs"
RECORD = json.loads((INPUTS / "extrap_4.2.5_models.json").read_text())
FILES = sorted(RECORD["files"])


def test_the_record_covers_every_stored_file():
    assert RECORD["extrap_version"] == "4.2.5"
    assert FILES == sorted(p.relative_to(INPUTS).as_posix() for p in INPUTS.rglob("*.txt"))
    assert len(FILES) == 57


@pytest.mark.parametrize("name", FILES)
def test_every_region_extrap_models_is_modeled(name):
    table = model_extrap_text(INPUTS / name)
    theirs = {(m["region"], m["metric"]) for m in RECORD["files"][name]}
    assert set(zip(table["region"], table["metric"])) == theirs
    missing = table[table["model"].isna()]
    assert missing.empty, missing[["region", "reason"]].to_dict("records")
    data = read_extrap_text(INPUTS / name)
    params = data.attrs["params"]
    for model in table["model"]:
        assert np.isfinite(np.asarray(model.predict(data[params].to_numpy(float)), dtype=float)).all()


def test_tabs_separate_fields_as_spaces_do(tmp_path):
    tabbed = INPUTS / "two_parameter_segmented_1.txt"
    assert "\t" in tabbed.read_text()
    spaced = tmp_path / "spaced.txt"
    spaced.write_text(tabbed.read_text().replace("\t", " "))
    a, b = read_extrap_text(tabbed), read_extrap_text(spaced)
    assert a.equals(b) and a.attrs["params"] == b.attrs["params"] == ["x", "y"]


@pytest.mark.parametrize(
    "name, shown",
    [
        ("three_parameter_1.txt", ["x=20", "y=1", "z=100"]),  # x, y, z once crashed: 'cannot insert y'
        ("two_parameter_5.txt", ["p=2", "s=10"]),  # tab-separated
        ("mpa/4_param_gpr.txt", ["o=10"]),  # four parameters
    ],
)
def test_the_command_models_the_file(name, shown, capsys):
    assert main(["model", str(INPUTS / name)]) == 0
    out, err = capsys.readouterr()
    listed = out.replace(" = ", "=")  # many configurations are summarised per parameter: "x = 20, 30, ..."
    assert "Region models" in out and all(s in listed for s in shown), out
    assert "Traceback" not in err


def test_tied_parameters_are_modeled_over_the_first(tmp_path):
    """two_parameter_4 varies p and q together ((1000 10) (2000 20) ...): Extra-P answers with
    constants; a model over p alone recovers met2 = 4^k at p = 1000 * 2^k, i.e. 1e-6 p^2."""
    table = model_extrap_text(INPUTS / "two_parameter_4.txt").set_index("region")
    model = table.loc["met2", "model"]
    assert "vary together" in table.loc["met2", "warnings"]
    np.testing.assert_allclose(model.predict(np.array([[32000.0, 320.0]])), 1e-6 * 32000.0**2, rtol=0.01)
