"""Worker processes never outlive extradeep (extradeep/processes.py): pools never fork the caller,
workers exit when their parent dies, and Ctrl-C or SIGTERM stop a command with all its processes,
without leaked semaphores or tracebacks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from extradeep.processes import WATCH_S, pool_context, process_pool

REPO = Path(__file__).resolve().parents[1]
EXTRADEEP = [sys.executable, "-c", "import sys; from extradeep.cli import main; sys.exit(main())"]


def _pid_of_worker() -> int:
    return os.getpid()


def test_pools_never_fork_the_caller():
    assert pool_context().get_start_method() in ("forkserver", "spawn")
    with process_pool(2) as pool:
        pids = {pool.submit(_pid_of_worker).result() for _ in range(4)}
    assert pids and os.getpid() not in pids


ORPHAN = """
import os, time
from extradeep.processes import process_pool
pool = process_pool(2)
[pool.submit(os.getpid).result() for _ in range(8)]
time.sleep(600)
"""


def test_workers_exit_when_their_parent_is_killed(process_tree):
    """SIGKILL leaves no handler to run in the parent: the workers notice by themselves."""
    tree = process_tree([sys.executable, "-c", ORPHAN])
    tree.wait_for_descendants(3)  # the forkserver and two workers
    time.sleep(1.0)
    tree.descendants()
    tree.proc.kill()
    tree.proc.wait()
    assert not tree.living_after(8.0 + WATCH_S)


@pytest.mark.parametrize(
    "how, extra, status",
    [
        ("ctrl-c", [], 130),  # the terminal's SIGINT reaches the whole process group
        ("sigterm", [], 143),  # SIGTERM to the command only (kill PID)
        ("ctrl-c", ["--scheduler", "local"], 130),  # a Dask LocalCluster
    ],
)
def test_an_interrupted_model_leaves_nothing_behind(process_tree, tmp_path, how, extra, status):
    argv = [*EXTRADEEP, "model", str(REPO / "sample_profiles"), "--param", "ranks", "--jobs", "2"]
    tree = process_tree([*argv, "--cache-dir", str(tmp_path / "cache"), *extra])
    tree.wait_for_descendants(3)  # the helpers and a worker: reading has begun
    # at once: one pass per file reads the 116 exports in well under a second, and a run that ended
    # before the signal (exit 0, as on an idle machine with 1.0 s here) tests nothing
    time.sleep(0.1)
    if how == "ctrl-c":
        os.killpg(tree.proc.pid, signal.SIGINT)
    else:
        tree.proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    assert tree.proc.wait(timeout=8) == status
    err = tree.proc.stderr.read()
    assert not tree.living_after(8.0 - (time.monotonic() - stopped)), err
    assert "leaked" not in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == "extradeep: interrupted", err


def test_sigterm_handler_is_restored_after_a_command(tmp_path):
    from extradeep.cli import main

    before = signal.getsignal(signal.SIGTERM)
    assert main(["inspect", str(tmp_path / "missing.sqlite")]) == 2
    assert signal.getsignal(signal.SIGTERM) == before


def test_no_fork_warning_on_any_python(tmp_path):
    """Python 3.12+ warns when a multi-threaded process forks; the pools never fork, so a run with
    threads alive (and warnings as errors) reads in worker processes without a warning."""
    code = (
        "import threading, time, warnings, sys\n"
        "warnings.simplefilter('error')\n"
        "threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
        "from extradeep.io.execute import run_tasks\n"
        "import math\n"
        "results, notes = run_tasks(math.sqrt, [(4.0,), (9.0,), (16.0,)], jobs=2)\n"
        "assert results == [2.0, 3.0, 4.0], results\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "fork" not in done.stderr, done.stderr


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is a Linux call")
def test_default_jobs_follow_the_cpus_this_process_may_use():
    """Pinned to one CPU (taskset, a Slurm allocation, a container's cpuset) on a machine with more,
    extradeep starts no more workers than it may run: os.cpu_count() would count every CPU."""
    code = (
        "import os\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "from extradeep.processes import usable_cpus\n"
        "print(usable_cpus(), os.cpu_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    usable, machine = (int(v) for v in done.stdout.split())
    assert usable == 1 and machine >= 1


HALF_A_RESULT = """
import time
from extradeep.processes import process_pool
from half_a_result import write_half_a_result
pool = process_pool(1)
future = pool.submit(write_half_a_result)
time.sleep(3.0)  # the pool's manager thread has read the header and waits for the rest
pool.stop()
print("stopped", flush=True)
"""


def test_a_worker_stopped_halfway_through_its_result_never_hangs_the_exit(tmp_path):
    """A worker killed while it writes its result leaves half a message in the result pipe; the pool's
    manager thread then waits for the rest, and Python joins that thread at exit: the command never
    ended (one SIGTERM in ten while reading). The worker here writes half a message by itself."""
    (tmp_path / "half_a_result.py").write_text(
        "import gc, os, struct, time\n"
        "from multiprocessing.queues import SimpleQueue\n"
        "def write_half_a_result():\n"
        "    results = next(o for o in gc.get_objects() if isinstance(o, SimpleQueue))\n"
        "    os.write(results._writer.fileno(), struct.pack('!i', 1000) + b'half')\n"
        "    time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", HALF_A_RESULT], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr


def test_the_forkserver_preloads_extradeep_only_where_the_directory_resolves_it_to_this_package(tmp_path):
    """Before Python 3.12 the forkserver imports its preload with the current directory first on
    sys.path: a folder holding another `extradeep/` (a source checkout beside an installed package)
    must not hand that one to every worker."""
    from extradeep.processes import PACKAGE, PRELOAD, preload_modules

    assert preload_modules(tmp_path) == PRELOAD  # nothing named extradeep here
    (tmp_path / "extradeep").mkdir()
    assert preload_modules(tmp_path) == [name for name in PRELOAD if not name.startswith("extradeep")]
    assert preload_modules(PACKAGE.parent) == PRELOAD  # this package's own folder is this package


BLAS_PROBE = """
import os, sys
from extradeep.cli import main
try:
    main(["--version"])
except SystemExit:
    pass
print(os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("MKL_NUM_THREADS"), "numpy" in sys.modules)
"""


@pytest.mark.parametrize("given, expected", [(None, "1 1"), ("3", "3 1")])
def test_commands_keep_blas_to_one_thread_unless_the_user_sets_a_number(given, expected):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", BLAS_PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # set before NumPy is imported, the only time OpenBLAS reads it
    assert done.stdout.splitlines()[-1].split() == [*expected.split(), "False"]


BLAS_BLOCK_PROBE = """
import numpy, scipy.linalg  # loaded first, as in a notebook
from threadpoolctl import threadpool_info
from extradeep.processes import blas_single_threaded

def blas_threads():
    return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})

before = blas_threads()
with blas_single_threaded():
    inside = blas_threads()
print(before, inside, blas_threads(), sep="|")
"""


@pytest.mark.parametrize("given", [None, "2"])
def test_blas_is_one_thread_inside_the_block_unless_the_user_set_a_number(given):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "VECLIB_MAXIMUM_THREADS"}
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", BLAS_BLOCK_PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, inside, after = done.stdout.splitlines()[-1].split("|")
    assert after == before  # restored
    assert inside == (before if given else "[1]")
