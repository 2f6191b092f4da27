"""Shared fixtures: real exports from ../shared/real_nsys (env EXTRADEEP_REAL_NSYS), real Kineto traces from
../shared/real_kineto (env EXTRADEEP_REAL_KINETO) and simulator output."""

from __future__ import annotations

import gzip
import json
import os
from decimal import Decimal
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from extradeep.processes import one_blas_thread  # noqa: E402  (light: it imports no NumPy)

# One BLAS thread per process, as the commands use, set before NumPy loads: two xdist workers with
# OpenBLAS's threads each oversubscribe 2 cores, and its spinning threads made the layout tests 40%
# slower (tests/layouts: 201 s -> 141 s on 2 busy cores).
one_blas_thread()

from shared_data import GPT_TINY, REAL_KINETO, REAL_NSYS, REPO, real_exports, real_kineto_traces

__all__ = ["GPT_TINY", "REAL_KINETO", "REAL_NSYS", "REPO", "real_exports", "real_kineto_traces"]


def pytest_xdist_auto_num_workers(config) -> int:
    """Workers for `-n auto` (pyproject's default): one more than the CPUs this process may use (its
    affinity and a container's CPU quota, rather than the host's cores, which psutil counts, so that
    a 2-CPU container on a large host does not start eight workers). Many tests wait on the
    processes they start, GUI timers and worker pools; the extra worker fills those gaps: on 2 CPUs
    the suite took 9.7 min with 3 workers against 11.2 min with 2."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    usable = max(1, min(cpus, int(quota))) if quota else cpus
    return usable + 1


def _cgroup_cpu_quota() -> float | None:
    """CPUs the container may use (cgroup v2 cpu.max, else v1 cfs quota), or None without a limit."""
    for path, split in (("/sys/fs/cgroup/cpu.max", None), ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "period")):
        try:
            text = Path(path).read_text().split()
            if split:
                text += Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text().split()
            quota, period = float(text[0]), float(text[1])
        except (OSError, ValueError, IndexError):
            continue  # "max" (v2) or a missing file: no limit there
        if quota > 0 and period > 0:
            return quota / period
    return None


@pytest.fixture(scope="session")
def real_nsys_dir() -> Path:
    return require_real()


def require_real(name: str | None = None) -> Path:
    """Path of the real exports folder (or one file in it); skips, or fails under CI, when absent."""
    if not REAL_NSYS.is_dir():
        if os.environ.get("EXTRADEEP_REQUIRE_REAL_NSYS"):
            pytest.fail(f"real exports required but {REAL_NSYS} is absent")
        pytest.skip(f"real Nsight exports not found at {REAL_NSYS} (set EXTRADEEP_REAL_NSYS)")
    return REAL_NSYS if name is None else REAL_NSYS / name


REAL_PUBLISHED = Path(os.environ.get("EXTRADEEP_PUBLISHED", REPO.parent / "shared" / "published"))


def require_published(name: str | None = None) -> Path:
    """Path of the published measurements (../shared/published, env EXTRADEEP_PUBLISHED), or one file
    in it; skips when absent, fails under CI (EXTRADEEP_REQUIRE_REAL_NSYS) as the real exports do."""
    target = REAL_PUBLISHED if name is None else REAL_PUBLISHED / name
    if not target.exists():
        if os.environ.get("EXTRADEEP_REQUIRE_REAL_NSYS"):
            pytest.fail(f"published measurements required but {target} is absent")
        pytest.skip(f"published measurements not found at {target} (set EXTRADEEP_PUBLISHED)")
    return target


def require_real_kineto(name: str | None = None) -> Path:
    """Path of the real Kineto traces folder (or one file in it); skips, or fails when
    EXTRADEEP_REQUIRE_REAL_KINETO is set (CI), when absent."""
    if not REAL_KINETO.is_dir():
        if os.environ.get("EXTRADEEP_REQUIRE_REAL_KINETO"):
            pytest.fail(f"real Kineto traces required but {REAL_KINETO} is absent")
        pytest.skip(f"real Kineto traces not found at {REAL_KINETO} (set EXTRADEEP_REAL_KINETO)")
    return REAL_KINETO if name is None else REAL_KINETO / name


def pytest_generate_tests(metafunc):
    """`real_trace` runs a test once per real Kineto trace (skipped, or failed under CI, when absent)."""
    if "real_trace" in metafunc.fixturenames:
        names = [p.name for p in real_kineto_traces()] or [None]
        metafunc.parametrize("real_trace_name", names, ids=[(n or "absent")[5:45] for n in names])


@pytest.fixture
def real_trace(real_trace_name) -> Path:
    return require_real_kineto(real_trace_name) if real_trace_name else require_real_kineto()


@pytest.fixture(scope="session")
def real_kineto():
    """real_kineto(name) -> path of one real Kineto trace (skips, or fails under CI, when absent)."""
    return require_real_kineto


@pytest.fixture(scope="session")
def plain_json():
    """A gzip JSON trace as the standard library reads it, numbers with a fraction as exact
    Decimals: the independent reference for counts and times."""
    cache = {}

    def load(path: Path) -> dict:
        if path not in cache:
            with gzip.open(path) as fh:
                cache[path] = json.load(fh, parse_float=Decimal)
        return cache[path]

    return load


def _terminal_signals() -> None:
    """In the child, before exec: Ctrl-C live, as a terminal starts a command. A suite run as a
    background job (`pytest &`, a CI script) has SIGINT ignored, the child would inherit that, and
    Python then installs no KeyboardInterrupt handler."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


class ProcessTree:
    """A command started in its own session (as a terminal starts it), and every process below it."""

    def __init__(self, argv, env=None, cwd=None):
        import subprocess

        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_terminal_signals,
        )
        self.seen: set[int] = set()

    def descendants(self) -> list[int]:
        """The processes below the command now (read from /proc); remembered for `living`."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
        found, todo = [], [self.proc.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                found.append(child)
                todo.append(child)
        self.seen.update(found)
        return found

    def wait_for_descendants(self, count: int, timeout_s: float = 120.0) -> None:
        import time

        end = time.monotonic() + timeout_s
        while len(self.descendants()) < count:
            assert self.proc.poll() is None, f"the command ended early: {self.proc.stderr.read()}"
            assert time.monotonic() < end, f"fewer than {count} processes below the command after {timeout_s} s"
            time.sleep(0.2)

    def living(self) -> list[int]:
        """The command and the processes ever seen below it that still run (zombies count as ended)."""
        alive = []
        for pid in [self.proc.pid, *sorted(self.seen)]:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        return alive

    def living_after(self, seconds: float) -> list[int]:
        """`living()`, polled until nothing lives or `seconds` have passed since now."""
        import time

        end = time.monotonic() + seconds
        while self.living() and time.monotonic() < end:
            time.sleep(0.1)
        return self.living()

    def stop_all(self) -> None:
        import signal

        for pid in self.living():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def process_tree(tmp_path):
    """process_tree(argv, env=None) -> ProcessTree, started in a temporary folder (so `python -c` imports
    the installed package, not the source tree); whatever still runs at the end is killed."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("reads the process tree from /proc (Linux)")
    started: list[ProcessTree] = []

    def start(argv, env=None) -> ProcessTree:
        started.append(ProcessTree(argv, env, cwd=tmp_path))
        return started[-1]

    yield start
    for tree in started:
        tree.stop_all()


@pytest.fixture(scope="session")
def published():
    """published(name) -> path of one file of ../shared/published (skips, or fails under CI, when absent)."""
    return require_published


SAMPLE_PROFILES = REPO / "sample_profiles"
SAMPLE_PREDICT = "16,64,128,256"


@pytest.fixture(scope="session")
def sample_saved(tmp_path_factory):
    """(path, --json document) of sample_profiles/ modeled by `extradeep model --save --json`
    (predictions at SAMPLE_PREDICT), once per session: commands on a saved experiment reuse it."""
    from extradeep.cli import main

    if not any(SAMPLE_PROFILES.glob("*.sqlite")):
        pytest.skip("sample_profiles/ holds no exports")
    folder = tmp_path_factory.mktemp("sample_saved")
    path, doc = folder / "exp.sqlite", folder / "models.json"
    cache = ["--cache-dir", str(tmp_path_factory.getbasetemp() / "extradeep-cache")]
    argv = ["model", str(SAMPLE_PROFILES), "--param", "ranks", *cache, "--predict", SAMPLE_PREDICT]
    assert main([*argv, "--save", str(path), "--json", str(doc)]) == 0
    return path, json.loads(doc.read_text())


# -- simulated GPT layout studies (issue 23): tiny models, shared by the simulator and layout-reader tests --
GPT_LAYOUTS = {
    # name: (layouts, simulate_gpt options)
    "megatron": (
        [
            "tp2.pp2.dp1.mbs1.nmb4.zero0.rc0.vpp1",
            "tp1.pp2.dp2.mbs2.nmb4.zero1.rc2.vpp1",
            "tp1.pp2.dp1.mbs1.nmb4.zero0.rc1.vpp2",
            "tp1.pp1.dp2.mbs1.nmb2.zero2.rc0.vpp1",
            "tp1.pp1.dp2.mbs1.nmb2.zero3.rc0.vpp1",
        ],
        {},
    ),
    "deepspeed": (["tp1.pp2.dp2.mbs1.nmb2.zero1.rc0.vpp1"], {"framework": "deepspeed"}),
    "fsdp": (["tp1.pp1.dp2.mbs1.nmb2.zero3.rc2.vpp1"], {"framework": "fsdp"}),
    "legacy": (["tp2.pp1.dp2.mbs1.nmb2.zero0.rc0.vpp1"], {"nccl_nvtx": "legacy", "formats": ("nsys",)}),
    "no_nccl_nvtx": (["tp2.pp2.dp1.mbs1.nmb2.zero0.rc0.vpp1"], {"nccl_nvtx": "none", "formats": ("nsys",)}),
}


@pytest.fixture(scope="session")
def gpt_studies(tmp_path_factory):
    """name -> GPTStudy of every variant in GPT_LAYOUTS, noise-free (files reproduce truth.json)."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import simulate_gpt

    out = {}
    for name, (layouts, options) in GPT_LAYOUTS.items():
        options = {"formats": ("nsys", "kineto"), **options}
        out[name] = simulate_gpt(
            tmp_path_factory.mktemp(f"gpt_{name}"),
            layouts,
            model=GPTModel(**GPT_TINY),
            noise=(0.0, 0.0, 0.0),
            steps=3,
            **options,
        )
    return out
