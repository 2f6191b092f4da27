"""Paths and constants the tests share, importable by name (`from shared_data import ...`): pytest puts
tests/ on sys.path for its root conftest.py. A module of its own, because several folders have a conftest.py
and `from conftest import` would find whichever came first."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REAL_NSYS = Path(os.environ.get("EXTRADEEP_REAL_NSYS", REPO.parent / "shared" / "real_nsys"))
REAL_KINETO = Path(os.environ.get("EXTRADEEP_REAL_KINETO", REPO.parent / "shared" / "real_kineto"))

# simulated GPT layout studies (issue 23): tiny models, shared by the simulator and layout-reader tests
GPT_TINY = {"layers": 4, "hidden": 256, "heads": 4, "seq": 256, "vocab": 2048}


# a 130M-parameter GPT profiled by the simulator on A100s (issue 23: kernel classes, memory, transfer)
MEDIUM_SHAPE = {"layers": 8, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 51200}
MEDIUM_PROFILED = [
    "tp1.pp1.dp1.mbs1.nmb8",
    "tp2.pp1.dp1.mbs1.nmb8",
    "tp1.pp2.dp1.mbs1.nmb8",
    "tp4.pp1.dp1.mbs1.nmb8.rc2",
]


def medium_gpt():
    """The simulator's GPTModel of MEDIUM_SHAPE (imported here, so this module stays import-light)."""
    from extradeep.simulate.gpt.config import GPTModel

    return GPTModel(**MEDIUM_SHAPE, name="gpt-medium")


MEDIUM_GPT = medium_gpt()


def real_exports() -> list[Path]:
    return sorted(REAL_NSYS.glob("*.sqlite")) if REAL_NSYS.is_dir() else []


def real_kineto_traces() -> list[Path]:
    return sorted(REAL_KINETO.glob("*.json.gz")) if REAL_KINETO.is_dir() else []


# five small simulated configurations (ranks 2..6, one repetition, two training steps): the quickest
# input a modeling command accepts
SMALL_RUNS = dict(params={"ranks": [2, 3, 4, 5, 6]}, repetitions=1, train_steps=2, val_steps=1, truth_replicates=0)


def simulate_small_runs(folder: Path) -> Path:
    """SMALL_RUNS simulated into `folder` (with its extradeep.toml); returns the folder."""
    from extradeep.simulate import simulate

    simulate(folder, progress=False, **SMALL_RUNS)
    return folder
