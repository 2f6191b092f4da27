"""`fake_nvtx`: the recording stand-in for `nvtx` (tests/data/fake_nvtx) installed for one test."""

import importlib.util
import sys
from pathlib import Path

import pytest

from extradeep.capture import marks

FAKE_NVTX = Path(__file__).resolve().parents[2] / "data" / "fake_nvtx" / "nvtx.py"


@pytest.fixture
def fake_nvtx(monkeypatch):
    spec = importlib.util.spec_from_file_location("nvtx", FAKE_NVTX)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "nvtx", module)
    monkeypatch.setenv("EXTRADEEP_NVTX", "1")
    monkeypatch.delenv("EXTRADEEP_FAKE_NVTX_LOG", raising=False)
    for name in (
        "EXTRADEEP_TRAIN_STEPS",
        "EXTRADEEP_VAL_STEPS",
        "EXTRADEEP_EPOCHS",
        "EXTRADEEP_SAMPLING",
        "EXTRADEEP_CUDA_PROFILER",
    ):
        monkeypatch.delenv(name, raising=False)
    marks.refresh()
    yield module
    monkeypatch.undo()
    marks.refresh()
