"""Where the per-file work runs when it outgrows one machine: a Dask cluster.

`connect(scheduler)` turns what the user named into a `distributed.Client` for the length of one
load: a running scheduler's address (`tcp://host:8786`) or its scheduler file (`dask scheduler
--scheduler-file`), `"local"` (a LocalCluster of worker processes on this machine), `"slurm"` or a
`SlurmOptions` (workers started as Slurm jobs by dask-jobqueue), or a Client the caller already
holds (then it is used and left open). Dask is optional (`pip install 'extradeep[cluster]'`);
without it, naming a scheduler is refused in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import shutil
import sys
from pathlib import Path

from extradeep.errors import InputError

SCHEDULER_ENV = "EXTRADEEP_SCHEDULER"
QUIET_ENV = "DASK_LOGGING__DISTRIBUTED"  # log level of the worker processes started here
CONNECT_TIMEOUT_S = 10
SUBMIT_TIMEOUT_S = 60  # for sbatch to answer
WORKER_TIMEOUT_S = 120  # for a running scheduler to have a worker
ADDRESS = re.compile(r"^(tcp|tls|ucx|inproc|ws|wss)://\S+$|^[\w.\-]+:\d+$")
NEEDS_DASK = "needs Dask: pip install 'extradeep[cluster]' (dask[distributed] and dask-jobqueue)"


def scheduler_from_env(scheduler=None):
    """The scheduler the user named: the argument, else env EXTRADEEP_SCHEDULER, else None (local)."""
    if scheduler not in (None, ""):
        return scheduler
    return os.environ.get(SCHEDULER_ENV) or None


def scheduler_from_options(options: dict):
    """What --scheduler (or the config's `scheduler`, or env EXTRADEEP_SCHEDULER) names; "slurm"
    becomes SlurmOptions from the config's [slurm] table."""
    scheduler = scheduler_from_env(options.get("scheduler"))
    table = options.get("slurm") or {}
    if not isinstance(table, dict):
        raise InputError("slurm", "must be a table ([slurm] with queue, cores, memory, walltime, jobs, account)")
    return SlurmOptions.from_dict(table) if scheduler == "slurm" else scheduler


def import_distributed():
    """dask.distributed, or one line saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise InputError("--scheduler", NEEDS_DASK) from None
    return distributed


@dataclasses.dataclass(frozen=True)
class SlurmOptions:
    """Workers started as Slurm jobs (dask-jobqueue's SLURMCluster): partition, account, cores,
    memory and walltime of each job, how many jobs, and how many worker processes each runs
    (reading is single-threaded Python, so by default one process per core). The `[slurm]` table of
    an extradeep.toml holds the same keys."""

    queue: str | None = None  # the Slurm partition (#SBATCH -p)
    account: str | None = None  # #SBATCH -A
    cores: int = 4  # cores per job
    processes: int | None = None  # worker processes per job (default: cores)
    memory: str = "16GB"  # memory per job
    walltime: str = "01:00:00"
    jobs: int = 1  # jobs started
    job_extra: tuple[str, ...] = ()  # more #SBATCH lines, e.g. "--constraint=cpu"
    python: str | None = None  # the workers' Python (default: this one)
    local_directory: str | None = None  # workers' scratch space (node-local disk)
    start_timeout: int = 600  # seconds for the first worker to join (the jobs wait in the queue meanwhile)

    def __post_init__(self):
        for name in ("cores", "jobs", "start_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"slurm.{name}", f"must be a whole number >= 1, got {value!r}")
        if self.processes is not None and not (isinstance(self.processes, int) and 1 <= self.processes <= self.cores):
            raise InputError(
                "slurm.processes", f"must be a whole number from 1 to cores ({self.cores}), got {self.processes!r}"
            )
        if not re.fullmatch(r"(\d+-)?\d{1,2}(:\d{2}){0,2}", str(self.walltime)):
            raise InputError("slurm.walltime", f"must look like HH:MM:SS or D-HH:MM:SS, got {self.walltime!r}")
        object.__setattr__(self, "job_extra", tuple(str(line) for line in self.job_extra))

    @classmethod
    def from_dict(cls, data: dict | None) -> SlurmOptions:
        """From a `[slurm]` table (keys with - or _); an unknown key is refused in one line."""
        data = {str(k).replace("-", "_"): v for k, v in (data or {}).items()}
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise InputError("[slurm]", f"unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
        if isinstance(data.get("job_extra"), str):
            data["job_extra"] = [data["job_extra"]]
        return cls(**data)

    def cluster_arguments(self) -> dict:
        """The keyword arguments of dask_jobqueue.SLURMCluster."""
        arguments = {
            "queue": self.queue,
            "account": self.account,
            "cores": self.cores,
            "processes": self.processes or self.cores,
            "memory": self.memory,
            "walltime": self.walltime,
            "job_extra_directives": list(self.job_extra),
            "python": self.python or sys.executable,
            "local_directory": self.local_directory,
        }
        return {k: v for k, v in arguments.items() if v is not None}

    def check_job(self, cluster) -> None:
        """Let sbatch validate the job script without submitting it (`sbatch --test-only`), so that a
        refused job is one line here, not an error inside Dask's event loop and a cluster that never starts."""
        import subprocess
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="extradeep-job-") as script:
            script.write(cluster.job_script())
            script.flush()
            try:
                done = subprocess.run(
                    ["sbatch", "--test-only", script.name], capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                raise InputError("--scheduler slurm", f"sbatch gave no answer within {SUBMIT_TIMEOUT_S} s") from None
        if done.returncode != 0:
            said = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            raise InputError(
                "--scheduler slurm", f"sbatch refuses the job: {said[0][:200] if said else done.returncode}"
            )

    def cluster(self):
        """An unstarted SLURMCluster (call .scale(jobs=...) to submit the jobs)."""
        import_distributed()
        try:
            from dask_jobqueue import SLURMCluster
        except ImportError:
            raise InputError("--scheduler slurm", NEEDS_DASK) from None
        with _client_retries():
            return SLURMCluster(**self.cluster_arguments())


def require_sbatch() -> None:
    """Slurm's sbatch must be on PATH before any job is submitted (or claimed to be)."""
    if shutil.which("sbatch") is None:
        raise InputError(
            "--scheduler slurm",
            "sbatch is not on PATH: this machine has no Slurm client (run on a Slurm login node, or use "
            "--scheduler local)",
        )


def wait_for_first_worker(client, timeout_s: float, where: str, hint: str) -> None:
    """Block until one worker has joined, or one line saying none did within `timeout_s`."""
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except (TimeoutError, asyncio.TimeoutError):
        raise InputError(where, f"no worker joined within {timeout_s:g} s ({hint})") from None


@contextlib.contextmanager
def _client_retries():
    """Clusters extradeep starts let no task be retried by the scheduler: the client retries a
    file whose worker died once itself, and so knows which files were read again. A worker holds
    only the tasks it runs (saturation 1), so a dying worker takes no queued, innocent file with it."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0}):
        yield


@contextlib.contextmanager
def connect(scheduler, *, jobs: int | None = None):
    """A distributed.Client for `scheduler` (see the module's docstring), closed afterwards with any
    cluster started here; None for None (run on this machine without Dask)."""
    if scheduler is None:
        yield None
        return
    distributed = import_distributed()
    with _quiet_dask():
        if isinstance(scheduler, distributed.Client):
            yield scheduler
            return
        with _open(scheduler, distributed, jobs) as client:
            yield client


@contextlib.contextmanager
def _quiet_dask():
    """Dask logs every lost connection and worker with a traceback; extradeep says what happened in
    its own one-line notes and errors instead. Worker processes started here inherit the setting."""
    prefixes = ("distributed.", "dask_jobqueue.", "tornado.")
    names = ["distributed", "dask_jobqueue", "tornado", "asyncio"]
    names += [n for n in logging.root.manager.loggerDict if n.startswith(prefixes)]
    levels, before = {name: logging.getLogger(name).level for name in names}, os.environ.get(QUIET_ENV)
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    os.environ[QUIET_ENV] = "critical"
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if before is None:
            os.environ.pop(QUIET_ENV, None)
        else:
            os.environ[QUIET_ENV] = before


@contextlib.contextmanager
def _open(scheduler, distributed, jobs):
    if isinstance(scheduler, SlurmOptions) or scheduler == "slurm":
        options = scheduler if isinstance(scheduler, SlurmOptions) else SlurmOptions()
        require_sbatch()
        with options.cluster() as cluster:
            options.check_job(cluster)
            cluster.scale(jobs=options.jobs)
            print(
                f"extradeep: submitted {options.jobs} Slurm job(s); their workers join as Slurm starts them "
                f"(dashboard {cluster.dashboard_link})",
                file=sys.stderr,
            )
            with distributed.Client(cluster) as client:
                wait_for_first_worker(
                    client,
                    options.start_timeout,
                    "--scheduler slurm",
                    "the jobs may still wait in the queue: see squeue; raise start-timeout in [slurm]",
                )
                yield client
        return
    if scheduler == "local":
        import dask

        from extradeep.processes import deferred_interrupts, start_helpers, usable_cpus

        start_helpers()  # workers forked by a forkserver that ignores Ctrl-C: extradeep closes them
        with (
            _client_retries(),
            dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}),
            contextlib.ExitStack() as stack,
        ):
            # Started with Ctrl-C held back: a cluster interrupted half-built cannot be closed.
            with deferred_interrupts():
                cluster = stack.enter_context(
                    distributed.LocalCluster(
                        n_workers=jobs or usable_cpus(),
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                    )
                )
            yield stack.enter_context(distributed.Client(cluster))
        return
    target = str(scheduler)
    by_file = target.endswith(".json") and Path(target).is_file()
    if not by_file and not ADDRESS.match(target):
        raise InputError(
            "--scheduler",
            f"{target!r} is no scheduler address (tcp://HOST:PORT), scheduler file (.json), 'local' or 'slurm'",
        )
    try:
        client = (
            distributed.Client(scheduler_file=target, timeout=CONNECT_TIMEOUT_S)
            if by_file
            else distributed.Client(target, timeout=CONNECT_TIMEOUT_S)
        )
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(
            target, f"cannot reach the Dask scheduler ({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    with client:
        wait_for_first_worker(client, WORKER_TIMEOUT_S, target, "a scheduler without workers: start dask workers")
        yield client


def _first_line(exc) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]
