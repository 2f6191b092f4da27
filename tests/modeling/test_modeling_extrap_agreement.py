"""Agreement with Extra-P 4.2.5's chosen models on noise-free Extra-P text inputs.

The answers of Extra-P 4.2.5 are recorded in data/extrap_4.2.5_noise_free.json by
benchmarks/extrap_record.py (which runs Extra-P from its own venv), so the comparison runs
everywhere. The inputs Extra-P saw are stored beside it (data/extrap_inputs/, their sha256 is in
the record), so the comparison does not depend on the last bits of this machine's floating point;
the generator that wrote them is checked against them with a tolerance. When an Extra-P venv
exists (EXTRADEEP_EXTRAP_PYTHON or /tmp/extrap-venv), the slow live test also runs Extra-P itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from extradeep.modeling import model_extrap_text, read_extrap_text

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "data" / "extrap_4.2.5_noise_free.json"
STORED = Path(__file__).resolve().parent / "data" / "extrap_inputs"
EXTRAP_PYTHON = Path(os.environ.get("EXTRADEEP_EXTRAP_PYTHON", "/tmp/extrap-venv/bin/python"))


def _record_module():
    spec = importlib.util.spec_from_file_location("extrap_record", REPO / "benchmarks" / "extrap_record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def record():
    return _record_module()


@pytest.fixture(scope="module")
def inputs():
    return {name: STORED / f"{name}.txt" for name in ("one", "two")}


@pytest.fixture(scope="module")
def regenerated(record, tmp_path_factory):
    return record.make_inputs(tmp_path_factory.mktemp("extrap_inputs"))


@pytest.fixture(scope="module")
def recorded():
    return json.loads(FIXTURE.read_text())


def _terms(terms: list[dict], n_params: int) -> list[tuple]:
    """Terms as tuples of exact (i, j) per parameter ((0, 0) for a parameter a term does not use)."""
    out = []
    for term in terms:
        full = [(Fraction(0), Fraction(0))] * n_params
        for p, (i, j) in term.items():
            full[int(p)] = (Fraction(i), Fraction(j))
        out.append(tuple(full))
    return out


def _ours_as_records(path: Path) -> dict[str, dict]:
    table = model_extrap_text(path)
    out = {}
    for row in table.itertuples(index=False):
        m = row.model
        assert m is not None, (row.region, row.reason)
        out[row.region] = {
            "terms": [{str(k): f for k, f in enumerate(t)} for t in m.terms],
            "coefficients": [float(c) for c in m.coefficients],
            "formula": m.formula(),
        }
    return out


def _compare(theirs: list[dict], ours: dict[str, dict], n_params: int) -> None:
    assert sorted(ours) == sorted(m["region"] for m in theirs)
    mismatched = []
    for m in theirs:
        mine = ours[m["region"]]
        want = dict(zip(_terms(m["terms"], n_params), m["coefficients"][1:]))
        got = dict(zip(_terms(mine["terms"], n_params), mine["coefficients"][1:]))
        if set(want) != set(got):
            mismatched.append((m["region"], m["formula"], mine["formula"]))
            continue
        scale = max(abs(c) for c in m["coefficients"])
        np.testing.assert_allclose(
            mine["coefficients"][0],
            m["coefficients"][0],
            rtol=1e-6,
            atol=1e-6 * scale,
            err_msg=f"{m['region']}: constant of {mine['formula']} vs {m['formula']}",
        )
        for term, c in want.items():
            np.testing.assert_allclose(
                got[term], c, rtol=1e-6, err_msg=f"{m['region']}: {mine['formula']} vs {m['formula']}"
            )
    assert not mismatched, f"{len(mismatched)} model(s) differ from Extra-P's: {mismatched}"


def test_stored_inputs_are_the_recorded_ones(record, inputs, recorded):
    assert recorded["extrap_version"] == "4.2.5"
    for name, path in inputs.items():
        assert record.sha256(path) == recorded["inputs"][name]["sha256"], name


def test_regenerated_inputs_are_the_stored_ones(inputs, regenerated):
    """The generator still writes the same regions, points and values, up to the last float bits
    (which differ between machines: numpy's log2 and powers need not be correctly rounded)."""
    key = ["region", "metric", "p", "n", "rep"]
    for name in inputs:
        stored, fresh = read_extrap_text(inputs[name]), read_extrap_text(regenerated[name])
        assert stored.attrs["params"] == fresh.attrs["params"], name
        cols = [c for c in key if c in stored.columns]
        stored, fresh = stored.sort_values(cols).reset_index(drop=True), fresh.sort_values(cols).reset_index(drop=True)
        assert stored[cols].equals(fresh[cols]), name
        np.testing.assert_allclose(fresh["value"], stored["value"], rtol=1e-12, atol=0, err_msg=name)


@pytest.mark.parametrize("name, n_params", [("one", 1), ("two", 2)])
def test_agrees_with_recorded_extrap_models(inputs, recorded, name, n_params):
    theirs = recorded["inputs"][name]["models"]
    assert len(theirs) == (43 if n_params == 1 else 44)  # every default pair, plus the extra regions
    _compare(theirs, _ours_as_records(inputs[name]), n_params)


@pytest.mark.slow
@pytest.mark.parametrize("name, n_params", [("one", 1), ("two", 2)])
def test_agrees_with_live_extrap(record, inputs, name, n_params):
    if not EXTRAP_PYTHON.exists():
        pytest.skip(f"Extra-P 4.2.5 venv not found at {EXTRAP_PYTHON} (set EXTRADEEP_EXTRAP_PYTHON)")
    _compare(record.run_extrap(EXTRAP_PYTHON, inputs[name]), _ours_as_records(inputs[name]), n_params)
