"""The strategy search on every real profile: a strategy or one line saying why there is none, never
a traceback; and the critical path of the real 2-rank Kineto pair (where HolisticTraceAnalysis 0.5's
critical-path analysis stops with a pandas error) adds up."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from extradeep import columns as C
from extradeep.errors import InputError
from extradeep.predictor.optimize import optimize

_spec = importlib.util.spec_from_file_location(
    "extradeep_tests_root_conftest", Path(__file__).parents[1] / "conftest.py"
)
ROOT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ROOT)


def _multi_rank(path: Path) -> bool:
    info = json.loads(gzip.open(path).read()).get("distributedInfo") or {}
    return int(info.get("world_size") or 1) > 1


def _runs() -> list[tuple[str, list[str]]]:
    runs = [(p.name, [p.name]) for p in ROOT.real_exports()]
    multi = [p for p in ROOT.real_kineto_traces() if _multi_rank(p)]
    runs += [(p.name, [p.name]) for p in multi]
    pair = sorted(p.name for p in multi if "trace_filter_sampled_rank" in p.name)
    if len(pair) == 2:
        runs.append(("trace_filter ranks 0+1", pair))
    return runs or [("absent", [])]


@pytest.mark.parametrize("names", [r[1] for r in _runs()], ids=[r[0][:40] for r in _runs()])
def test_every_real_run_gets_a_strategy_or_one_line_why_not(names):
    if not names:
        ROOT.require_real()
        ROOT.require_real_kineto()
    paths = [(ROOT.require_real(n) if n.endswith(".sqlite") else ROOT.require_real_kineto(n)) for n in names]
    try:
        table = optimize(paths)
    except InputError as exc:  # e.g. an export without CUDA activity, a CPU-only trace
        assert "\n" not in str(exc) and any(Path(p).name in str(exc) for p in paths)
        return
    verdict = table.attrs["verdict"]
    assert "\n" not in verdict
    if table[C.PROPOSED].any():
        best = table[table[C.PROPOSED]].iloc[0]
        assert verdict.startswith("best: ") and best[C.SETTING] in verdict
        assert 0 < best[C.PREDICTED_S] < best[C.MEASURED_S] and best[C.LOWER_S] <= best[C.PREDICTED_S]
    else:
        assert verdict.startswith("nothing to gain")
    numbers = table.select_dtypes("number")
    assert not (numbers.drop(columns=[C.GAIN], errors="ignore") < 0).any().any()  # only a gain may be negative (slower)


def test_the_critical_path_of_the_real_two_rank_pair_adds_up():
    from extradeep.predictor import predict
    from extradeep.predictor.critical_path import CLASSES

    pair = [ROOT.require_real_kineto(f"HTA__trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
    pred = predict(pair)
    assert sorted(pred.files["rank"]) == [0, 1]
    b = pred.breakdown
    assert len(b) and np.allclose(b[list(CLASSES)].sum(axis=1), b["span"], rtol=1e-9)
    assert (b[list(CLASSES)] >= 0).all().all()
