"""Worker processes that never outlive extradeep, and a clean stop on SIGTERM.

Every local pool (`process_pool`) starts its workers the same way on every Python: forkserver on
POSIX, spawn elsewhere. Python 3.14 makes forkserver the default on Linux, and forking the caller
itself is unsafe once it has threads (BLAS, the GUI, progress and pool threads): a lock held by
another thread at the fork stays locked in the child forever, and Python 3.12+ warns about it. The
forkserver is a small single-threaded process that forks the workers instead.

Each worker ignores Ctrl-C (the caller stops the pool; the terminal's SIGINT reaches the whole
process group) and watches its parent: when extradeep dies, even by SIGKILL, its workers exit within
`WATCH_S`. `sigterm_unwinds` turns SIGTERM (and SIGHUP) into KeyboardInterrupt, so that `with` blocks
unwind, pools stop, and the semaphores of their queues are released instead of leaked.

`one_blas_thread` keeps BLAS to one thread per process (the commands and the GUI call it first): the
linear algebra here is small (least squares of a few dozen coefficients), and BLAS threads on cores
that a pool's workers or other jobs already use spin against them: on 2 busy cores the layout
model's calibration on vTrain's 1,528 runs took 13 s with OpenBLAS's default threads and 0.9 s
with one. A process that loaded NumPy before extradeep (a notebook, a user's script) keeps its
threads; there the calibrations run inside `blas_single_threaded`, which lowers them through
threadpoolctl for the call and restores them after.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
import weakref
from concurrent.futures import InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

WATCH_S = 0.5  # how often a worker checks that its parent is alive
PRELOAD = ["numpy", "pandas", "extradeep.io.execute", "extradeep.io.read"]  # not __main__: a user's script
PACKAGE = Path(__file__).resolve().parent
# OpenBLAS (NumPy and SciPy wheels), MKL (conda), Accelerate (macOS): what each reads at import
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def one_blas_thread() -> None:
    """One BLAS thread per process unless the user set a number: call before NumPy is imported (the
    worker processes inherit it)."""
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


@contextmanager
def blas_single_threaded():
    """One BLAS thread inside the block (usable as a decorator), in a process whose BLAS started with
    more: OpenBLAS reads its variable only when it loads, and threadpoolctl (the joblib and
    scikit-learn maintainers' tool) is the maintained way to change it later. Where a BLAS thread
    variable is set (the user's choice, or `one_blas_thread`), the block runs as it is."""
    if any(name in os.environ for name in BLAS_THREAD_VARIABLES):
        yield
        return
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield


@functools.cache
def _blas_controller():
    """The BLAS libraries of this process, found once (finding them takes ~2 ms; limiting a found set
    ~0.04 ms): NumPy's and SciPy's wheels each load their own OpenBLAS, so both are imported first."""
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (taskset, a Slurm allocation, a container's
    cpuset), not every CPU of the machine, which os.cpu_count() gives; at least 1."""
    counter = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if counter is not None:
        return counter() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # macOS, Windows
        return os.cpu_count() or 1


def pool_context():
    """The multiprocessing context of every pool: forkserver (POSIX) or spawn; never fork."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    start_helpers()
    return multiprocessing.get_context("forkserver")


def start_helpers() -> None:
    """Start multiprocessing's forkserver and resource tracker, if not running yet, with SIGINT
    ignored: they and every worker the forkserver forks (ours, and Dask's local workers) inherit
    that, so the terminal's Ctrl-C, which reaches the whole process group, never interrupts them
    (a KeyboardInterrupt traceback from each); extradeep stops them itself."""
    from multiprocessing import forkserver, resource_tracker

    # imported once in the forkserver, so every later worker starts with them: a GUI or a test suite
    # that reads folder after folder starts each pool's workers at once, not after their own imports
    forkserver.set_forkserver_preload(preload_modules())
    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()  # signal handlers can only be set from the main thread
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:  # milliseconds: a fork and exec each
        resource_tracker.ensure_running()
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def preload_modules(cwd=None) -> list[str]:
    """What the forkserver imports once. Before Python 3.12 it imports them with its own sys.path,
    whose first entry is the current directory, not the caller's sys.path: started inside a source
    checkout beside an installed extradeep, `extradeep` would come from the checkout (without its
    gui/, which installs as extradeep.gui) and every worker would inherit that. extradeep's own
    modules are preloaded only where the current directory resolves them to this package."""
    local = Path(cwd or os.getcwd()) / "extradeep"
    try:
        foreign = local.is_dir() and local.resolve() != PACKAGE
    except OSError:
        foreign = True
    return [name for name in PRELOAD if not (foreign and name.startswith("extradeep"))]


def process_pool(jobs: int, initializer=None, initargs=(), context=None) -> WorkerPool:
    """A process pool whose workers die with this process and ignore Ctrl-C; `initializer(*initargs)`
    runs in each worker after that. Raises RuntimeError once `stop_all` ran (the app is closing)."""
    if _STOPPING:
        raise RuntimeError("extradeep is stopping: no new worker processes")
    return WorkerPool(
        max_workers=jobs,
        mp_context=context or pool_context(),
        initializer=_start_worker,
        initargs=(os.getpid(), initializer, tuple(initargs)),
    )


_POOLS: weakref.WeakSet = weakref.WeakSet()  # every WorkerPool alive, for stop_all
_STOPPING = False


class WorkerPool(ProcessPoolExecutor):
    """A ProcessPoolExecutor that, when its `with` block ends in an exception (Ctrl-C, SIGTERM, an
    error), stops its workers at once instead of waiting for every queued call."""

    def __init__(self, *args, **kwargs):
        with deferred_interrupts():  # may start the resource tracker
            super().__init__(*args, **kwargs)
        self.stopped = False
        self._submitted: weakref.WeakSet = weakref.WeakSet()
        _POOLS.add(self)

    def submit(self, fn, /, *args, **kwargs):
        # Starting a worker hands its queues' semaphores to the new process. Interrupted in between,
        # the pool would release them while the worker still unpickles them (a traceback from the
        # worker): the signal waits until the worker is started and known, so stop() can end it.
        with deferred_interrupts():
            future = super().submit(fn, *args, **kwargs)
        self._submitted.add(future)
        return future

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.stop()
            return False
        try:
            self.shutdown(wait=True)
        except BaseException:  # Ctrl-C or SIGTERM while the last calls finish
            self.stop()
            raise
        return False

    def stop(self) -> None:
        """Cancel what is queued, end the workers (SIGTERM, then SIGKILL after 2 s) and join them."""
        self.stopped = True
        workers = list((getattr(self, "_processes", None) or {}).values())
        manager = getattr(self, "_executor_manager_thread", None)  # shutdown() forgets both
        results = getattr(self, "_result_queue", None)
        self.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        deadline = time.monotonic() + 2.0
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                worker.kill()
                worker.join(1.0)
        if manager is not None:
            manager.join(0.5)  # it marks the calls of ended workers as failed, and releases the queues
        if manager is not None and manager.is_alive() and results is not None:
            # A worker ended while it wrote its result left half a message in the result pipe: the
            # manager thread waits for the rest forever, and Python joins it at exit (a command that
            # never ends: about 1 in 10 SIGTERMs while reading). The workers are gone, so this process
            # holds the pipe's last writing end: closing it gives the manager end-of-file, and it ends.
            with contextlib.suppress(OSError):
                results._writer.close()
            manager.join(5.0)
        for future in list(self._submitted):  # whoever still waits for a call must wake up:
            if future._state == "CANCELLED":  # cancel() alone never wakes as_completed() or wait()
                future.set_running_or_notify_cancel()
            elif not future.done():
                with contextlib.suppress(InvalidStateError):
                    future.set_exception(BrokenProcessPool("the pool was stopped"))


def stop_all() -> None:
    """Stop every pool of this process, for good (the app is closing while its tasks still read or
    model); `stopping()` tells those tasks that their errors need no report."""
    global _STOPPING
    _STOPPING = True
    for pool in list(_POOLS):
        pool.stop()


def stopping() -> bool:
    return _STOPPING


def _start_worker(parent: int, initializer, initargs) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch_parent(parent)
    # A worker's stderr is the user's terminal: a library's notice to developers (pandas' and
    # NumPy's FutureWarning, DeprecationWarning) stays out of it, and any other warning is one line.
    for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning):
        warnings.simplefilter("ignore", category)
    warnings.showwarning = _one_line_warning
    if initializer is not None:
        initializer(*initargs)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"extradeep: warning: {text}", file=sys.stderr)


def watch_parent(parent: int) -> None:
    """Exit this process when `parent` (or the process that started this one) goes away."""
    started_by = os.getppid()

    def watch():
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != started_by or not _alive(parent):
                os._exit(1)

    threading.Thread(target=watch, name="extradeep-parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwind as Ctrl-C does (the exit status says which signal)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextmanager
def sigterm_unwinds():
    """Within the block, SIGTERM and SIGHUP raise Terminated in the main thread (where no handler was
    set); the previous handlers come back afterwards."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGHUP"):
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) in (signal.SIG_DFL, None):
                previous[signum] = signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def deferred_interrupts():
    """Within the block, SIGINT, SIGTERM and SIGHUP (main thread only) are held back and acted on,
    with their own handlers, when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    signums = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    previous = {s: signal.getsignal(s) for s in signums}
    for signum, handler in previous.items():
        if callable(handler):  # a Python handler (default SIG_DFL and SIG_IGN stay as they are)
            signal.signal(signum, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if callable(handler):
                signal.signal(signum, handler)
        for signum in held[:1]:
            previous[signum](signum, None)


def _raise_terminated(signum, frame) -> None:
    raise Terminated(signum)


def exit_status(exc: BaseException) -> int:
    """The shell's exit status for an interruption: 128 + the signal number (130 for Ctrl-C)."""
    return 128 + (exc.signum if isinstance(exc, Terminated) else signal.SIGINT)
