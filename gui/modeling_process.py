"""Modeling in a worker process, so the UI thread never waits for the GIL.

Modeling is long stretches of pandas and NumPy that hold the GIL; in a thread of the GUI's process
they stalled the UI for up to a second and more. Here one worker process (started by the
forkserver, never forked from the GUI process, which has a QApplication) opens the same input with
the same `open_source` and keeps it, and the GUI's worker threads send it one chunk of regions at a
time and wait for the result without holding the GIL. Results come back pickled, so the models are the very objects the thread would have made.
Cancel stays between chunks: the worker thread stops sending and drops what still arrives.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from extradeep.errors import InputError
from extradeep.processes import WorkerPool, process_pool

NICENESS = 10  # added to the modeling process's nice value
_pool: WorkerPool | None = None
_opened: dict = {}  # in the worker process: the workspace of the GUI's latest opening (its token)


def pool() -> WorkerPool:
    """The one modeling process, started on first use (its imports take a second or two)."""
    global _pool
    if _pool is None or _pool.stopped:
        # a WorkerPool (extradeep.processes): started by the forkserver, never forked from the GUI
        # process (it has a QApplication); it dies with the GUI, and stops when it closes
        _pool = process_pool(1, initializer=_warm)
    return _pool


def warm_imports(report) -> None:
    """Import the modeling and analysis stack (SciPy among it) before the user needs it, here and in
    the modeling process: the first import takes about a second, which would delay the first plot."""
    import scipy.special  # noqa: F401

    import extradeep.analysis.core  # noqa: F401
    import extradeep.analysis.epoch  # noqa: F401
    import extradeep.modeling  # noqa: F401

    if multiprocessing.parent_process() is None:
        gc.freeze()  # the imported modules stay: full collections need not scan them (about 90 ms each)
        pool().submit(_ready).result()


def run_remote(ws, fn, *args):
    """`fn(workspace, *args)` in the process, on the input `ws` was opened from (`fn` must be a
    module-level function); the calling thread waits without holding the GIL."""
    global _pool
    try:
        failed, result = pool().submit(_call, fn, ws.reopen, *args).result()
    except BrokenProcessPool:
        _pool = None  # the process died (e.g. out of memory): the next call starts a new one
        raise
    if failed:
        raise InputError(*result)
    return result


def _call(fn, reopen: tuple, *args) -> tuple[bool, object]:
    # InputError does not survive pickling (its constructor takes two arguments): send its parts.
    try:
        return False, fn(_workspace(*reopen), *args)
    except InputError as exc:
        return True, (exc.source, exc.problem)


def _workspace(opener, path: Path, dataset, token: str):
    # `opener` (extradeep.gui.workspace.open_source) comes pickled by reference with each call: this
    # module needs no import of the workspace module, which imports this one.
    if _opened.get("token") != token:
        _opened.clear()
        _opened.update(token=token, ws=opener(_no_report, path, dataset))
    return _opened["ws"]


def _no_report(*args, **kwargs) -> None:
    pass


def _warm() -> None:
    # The UI process comes first when both want a core (2-core machines, other work around).
    os.nice(NICENESS)
    warm_imports(_no_report)


def _ready() -> bool:
    return True
