"""Simulator runs for the predictor tests: one DDP-like run and its regenerations with changes."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from extradeep.simulate import simulate

# tests/conftest.py (the real data folders), loaded by path: "conftest" is this file here
_spec = importlib.util.spec_from_file_location(
    "extradeep_tests_root_conftest", Path(__file__).parents[1] / "conftest.py"
)
ROOT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ROOT)
KINETO_PAIR = ("HTA__trace_filter_sampled_rank-0.json.gz", "HTA__trace_filter_sampled_rank-1.json.gz")

DDP_RUN = dict(params={"ranks": [4]}, repetitions=1, epochs=2, train_steps=3, val_steps=1, ddp=True, seed=11)
# what-if spec -> the simulator's knobs that regenerate the same run with that change (4 buckets by default)
REGENERATED = {
    "kernel:*gemm*=0.5": dict(kernel_scale={"*gemm*": 0.5}),
    "comm.bandwidth=2": dict(nccl_bandwidth_scale=2.0),
    "kernel:*gemm*=0.5; comm.bandwidth=2": dict(kernel_scale={"*gemm*": 0.5}, nccl_bandwidth_scale=2.0),
    "cpu=0.5": dict(cpu_scale=0.5),
    "fusion=2": dict(buckets=2),
    "fusion=4": dict(buckets=1),
}


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def sha256():
    """Hash of a file's bytes, to check that inputs are left untouched."""
    return _sha256


def pytest_generate_tests(metafunc):
    if "regen_spec" in metafunc.fixturenames:
        metafunc.parametrize("regen_spec", list(REGENERATED))
    if "real_run" in metafunc.fixturenames:
        runs = [(p.name,) for p in ROOT.real_kineto_traces() + ROOT.real_exports()]
        runs += [KINETO_PAIR] if ROOT.real_kineto_traces() else []
        metafunc.parametrize("real_run_names", runs or [None], ids=[r[0][:40] for r in runs] or ["absent"])


@pytest.fixture
def real_run(real_run_names) -> list:
    """Paths of one real run: each real Kineto trace and nsys export alone, and the two sampled ranks
    of the 128-rank Kineto job together (skipped, or failed under CI, when the folders are absent)."""
    if real_run_names is None:
        ROOT.require_real_kineto()
        return [ROOT.require_real()]
    nsys = real_run_names[0].endswith(".sqlite")
    return [ROOT.require_real(n) if nsys else ROOT.require_real_kineto(n) for n in real_run_names]


def _sim(tmp_path_factory, name: str, **changes):
    out = tmp_path_factory.mktemp(name)
    simulate(out, **{**DDP_RUN, **changes})
    return out


@pytest.fixture(scope="session")
def ddp_run(tmp_path_factory):
    return _sim(tmp_path_factory, "ddp")


@pytest.fixture(scope="session")
def ddp_both_formats(tmp_path_factory):
    """The DDP-like run written as nsys exports and as Kineto traces: (sqlite paths, trace paths)."""
    out = _sim(tmp_path_factory, "ddp_both", formats=("nsys", "kineto"))
    return sorted(out.glob("*.sqlite")), sorted(out.glob("*.pt.trace.json.gz"))


@pytest.fixture(scope="session")
def ddp_prediction(ddp_run):
    from extradeep.predictor import predict

    return predict(ddp_run, what_if=list(REGENERATED))


@pytest.fixture(scope="session")
def regenerated(tmp_path_factory):
    """The same run regenerated with the changes the what-ifs describe: the 'measured' truth."""
    return {spec: _sim(tmp_path_factory, "regen", **kw) for spec, kw in REGENERATED.items()}


@pytest.fixture(scope="session")
def real_2gpu(real_nsys_dir):
    """The real 2-GPU FSDP slice and its prediction (GPU gaps dropped)."""
    from extradeep.predictor import predict

    path = real_nsys_dir / "GindaChen__nsys-ai__mfu_2gpu_before.sqlite"
    return path, predict(path)


@pytest.fixture(scope="session")
def predicted():
    """predicted(*paths) -> the default Prediction of those files, computed once per session."""
    from extradeep.predictor import predict

    cache = {}

    def get(*paths):
        key = tuple(str(p) for p in paths)
        if key not in cache:
            cache[key] = predict(list(paths))
        return cache[key]

    return get
