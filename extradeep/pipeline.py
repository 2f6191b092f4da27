"""The pipeline's steps composed: profiles -> Experiment (with exposure curves) -> models -> analysis.

Each step is its own library function; this module only calls them in order, so a notebook, the CLI
and the GUI run the same pipeline. The steps stay importable on their own for finer control.
"""

from __future__ import annotations

from extradeep.aggregate.experiment import Dataset, Experiment
from extradeep.aggregate.ingest import discover_runs, read_runs
from extradeep.errors import InputError
from extradeep.io.cluster import connect, scheduler_from_env, scheduler_from_options


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
    system=None,
    scheduler=None,
) -> Experiment:
    """Read profiles into an Experiment (its `.problems` lists every skipped input), and with `replay`
    add the exposure curves of the runs at the largest points.

    Each file is opened once (:func:`extradeep.aggregate.ingest.read_runs`, cached, in parallel): that
    pass gives its per-step sums, the rank's placement (host, GPUs) for the cluster layout and, for the
    files the replay will use, the frames of the replay.

    `replay` (default True): replay the traces of the runs at the 3 largest points
    (:func:`extradeep.predictor.exposure.add_exposure_curves`), so the step model knows how much
    communication a step can hide as it grows (`settings["exposure"]`); the replay reuses the frames of
    the one pass and opens only files whose results came from the cache. With False (CLI
    `--no-replay`, TOML `no-replay = true`) nothing is replayed: faster, and the step model then
    extrapolates the overlap it measured. A full replay of one run, with its critical path and what-ifs,
    is :func:`extradeep.predict`.

    A saved experiment (`.sqlite` written by `Experiment.save`) is loaded as it was saved, without
    reading or replaying anything. `system` (a preset name, TOML file or
    :class:`extradeep.system.System`) overrides or completes the cluster layout read from the exports
    (`settings["system"]`; also on a saved experiment). `scheduler` (a Dask scheduler's address,
    "local", "slurm", a SlurmOptions or a Client; default env EXTRADEEP_SCHEDULER) runs the reading and
    the replays on a Dask cluster, connected once (:func:`extradeep.io.cluster.connect`); without it
    they run on this machine."""
    from extradeep.io.store import is_saved_experiment

    if replay not in (True, False):
        raise InputError(None, field="replay", problem=f"must be True or False, got {replay!r}")
    if replay:  # the predictor is imported only when it replays
        from extradeep.predictor.exposure import add_exposure_curves, replay_paths
    single = paths if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else None
    if single is not None and manifest is None and is_saved_experiment(single):
        return with_system(Experiment.load(single), system)
    with connect(scheduler_from_env(scheduler), jobs=jobs) as client:
        found = discover_runs(paths, params, aliases=aliases, manifest=manifest)
        wanted = replay_paths(found.runs, found.params) if replay else []
        experiment, frames = read_runs(
            found,
            settings,
            dataset=dataset,
            min_points=min_points,
            jobs=jobs,
            cache_dir=cache_dir,
            use_cache=use_cache,
            progress=progress,
            scheduler=client,
            replay_paths=wanted,
        )
        if replay:
            add_exposure_curves(
                experiment,
                cache_dir=cache_dir,
                use_cache=use_cache,
                progress=progress,
                jobs=jobs,
                client=client,
                frames=frames,
            )
    return with_system(experiment, system)


def with_system(experiment: Experiment, system) -> Experiment:
    """The experiment with a system description (settings["system"]) when one is given."""
    if system is not None:
        from extradeep.system import load_system

        experiment.settings["system"] = load_system(system).to_dict()
    return experiment


def dataset_from_options(options: dict, aliases: dict | None = None) -> Dataset | None:
    """The Dataset of resolved options (extradeep.io.config keys) when train-samples is given, else
    None (then only per-step values exist). Errors carry the Dataset field they are about."""
    from extradeep.io.config import number_or_name

    if options["train_samples"] is None:
        if options["val_samples"] is not None:
            raise InputError(None, field="train_samples", problem="is needed with val_samples (and batch_per_rank)")
        return None
    if options["batch_size"] is None:
        raise InputError(None, field="batch_per_rank", problem="the batch size per rank is needed with train_samples")
    aliases = aliases or {}

    def param(value):
        value = number_or_name(value)
        return aliases.get(value, value) if isinstance(value, str) else value

    # Dataset checks every value: sizes and degrees > 0 (val_samples >= 0), one line naming the field
    return Dataset(
        train_samples=number_or_name(options["train_samples"]),
        val_samples=number_or_name(options["val_samples"] or 0),
        batch_per_rank=param(options["batch_size"]),
        gpus_param=param(options["gpus_param"]),
        model_parallel=param(options["model_parallel"]),
        weak_scaling=bool(options["weak_scaling"]),
        last_batch=str(options["last_batch"]),
    )


def load_arguments(options: dict) -> dict:
    """Keyword arguments of `load_experiment` from resolved options (`extradeep.io.config.folder_config`
    or the CLI's options): how the CLI and the GUI read the same folder the same way."""
    from extradeep.io.config import reader_settings
    from extradeep.io.discover import parse_aliases

    aliases = parse_aliases(options["alias"])
    return {
        "params": options["param"] or None,
        "settings": reader_settings(options),
        "aliases": aliases,
        "manifest": options["manifest"],
        "dataset": dataset_from_options(options, aliases),
        "min_points": int(options["min_points"]),
        "jobs": options["jobs"],
        "cache_dir": options["cache_dir"],
        "use_cache": not options["no_cache"],
        "replay": not options["no_replay"],
        "system": _system(options["system"]),
        "scheduler": scheduler_from_options(options),
    }


def _system(spec):
    """The cluster description of a `system` option (a preset name or TOML file), loaded now so a bad
    file fails before the long read."""
    if not spec:
        return None
    from extradeep.system import load_system

    return load_system(spec)
