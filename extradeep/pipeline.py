"""The pipeline's steps composed: profiles -> Experiment (with exposure curves) -> models -> analysis.

Each step is its own library function; this module only calls them in order, so a notebook, the CLI
and the GUI run the same pipeline. The steps stay importable on their own for finer control.
"""

from __future__ import annotations

from extradeep.aggregate.experiment import Dataset, Experiment
from extradeep.aggregate.ingest import read_experiment
from extradeep.predictor.exposure import add_exposure_curves


def load_experiment(paths=None, params=None, settings=None, *, aliases=None, manifest=None,
                    dataset: Dataset | None = None, min_points: int = 5, jobs: int | None = None,
                    cache_dir=None, use_cache: bool = True, progress=None, replay: bool = True,
                    system=None) -> Experiment:
    """Read profiles into an Experiment (:func:`extradeep.aggregate.ingest.read_experiment`; its
    `.problems` lists every skipped input), then, with `replay`, replay the traces of the runs at
    the largest points (:func:`extradeep.predictor.exposure.add_exposure_curves`) so the step model
    knows how much communication a step can hide. A saved experiment (`.sqlite` written by
    `Experiment.save`) is loaded as it was saved, without reading or replaying anything. `system`
    (a preset name, TOML file or :class:`extradeep.system.System`) overrides or completes the
    cluster layout read from the exports (`settings["system"]`; also on a saved experiment)."""
    from extradeep.io.store import is_saved_experiment

    single = paths if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else None
    if single is not None and manifest is None and is_saved_experiment(single):
        return with_system(Experiment.load(single), system)
    experiment = read_experiment(paths, params, settings, aliases=aliases, manifest=manifest, dataset=dataset,
                                 min_points=min_points, jobs=jobs, cache_dir=cache_dir, use_cache=use_cache,
                                 progress=progress)
    if replay:
        add_exposure_curves(experiment, cache_dir=cache_dir, use_cache=use_cache, progress=progress)
    return with_system(experiment, system)


def with_system(experiment: Experiment, system) -> Experiment:
    """The experiment with a system description (settings["system"]) when one is given."""
    if system is not None:
        from extradeep.system import load_system

        experiment.settings["system"] = load_system(system).to_dict()
    return experiment
