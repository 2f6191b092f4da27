"""Running the per-file stage over a batch: cached results first, the rest in this process, in local
worker processes, or on a Dask cluster.

The per-file stage (`read_one`: path in, small step-sum table out) never raises for a bad file, so
one broken export cannot stop a batch; its problem becomes one line and the batch goes on. Workers
read files where they lie (on a cluster: the shared file system) and send back only the step sums.
`run_tasks` is the one execution layer: the exposure replays use it too. A call whose worker died
(killed, out of memory) is retried once, alone, then reported like a bad input; the rest is kept.
"""

from __future__ import annotations

import sqlite3
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed

import pandas as pd

from extradeep.errors import InputError
from extradeep.io import discover
from extradeep.io.cache import (
    cache_key,
    cache_limit_bytes,
    cache_problem,
    prune_cache,
    read_cache,
    store_cache,
)
from extradeep.io.settings import ReaderSettings
from extradeep.io.sqlite import unreadable
from extradeep.processes import process_pool, usable_cpus


class WorkerLost(str):
    """What came back for a call whose worker died on both tries: why, as one line."""


def run_tasks(function, calls: list[tuple], *, jobs=None, client=None, on_done=None) -> tuple[list, list[str]]:
    """`function(*call)` for every call, in this process (jobs=1), in `jobs` local worker processes,
    or on the Dask cluster of `client`; `on_done(i, result)` as each finishes. Returns the results
    in call order (a WorkerLost where the worker died twice) and notes for the user."""
    on_done = on_done or _ignore
    if client is not None:
        return _run_on_cluster(function, calls, client, on_done)
    results: list = [None] * len(calls)
    jobs = max(1, min(jobs or usable_cpus(), len(calls) or 1))
    if jobs == 1:
        for i, call in enumerate(calls):
            results[i] = function(*call)
            on_done(i, results[i])
        return results, []
    failed = []
    with process_pool(jobs) as pool:
        futures = {pool.submit(function, *call): i for i, call in enumerate(calls)}
        for future in as_completed(futures):
            try:
                results[futures[future]] = future.result()
            except Exception:  # a worker process died (out of memory, killed): the pool is broken
                failed.append(futures[future])
                continue
            on_done(futures[future], results[futures[future]])
    # Each again alone in a fresh process, so a call that kills its process takes no other with it.
    with ThreadPoolExecutor(max_workers=jobs) as threads:
        futures = {threads.submit(_run_alone, function, calls[i]): i for i in failed}
        for future in as_completed(futures):
            try:
                results[futures[future]] = future.result()
            except Exception as exc:
                results[futures[future]] = WorkerLost(f"its worker process died twice ({_why_exception(exc)})")
            on_done(futures[future], results[futures[future]])
    return results, _retry_notes(len(failed), lost=0)


def _ignore(i, result) -> None:
    pass


def _run_alone(function, call):
    with process_pool(1) as pool:
        return pool.submit(function, *call).result()


def _run_on_cluster(function, calls, client, on_done) -> tuple[list, list[str]]:
    from distributed import as_completed as completed

    results: list = [None] * len(calls)
    batch = f"{getattr(function, '__name__', 'task')}-{uuid.uuid4().hex[:8]}"
    before = _worker_addresses(client)

    def submit(i, attempt):
        return client.submit(function, *calls[i], key=f"{batch}-{i}-{attempt}", pure=False)

    futures = {submit(i, 0): (i, 0) for i in range(len(calls))}
    retried = finished = 0
    try:
        pending = completed(futures)
        for future in pending:
            i, attempt = futures.pop(future)
            if future.status != "finished" and client.status != "running":
                raise _lost_scheduler(client, finished, len(calls), _why(future))
            if future.status == "finished":
                results[i] = future.result()
            elif attempt == 0:
                retried += 1
                retry = submit(i, 1)
                futures[retry] = (i, 1)
                pending.add(retry)
                continue
            else:
                results[i] = WorkerLost(f"its worker died twice ({_why(future)})")
            finished += 1
            on_done(i, results[i])
    except InputError:
        raise
    except Exception as exc:
        if client.status == "running":
            raise
        raise _lost_scheduler(client, finished, len(calls), type(exc).__name__) from None
    lost = len(before - _worker_addresses(client))
    return results, _retry_notes(retried, lost)


def _lost_scheduler(client, finished: int, total: int, why: str) -> InputError:
    """The scheduler went away: one line (dask's own logging is quiet), and what is done stays cached."""
    return InputError(
        str(client.scheduler.address),
        (
            f"lost the Dask scheduler after {finished} of {total} task(s) ({why}); with the cache on, "
            "what was read is not read again when you run once more"
        ),
    )


def _worker_addresses(client) -> set[str]:
    try:
        return set(client.scheduler_info().get("workers", {}))
    except Exception:  # only feeds a note
        return set()


def _why(future) -> str:
    if future.status == "cancelled":
        return "cancelled"
    return _why_exception(future.exception())


def _why_exception(exc) -> str:
    text = (str(exc).strip().splitlines() or [""])[0][:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_notes(retried: int, lost: int) -> list[str]:
    notes = []
    if lost:
        notes.append(f"{lost} worker(s) left the cluster while reading; their work was done again")
    if retried:
        notes.append(f"{retried} task(s) ran a second time because a worker died")
    return notes


def read_all(
    runs: pd.DataFrame,
    settings: ReaderSettings,
    *,
    jobs=None,
    cache_dir=None,
    progress=None,
    client=None,
    replay_paths=(),
) -> tuple[list[dict], list[str]]:
    """Read every run: cached results first, the rest by `run_tasks` (in `jobs` local worker
    processes, or on the Dask cluster of `client`). Returns one result per run (`read_one`'s) and
    notes. Files in `replay_paths` that are read (not cached) also return the replay's frames."""
    limit = cache_limit_bytes() if cache_dir is not None else None  # a bad setting fails before reading
    if cache_dir is not None and (problem := cache_problem(cache_dir)):
        # said once: a silently disabled cache makes every later run slow for no visible reason
        print(f"extradeep: note: {problem}; nothing is cached (give --cache-dir DIR, or --no-cache)", file=sys.stderr)
    tasks = [(row.path, row.size, row.mtime_ns) for row in runs.itertuples(index=False)]
    keys = [cache_key(*task, settings) for task in tasks]
    results: list[dict | None] = [None] * len(tasks)
    bar = Progress(len(tasks), progress)
    for i, key in enumerate(keys):
        if cache_dir is not None and (hit := read_cache(cache_dir, key)) is not None:
            results[i] = hit
            bar.update(tasks[i][0], cached=True)
    todo = [i for i in range(len(tasks)) if results[i] is None]

    def done(j, result):
        i = todo[j]
        if isinstance(result, WorkerLost):
            result = failed_read(tasks[i][0], f"reading failed: {result}")
        elif client is not None:  # the workers' cache may not be this machine's
            store_cache(cache_dir, keys[i], result)
        results[i] = result
        bar.update(tasks[i][0])

    wanted = {str(p) for p in replay_paths}
    calls = [(tasks[i][0], settings, keys[i], cache_dir, str(tasks[i][0]) in wanted) for i in todo]
    _, notes = run_tasks(read_and_store, calls, jobs=jobs, client=client, on_done=done)
    bar.close()
    if cache_dir is not None:
        prune_cache(cache_dir, limit)
    return results, notes


def read_and_store(path: str, settings: ReaderSettings, key: str, cache_dir, replay: bool = False) -> dict:
    """The task a worker runs: `read_one`, its result cached where the worker is (so a finished
    file is not read again even when the caller or the scheduler goes away)."""
    result = read_one(path, settings, replay=replay)
    store_cache(cache_dir, key, result)
    return result


def failed_read(path: str, problem: str) -> dict:
    """`read_one`'s result for a file that could not be read: its one-line problem."""
    return {
        "path": path,
        "sha256": None,
        "frame": None,
        "placement": None,
        "replay": None,
        "problem": f"{path}: {problem}",
    }


def read_one(path: str, settings: ReaderSettings, *, replay: bool = False) -> dict:
    """The per-file stage: one pass over one profile (nsys export or Kineto trace), opened once.
    Returns {path, sha256, frame (the per-step sums), placement (host, device, GPU UUID, the node's
    GPUs), replay (the replay's frames when `replay`, else None), problem (one line, or None)}.
    Never raises for a bad file, so one broken export cannot stop a batch."""
    from extradeep.io.read import read_once

    result = {"path": path, "sha256": None, "frame": None, "placement": None, "replay": None, "problem": None}
    try:
        result["sha256"] = discover.file_sha256(path)
        found = read_once(path, settings, replay=replay)
        if found.frame.empty:
            raise InputError(path, "no measurements inside the step marks")
        result.update(frame=found.frame, placement=found.placement, replay=found.replay)
    except InputError as exc:
        result["problem"] = str(exc) if exc.source else f"{path}: {exc.problem}"
    except OSError as exc:
        result["problem"] = f"{path}: {unreadable(exc)}"
    except (sqlite3.Error, UnicodeError, ValueError) as exc:
        result["problem"] = f"{path}: cannot read ({type(exc).__name__}: {exc})"
    return result


class Progress:
    """Progress of a batch: an updating line on a terminal, periodic lines otherwise, or a callback."""

    def __init__(self, total: int, target=None, stream=None, every_s: float = 5.0):
        self.total, self.done, self.cached = total, 0, 0
        self.callback = target if callable(target) else None
        self.stream = None if target is False or self.callback else (stream or sys.stderr)
        self.tty = bool(self.stream) and getattr(self.stream, "isatty", lambda: False)()
        self.every_s, self.last = every_s, time.monotonic()

    def update(self, path: str, cached: bool = False) -> None:
        self.done += 1
        self.cached += cached
        if self.callback:
            self.callback(self.done, self.total, path)
        elif self.stream and self.tty:
            self.stream.write(f"\rreading exports: {self._line()}")
            self.stream.flush()
        elif self.stream and (time.monotonic() - self.last >= self.every_s or self.done == self.total):
            self.last = time.monotonic()
            print(f"reading exports: {self._line()}", file=self.stream)

    def _line(self) -> str:
        return f"{self.done}/{self.total} files ({self.cached} from cache)"

    def close(self) -> None:
        if self.stream and self.tty and self.total:
            self.stream.write("\n")
