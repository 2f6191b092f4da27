"""Exports in, Experiment out: discover, read every file (cached, in parallel), check, aggregate.

Nothing here replays traces: the exposure replay is its own pipeline step
(:func:`extradeep.predictor.exposure.add_exposure_curves`, called by :func:`extradeep.load_experiment`).

The per-file stage is one pass over each file (`extradeep.io.read.read_once`: path in; the small step-sum
table, the rank's placement and, for the runs the exposure replay will use, the replay's frames out), so it
runs in worker processes here or on a Dask cluster (extradeep.io.execute, extradeep.io.cluster). Its
results are cached per file, keyed by path, size, mtime, reader version and reader settings, in a
cache directory (never beside the inputs unless asked). Bad files become one-line problems; an InputError is raised only when nothing
usable remains or the batch cannot be aggregated as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.aggregate.experiment import Dataset, Experiment, dataset_dict
from extradeep.aggregate.medians import aggregate
from extradeep.aggregate.settings import ExperimentSettings
from extradeep.columns import FILE, PATH, RANK, REP
from extradeep.errors import InputError
from extradeep.io import discover
from extradeep.io.cache import default_cache_dir, reader_version
from extradeep.io.cluster import connect, scheduler_from_env
from extradeep.io.execute import read_all
from extradeep.io.placement import PLACEMENT_COLUMNS, cluster_layout
from extradeep.io.settings import ReaderSettings


def read_experiment(
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
    scheduler=None,
) -> Experiment:
    """Read and aggregate exports into an Experiment whose `.problems` lists every skipped input.

    `paths`: files and/or directories (searched recursively), or None with `manifest`. `params`: the
    modeled parameter names (default: those that vary). `settings`: the reader settings
    (`extradeep.io.settings.ReaderSettings`, a dict of its fields, or None). `progress`: None (a line on stderr), False (silent) or a callable
    `(done, total, path)`. `scheduler`: where the files are read (see
    :func:`extradeep.io.cluster.connect`: a Dask scheduler's address, "local", "slurm", a Client;
    default env EXTRADEEP_SCHEDULER, else this machine's worker processes). Bad files are skipped and listed; InputError is raised only when nothing
    usable remains or the batch is inconsistent (mixed apps, a varying parameter not modeled).
    """
    found = discover_runs(paths, params, aliases=aliases, manifest=manifest)
    experiment, _ = read_runs(
        found,
        settings,
        dataset=dataset,
        min_points=min_points,
        jobs=jobs,
        cache_dir=cache_dir,
        use_cache=use_cache,
        progress=progress,
        scheduler=scheduler,
    )
    return experiment


@dataclass
class FoundRuns:
    """The runs discovery found (one row per file: path, app, <params>, rank, rep, size, mtime_ns), the
    problems met on the way, the modeled parameters, the aliases that named them and notes on what
    was left out by design (a subfolder that is a study of its own)."""

    runs: pd.DataFrame
    problems: list[str]
    params: list[str]
    aliases: dict
    notes: list[str] = field(default_factory=list)


def discover_runs(paths=None, params=None, *, aliases=None, manifest=None) -> FoundRuns:
    """The files to read (by name or from a manifest) and the modeled parameters; nothing is opened."""
    aliases = discover.parse_aliases(aliases) if not isinstance(aliases, dict) else aliases
    notes: list[str] = []
    if manifest is not None:
        runs, problems = discover.manifest_runs(manifest, aliases)
    else:
        runs, problems = discover.runs_from_names(paths, aliases, notes)
    runs, problems = discover.validate_runs(runs, problems)
    return FoundRuns(runs, problems, choose_params(runs, params, aliases), aliases, notes)


def read_runs(
    found: FoundRuns,
    settings=None,
    *,
    dataset: Dataset | None = None,
    min_points: int = 5,
    jobs: int | None = None,
    cache_dir=None,
    use_cache: bool = True,
    progress=None,
    scheduler=None,
    replay_paths=(),
) -> tuple[Experiment, dict]:
    """The Experiment of the runs found, each file read in one pass (`extradeep.io.execute.read_all`:
    cached, in parallel, local or on Dask), and {path: replay frames} of the files in `replay_paths`
    that were read (not cached), so the exposure replay need not open them again."""
    settings = ReaderSettings.from_any(settings)
    runs, problems, params = found.runs.copy(), list(found.problems), found.params
    cache = None if not use_cache else Path(cache_dir) if cache_dir else default_cache_dir()
    with connect(scheduler_from_env(scheduler), jobs=jobs) as client:
        results, worker_notes = read_all(
            runs, settings, jobs=jobs, cache_dir=cache, progress=progress, client=client, replay_paths=replay_paths
        )
    runs["sha256"] = [r["sha256"] for r in results]
    failed = [r["problem"] is not None for r in results]
    problems += [r["problem"] for r in results if r["problem"]]
    read = {path: r for path, r in zip(runs[PATH], results) if r["problem"] is None}
    runs = runs[[not f for f in failed]].reset_index(drop=True)
    if runs.empty:
        error = InputError(None, f"no usable exports among {len(failed)} file(s); first problem: {problems[0]}")
        error.problems = problems
        raise error
    runs, duplicates = discover.drop_duplicates(runs)
    problems += duplicates + discover.missing_ranks(runs)

    frames = {path: read[path]["frame"] for path in runs[PATH]}
    step_sums = step_sum_table(runs, frames, params)
    values, points = aggregate(step_sums, params, min_points)
    fixed = {p: _plain(runs[p].iloc[0]) for p in discover.param_columns(runs) if p not in params}
    notes = found.notes + reader_notes(frames) + worker_notes
    provenance = runs[[PATH, "size", "sha256", "app", RANK, REP, *discover.param_columns(runs)]]
    placements = pd.DataFrame(
        [read[path]["placement"] for path in runs[PATH]], index=runs.index, columns=list(PLACEMENT_COLUMNS)
    )
    experiment_settings = ExperimentSettings(
        reader=settings.to_dict(),
        reader_version=reader_version(),
        aliases=found.aliases,
        dataset=dataset_dict(dataset),
        min_points=int(min_points),
        fixed_params=fixed,
        app=str(runs["app"].iloc[0]),
        notes=notes,
        layout=cluster_layout(pd.concat([runs[[PATH, RANK, REP, *params]], placements], axis=1), params),
    )
    experiment = Experiment(params, values, points, provenance.reset_index(drop=True), experiment_settings, problems)
    replay = {path: read[path]["replay"] for path in runs[PATH] if read[path].get("replay") is not None}
    return experiment, replay


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
        _refuse_unknown_params(runs, unknown, available)
    unmodeled = [p for p in varying if p not in chosen]
    if unmodeled:
        detail = "; ".join(f"{p} takes {sorted(runs[p].unique().tolist())}" for p in unmodeled)
        raise InputError(None, f"parameter(s) vary but are not modeled ({detail}); add --param or select files")
    return chosen


def _refuse_unknown_params(runs: pd.DataFrame, unknown: list[str], available: list[str]) -> None:
    """Why the parameters are missing, in one line: a broken file (named), one profile only, or
    file names that carry no values."""
    from extradeep.io.formats import NSYS, profile_format
    from extradeep.io.sqlite import check_header

    for path in runs[PATH]:  # a broken file is the first thing to fix, and the user must see which
        if profile_format(path) == NSYS:
            check_header(Path(path))
    wanted = ", ".join(map(repr, unknown))
    if not available and len(runs) == 1:
        raise InputError(
            runs[PATH].iloc[0],
            f"one profile is one configuration, with no {wanted} to model: modeling needs runs at several "
            "scales (files named like app.p2.r1.mpi0.sqlite, app.p4.r1.mpi0.sqlite, ..., or a --manifest)",
        )
    raise InputError(
        None,
        f"no parameter {wanted} in the inputs; they have: {', '.join(available) or 'none'}"
        + ("" if available else " (their names carry no values like app.p4.r1.mpi0.sqlite; give a --manifest)"),
    )


def step_sum_table(runs: pd.DataFrame, frames: dict, params: list[str]) -> pd.DataFrame:
    """Concatenate the per-file step sums with the file id, rank, repetition and point columns (one
    concatenation and one column per key: a copy of each file's frame would cost more than its sums)."""
    parts = [frames[path] for path in runs[PATH]]
    lengths = np.array([len(frame) for frame in parts])
    out = pd.concat(parts, ignore_index=True)
    out[FILE] = np.repeat(np.arange(len(parts)), lengths)
    for column in [RANK, REP, *params]:
        out[column] = np.repeat(runs[column].to_numpy(), lengths)
    return out


def _plain(value):
    return value.item() if hasattr(value, "item") else value
