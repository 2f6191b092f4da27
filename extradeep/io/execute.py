"""Running the per-file stage over a batch: cached results first, the rest in worker processes.

The per-file stage (`read_one`: path in, small step-sum table out) never raises for a bad file, so
one broken export cannot stop a batch; its problem becomes one line and the batch goes on.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import pandas as pd

from extradeep.errors import InputError
from extradeep.io import discover
from extradeep.io.cache import cache_key, cache_limit_bytes, prune_cache, read_cache, store_cache
from extradeep.io.nsys.settings import ReaderSettings


def read_all(runs: pd.DataFrame, settings: ReaderSettings, *, jobs=None, cache_dir=None, progress=None) -> list[dict]:
    """Read every run: cached results first, the rest in `jobs` worker processes (1: in this process)."""
    limit = cache_limit_bytes() if cache_dir is not None else None  # a bad setting fails before reading
    tasks = [(row.path, row.size, row.mtime_ns) for row in runs.itertuples(index=False)]
    keys = [cache_key(*task, settings) for task in tasks]
    results: list[dict | None] = [None] * len(tasks)
    bar = Progress(len(tasks), progress)
    for i, key in enumerate(keys):
        if cache_dir is not None and (hit := read_cache(cache_dir, key)) is not None:
            results[i] = hit
            bar.update(tasks[i][0], cached=True)
    todo = [i for i in range(len(tasks)) if results[i] is None]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    if jobs == 1:
        for i in todo:
            results[i] = read_one(tasks[i][0], settings)
            store_cache(cache_dir, keys[i], results[i])
            bar.update(tasks[i][0])
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(read_one, tasks[i][0], settings): i for i in todo}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    results[i] = future.result()
                except Exception as exc:  # a worker died (out of memory, killed): report, go on
                    results[i] = {"path": tasks[i][0], "sha256": None, "frame": None,
                                  "problem": f"{tasks[i][0]}: reading failed ({type(exc).__name__}: {exc})"}
                store_cache(cache_dir, keys[i], results[i])
                bar.update(tasks[i][0])
    bar.close()
    if cache_dir is not None:
        prune_cache(cache_dir, limit)
    return results


def read_one(path: str, settings: ReaderSettings) -> dict:
    """The per-file stage: sha256 and step sums of one profile (nsys export or Kineto trace), or a one-line problem. Never raises
    for a bad file, so one broken export cannot stop a batch."""
    from extradeep.io.read import read_profile

    result = {"path": path, "sha256": None, "frame": None, "problem": None}
    try:
        result["sha256"] = discover.file_sha256(path)
        frame = read_profile(path, settings)
        if frame.empty:
            raise InputError(path, "no measurements inside the step marks")
        result["frame"] = frame
    except InputError as exc:
        result["problem"] = str(exc) if exc.source else f"{path}: {exc.problem}"
    except (sqlite3.Error, OSError, UnicodeError, ValueError) as exc:
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
