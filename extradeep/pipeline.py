"""The pipeline's steps composed: profiles -> Experiment (with exposure curves) -> models -> analysis.

Each step is its own library function; this module only calls them in order, so a notebook, the CLI
and the GUI run the same pipeline. The steps stay importable on their own for finer control.
"""

from __future__ import annotations

from extradeep.aggregate.experiment import Dataset, Experiment
from extradeep.aggregate.ingest import read_experiment
from extradeep.io.cluster import connect, scheduler_from_env
from extradeep.predictor.exposure import add_exposure_curves


def load_experiment(paths=None, params=None, settings=None, *, aliases=None, manifest=None,
                    dataset: Dataset | None = None, min_points: int = 5, jobs: int | None = None,
                    cache_dir=None, use_cache: bool = True, progress=None, replay: bool = True,
                    scheduler=None) -> Experiment:
    """Read profiles into an Experiment (:func:`extradeep.aggregate.ingest.read_experiment`; its
    `.problems` lists every skipped input), then, with `replay`, replay the traces of the runs at
    the largest points (:func:`extradeep.predictor.exposure.add_exposure_curves`) so the step model
    knows how much communication a step can hide. `scheduler` (a Dask scheduler's address, "local",
    "slurm", a Client; default env EXTRADEEP_SCHEDULER) runs both steps on a Dask cluster, connected
    once (:func:`extradeep.io.cluster.connect`); without it they run on this machine. A saved experiment (`.sqlite` written by
    `Experiment.save`) is loaded as it was saved, without reading or replaying anything."""
    from extradeep.io.store import is_saved_experiment

    single = paths if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else None
    if single is not None and manifest is None and is_saved_experiment(single):
        return Experiment.load(single)
    with connect(scheduler_from_env(scheduler), jobs=jobs) as client:
        experiment = read_experiment(paths, params, settings, aliases=aliases, manifest=manifest, dataset=dataset,
                                     min_points=min_points, jobs=jobs, cache_dir=cache_dir, use_cache=use_cache,
                                     progress=progress, scheduler=client)
        if replay:
            add_exposure_curves(experiment, cache_dir=cache_dir, use_cache=use_cache, progress=progress,
                                jobs=jobs, client=client)
    return experiment
