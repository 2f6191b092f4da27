"""Exports in, Experiment out: discover, read every file (cached, in parallel), check, aggregate.

The per-file stage is `extradeep.nsys.read.read_export` (path in, small step-sum table out), so it
can run in worker processes here and, later, on a cluster. Its results are cached per file, keyed by
path, size, mtime, reader version and reader settings, in a cache directory (never beside the
inputs unless asked). Bad files become one-line problems; an InputError is raised only when nothing
usable remains or the batch cannot be aggregated as a whole.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import sqlite3
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import pandas as pd

import extradeep
from extradeep import discover
from extradeep.aggregate import aggregate
from extradeep.errors import InputError
from extradeep.experiment import Dataset, Experiment, dataset_dict
from extradeep.nsys.settings import READER_VERSION, ReaderSettings

CACHE_FORMAT = 1
CACHE_MAX_MB = 2048  # default cap of the cache; env EXTRADEEP_CACHE_MAX_MB overrides it


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "extradeep"


def load_experiment(
    paths=None,
    params=None,
    settings=None,
    *,
    aliases=None,
    manifest=None,
    dataset: Dataset | None = None,
    min_points: int = 5,
    jobs: int | None = None,
    cache_dir=None,
    use_cache: bool = True,
    progress=None,
    replay: bool = True,
) -> Experiment:
    """Read and aggregate exports into an Experiment whose `.problems` lists every skipped input.

    `paths`: files and/or directories (searched recursively), or None with `manifest`. `params`: the
    modeled parameter names (default: those that vary). `settings`: the reader settings passed to
    `read_export`. `progress`: None (a line on stderr), False (silent) or a callable
    `(done, total, path)`. Bad files are skipped and listed; InputError is raised only when nothing
    usable remains or the batch is inconsistent (mixed apps, a varying parameter not modeled).
    `replay`: replay the traces of the runs at the largest points to measure how much communication
    their steps can hide (`settings["exposure"]`, see :func:`traced_exposures`).
    """
    aliases = discover.parse_aliases(aliases) if not isinstance(aliases, dict) else aliases
    settings = ReaderSettings.from_any(settings)
    if manifest is not None:
        runs, problems = discover.manifest_runs(manifest, aliases)
    else:
        runs, problems = discover.runs_from_names(paths, aliases)
    runs, problems = discover.validate_runs(runs, problems)
    params = choose_params(runs, params, aliases)

    cache = None if not use_cache else Path(cache_dir) if cache_dir else default_cache_dir()
    results = read_all(runs, settings, jobs=jobs, cache_dir=cache, progress=progress)
    runs["sha256"] = [r["sha256"] for r in results]
    failed = [r["problem"] is not None for r in results]
    problems += [r["problem"] for r in results if r["problem"]]
    frames = {path: r["frame"] for path, r in zip(runs["path"], results) if r["problem"] is None}
    runs = runs[[not f for f in failed]].reset_index(drop=True)
    if runs.empty:
        error = InputError(None, f"no usable exports among {len(failed)} file(s); first problem: {problems[0]}")
        error.problems = problems
        raise error
    runs, duplicates = discover.drop_duplicates(runs)
    problems += duplicates + discover.missing_ranks(runs)

    step_sums = step_sum_table(runs, frames, params)
    values, points = aggregate(step_sums, params, min_points)
    fixed = {p: _plain(runs[p].iloc[0]) for p in discover.param_columns(runs) if p not in params}
    notes = reader_notes({path: frames[path] for path in runs["path"]})
    provenance = runs[["path", "size", "sha256", "app", "rank", "rep", *discover.param_columns(runs)]]
    experiment_settings = {
        "reader": settings.to_dict(),
        "reader_version": reader_version(),
        "aliases": aliases,
        "dataset": dataset_dict(dataset),
        "min_points": int(min_points),
        "fixed_params": fixed,
        "app": str(runs["app"].iloc[0]),
        "notes": notes,
    }
    if replay:
        experiment_settings["exposure"], replay_notes = traced_exposures(runs, params, settings, cache, progress)
        notes += replay_notes
    return Experiment(params, values, points, provenance.reset_index(drop=True), experiment_settings, problems)


TRACED_POINTS = 3  # the largest points get an exposure curve: evaluation often holds out the top one or two


def traced_exposures(runs: pd.DataFrame, params: list[str], settings: ReaderSettings, cache_dir,
                     progress=None) -> tuple[list[dict], list[str]]:
    """(curves, notes): the exposure curves (:mod:`extradeep.predictor.exposure`) of the runs at the
    TRACED_POINTS largest points (at each, the repetition with the most ranks), each as
    {"point", "rep", "k", "hidden"}; a note for each run that cannot be replayed. The steps are found
    with the reader's `settings`. Cached like the per-file results."""
    files = runs.groupby([*params, "rep"], sort=True).size().reset_index(name="ranks_read")
    points = files[params].drop_duplicates().tail(TRACED_POINTS)
    curves, notes = [], []
    for values in points.itertuples(index=False):
        at = files[(files[params] == list(values)).all(axis=1)]
        run = at.sort_values(["ranks_read", "rep"], ascending=[False, True]).iloc[0]
        chosen = runs[(runs[params] == run[params]).all(axis=1) & (runs["rep"] == run["rep"])]
        curve, note = _traced_exposure(chosen, {p: _plain(run[p]) for p in params}, _plain(run["rep"]),
                                       settings, cache_dir, progress)
        curves += [curve] if curve else []
        notes += [note] if note else []
    return curves, notes


def _traced_exposure(chosen: pd.DataFrame, point: dict, rep, settings: ReaderSettings, cache_dir,
                     progress) -> tuple[dict | None, str | None]:
    from extradeep.predictor.exposure import exposure_curve

    where = ", ".join(f"{k}={v}" for k, v in point.items()) + f", repetition {rep}"
    keys = [cache_key(r.path, r.size, r.mtime_ns, settings) for r in chosen.itertuples(index=False)]
    key = hashlib.sha256(json.dumps(["exposure", predictor_version(), sorted(keys)]).encode()).hexdigest()
    cached = read_cache(cache_dir, key) if cache_dir is not None else None
    if cached is None:
        if progress is None:
            print(f"replaying {len(chosen)} export(s) of {where} to see how much communication a step hides",
                  file=sys.stderr)
        try:
            curve = exposure_curve(list(chosen["path"]), settings=settings)
            cached = {"problem": None, "curve": None if curve.empty else curve[["k", "hidden"]].to_dict("list")}
        except Exception as exc:  # the replay only refines the step model: a failure must not stop modeling
            return None, f"the traces of {where} could not be replayed ({type(exc).__name__}: {exc})"
        _store(cache_dir, key, cached)
    return (None if cached["curve"] is None else {"point": point, "rep": rep, **cached["curve"]}), None


def reader_notes(frames: dict[str, pd.DataFrame], shown: int = 3) -> list[str]:
    """The reader's notes (path -> step-sum frame), each once, naming the file(s) that said it:
    "note (in a.sqlite)" or "note (in N files: a.sqlite, b.sqlite, c.sqlite, ...)"."""
    said: dict[str, list[str]] = {}
    for path, frame in frames.items():
        for note in dict.fromkeys(frame.attrs.get("notes", [])):
            said.setdefault(note, []).append(str(path))
    out = []
    for note, paths in sorted(said.items()):
        if len(paths) == 1:
            out.append(f"{note} (in {paths[0]})")
        else:
            names = ", ".join(Path(p).name for p in paths[:shown]) + (", ..." if len(paths) > shown else "")
            out.append(f"{note} (in {len(paths)} files: {names})")
    return out


def choose_params(runs: pd.DataFrame, params, aliases: dict) -> list[str]:
    """The modeled parameters: the given ones (through aliases) or those that vary. Refuses a varying
    parameter that is not modeled, because its points would be merged silently."""
    available = discover.param_columns(runs)
    varying = [p for p in available if runs[p].nunique() > 1]
    if not params:
        return varying
    chosen = [aliases.get(p, p) for p in params]
    unknown = [p for p in chosen if p not in available]
    if unknown:
        raise InputError(None, f"no parameter {', '.join(map(repr, unknown))} in the inputs; they have: {', '.join(available) or 'none'}")
    unmodeled = [p for p in varying if p not in chosen]
    if unmodeled:
        detail = "; ".join(f"{p} takes {sorted(runs[p].unique().tolist())}" for p in unmodeled)
        raise InputError(None, f"parameter(s) vary but are not modeled ({detail}); add --param or select files")
    return chosen


def step_sum_table(runs: pd.DataFrame, frames: dict, params: list[str]) -> pd.DataFrame:
    """Concatenate the per-file step sums with the file id, rank, repetition and point columns."""
    parts = []
    for file_id, run in enumerate(runs.to_dict("records")):
        extra = {"file": file_id, "rank": run["rank"], "rep": run["rep"], **{p: run[p] for p in params}}
        parts.append(frames[run["path"]].assign(**extra))
    return pd.concat(parts, ignore_index=True)


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
            _store(cache_dir, keys[i], results[i])
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
                _store(cache_dir, keys[i], results[i])
                bar.update(tasks[i][0])
    bar.close()
    if cache_dir is not None:
        prune_cache(cache_dir, limit)
    return results


def read_one(path: str, settings: ReaderSettings) -> dict:
    """The per-file stage: sha256 and step sums of one export, or a one-line problem. Never raises
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


# --- cache -------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def reader_version() -> str:
    """extradeep's version plus a digest of the reader's sources, so any reader change invalidates
    cached results (developers edit the reader without bumping versions)."""
    return f"{extradeep.__version__}+{_sources_digest(f'{extradeep.__version__} {READER_VERSION}', 'nsys', 'io')}"


@functools.lru_cache(maxsize=1)
def predictor_version() -> str:
    """Like :func:`reader_version`, for the trace replay's sources."""
    return _sources_digest(reader_version(), "predictor")


def _sources_digest(seed: str, *packages: str) -> str:
    digest = hashlib.sha256(seed.encode())
    for package in packages:
        for source in sorted((Path(extradeep.__file__).parent / package).rglob("*.py")):
            digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def cache_key(path: str, size: int, mtime_ns: int, settings: ReaderSettings) -> str:
    blob = json.dumps(
        [CACHE_FORMAT, str(Path(path).resolve()), int(size), int(mtime_ns), reader_version(), settings.key()]
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _cache_file(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "steps" / key[:2] / f"{key}.pkl"


def read_cache(cache_dir: Path, key: str) -> dict | None:
    """A cached per-file result, or None (missing or unreadable entries are simply re-read)."""
    path = _cache_file(cache_dir, key)
    try:
        with open(path, "rb") as fh:
            result = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    try:
        os.utime(path)  # mtime = last use: eviction drops the least recently used entries
    except OSError:
        pass
    return result


def cache_limit_bytes() -> int:
    """The cache's cap: EXTRADEEP_CACHE_MAX_MB (MiB) or CACHE_MAX_MB; a bad value is refused."""
    text = os.environ.get("EXTRADEEP_CACHE_MAX_MB", str(CACHE_MAX_MB))
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = float("nan")
    if not megabytes >= 0:
        raise InputError("EXTRADEEP_CACHE_MAX_MB", f"must be a number of MiB >= 0, got {text!r}")
    return int(megabytes * 2**20)


def prune_cache(cache_dir, max_bytes: int | None = None) -> int:
    """Delete the least recently used cache entries until the cache holds at most `max_bytes`
    (default `cache_limit_bytes()`); returns how many were deleted. Only extradeep's own entry files
    (steps/xx/<sha256>.pkl) are touched."""
    limit = cache_limit_bytes() if max_bytes is None else max_bytes
    entries = []
    for path in (Path(cache_dir) / "steps").glob("??/*.pkl"):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((stat.st_mtime_ns, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    removed = 0
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed += 1
    return removed


def _store(cache_dir, key: str, result: dict) -> None:
    # Failures are not cached: the user may fix the file or the reader may learn to read it.
    if cache_dir is None or result["problem"] is not None:
        return
    target = _cache_file(cache_dir, key)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
    except OSError:
        pass  # a read-only or full cache only costs speed


# --- progress ----------------------------------------------------------------------------------

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


def _plain(value):
    return value.item() if hasattr(value, "item") else value
