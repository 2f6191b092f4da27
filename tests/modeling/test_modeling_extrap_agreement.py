"""Agreement with Extra-P 4.2.5's chosen models on noise-free Extra-P text inputs.

Extra-P runs from its own venv (never a dependency of extradeep) through
benchmarks/extrap_run.py; set EXTRADEEP_EXTRAP_PYTHON or create /tmp/extrap-venv
(python -m venv /tmp/extrap-venv && /tmp/extrap-venv/bin/pip install extrap==4.2.5).
"""

from __future__ import annotations

import json
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from extradeep.modeling import EXTRAP_PAIRS, model_extrap_text, write_extrap_text
from extradeep.modeling.terms import factor_values

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXTRAP_PYTHON = Path(os.environ.get("EXTRADEEP_EXTRAP_PYTHON", "/tmp/extrap-venv/bin/python"))
P = np.array([4.0, 8, 16, 32, 64])
N = np.array([10.0, 20, 40, 80, 160])


def _extrap(path: Path) -> list[dict]:
    if not EXTRAP_PYTHON.exists():
        pytest.skip(f"Extra-P 4.2.5 venv not found at {EXTRAP_PYTHON} (set EXTRADEEP_EXTRAP_PYTHON)")
    out = subprocess.run([str(EXTRAP_PYTHON), str(REPO / "benchmarks" / "extrap_run.py"), str(path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)["models"]


def _term_sets(terms: list[dict], n_params: int) -> list[frozenset]:
    """Canonical model structure: the set of terms, each a tuple of (i, j) per parameter."""
    out = set()
    for term in terms:
        full = [(Fraction(0), Fraction(0))] * n_params
        for p, (i, j) in term.items():
            full[int(p)] = (Fraction(i), Fraction(j))
        out.add(tuple(full))
    return out


def _compare(path: Path, n_params: int):
    ours = model_extrap_text(path).set_index("region")
    theirs = _extrap(path)
    assert len(theirs) == len(ours)
    for m in theirs:
        mine = ours.loc[m["region"], "model"]
        mine_terms = _term_sets([{str(k): f for k, f in enumerate(t)} for t in mine.terms], n_params)
        assert mine_terms == _term_sets(m["terms"], n_params), (m["region"], m["formula"], mine.formula())


def test_single_parameter_agrees_on_every_default_pair(tmp_path):
    frames = []
    for k, f in enumerate(EXTRAP_PAIRS):
        y = 20.0 + k + 30.0 * factor_values(P, f) / factor_values(np.array([64.0]), f)
        frames.append(pd.DataFrame({"p": np.repeat(P, 2), "value": np.repeat(y, 2), "region": f"r{k}", "metric": "time"}))
    frames.append(pd.DataFrame({"p": P, "value": 5.0, "region": "const", "metric": "time"}))
    path = tmp_path / "one.txt"
    write_extrap_text(path, pd.concat(frames), ["p"])
    _compare(path, 1)


def test_two_parameters_agree(tmp_path):
    X = np.array([[p, n] for p in P for n in N])
    f = [(Fraction(1), Fraction(0)), (Fraction(1, 2), Fraction(0)), (Fraction(0), Fraction(1)),
         (Fraction(2), Fraction(0)), (Fraction(1), Fraction(1))]
    frames = []
    for k in range(len(f)):
        a, b = f[k], f[(k + 2) % len(f)]
        fa, fb = factor_values(X[:, 0], a), factor_values(X[:, 1], b)
        y = 10.0 + (fa * fb / (fa * fb).max() * 20 if k % 2 else fa / fa.max() * 20 + fb / fb.max() * 20)
        frames.append(pd.DataFrame(X, columns=["p", "n"]).assign(value=y, region=f"r{k}", metric="time"))
    path = tmp_path / "two.txt"
    write_extrap_text(path, pd.concat(frames), ["p", "n"])
    _compare(path, 2)
