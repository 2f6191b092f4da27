"""The pipeline's steps composed: profiles -> Experiment (with exposure curves) -> models -> analysis.

Each step is its own library function; this module only calls them in order, so a notebook, the CLI
and the GUI run the same pipeline. The steps stay importable on their own for finer control.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
    communication a step can hide as it grows (`settings.exposure`); the replay reuses the frames of
    the one pass and opens only files whose results came from the cache. With False (CLI
    `--no-replay`, TOML `no-replay = true`) nothing is replayed: faster, and the step model then
    extrapolates the overlap it measured. A full replay of one run, with its critical path and what-ifs,
    is :func:`extradeep.predict`.

    A saved experiment (`.sqlite` written by `Experiment.save`) is loaded as it was saved, without
    reading or replaying anything. `system` (a preset name, TOML file or
    :class:`extradeep.system.System`) overrides or completes the cluster layout read from the exports
    (`settings.system`; also on a saved experiment). `scheduler` (a Dask scheduler's address,
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
    """The experiment with a system description (settings.system) when one is given."""
    if system is not None:
        from extradeep.system import load_system

        experiment.settings.system = load_system(system).to_dict()
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


def load_arguments(options) -> dict:
    """Keyword arguments of `load_experiment` from options (an :class:`Options`, or a mapping of its
    fields that is resolved here): how the CLI and the GUI read the same folder the same way."""
    return (options if isinstance(options, Options) else Options.resolve(options)).load_arguments()


def _system(spec):
    """The cluster description of a `system` option (a preset name or TOML file), loaded now so a bad
    file fails before the long read."""
    if not spec:
        return None
    from extradeep.system import load_system

    return load_system(spec)


# -- the one options object (issue 22 item 2) ------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """How profiles are read into an Experiment, as the CLI, a folder's `extradeep.toml` and the API give
    it: one typed value, resolved and validated once, when it is built.

    The fields are the keys of :data:`extradeep.io.config.DEFAULTS` (the keys a settings file may set,
    with `-` or `_`). :meth:`resolve` lays the given values over a settings file over the defaults;
    building it checks every value and derives what the library takes (`reader`, `aliases`, `dataset`,
    `system_spec`, `scheduler_spec`), so a bad value fails before any reading, in one line naming the
    option as the user gave it: the settings file and its key (`extradeep.toml: train-samples: ...`)
    when the file set it, else the library's field (`train_samples`), which the CLI shows as its flag
    and the GUI as its widget. :meth:`load_arguments` gives `load_experiment`'s keyword arguments.
    `origins`: option -> the settings file that set it (absent: given, or the default)."""

    profiles: tuple[str, ...] = ()
    param: tuple[str, ...] = ()
    alias: tuple[str, ...] = ()
    manifest: str | None = None
    epoch_pattern: str | None = None
    train_step_pattern: str | None = None
    val_step_pattern: str | None = None
    warmup_epochs: int = 1
    warmup_steps: int = 1
    kernel_names: str = "short"
    min_points: int = 5
    jobs: int | None = None
    cache_dir: str | None = None
    no_cache: bool = False
    no_replay: bool = False
    scheduler: object = None
    slurm: dict = field(default_factory=dict)
    system: object = None
    train_samples: float | str | None = None
    val_samples: float | str | None = None
    batch_size: float | str | None = None
    gpus_param: float | str = "ranks"
    model_parallel: float | str = 1
    weak_scaling: bool = False
    last_batch: str = "drop"
    origins: dict = field(default_factory=dict, compare=False, repr=False)
    explicit: frozenset = field(default=frozenset(), compare=False, repr=False)  # options given or set by a file
    reader: object = field(init=False, compare=False, repr=False)
    aliases: dict = field(init=False, compare=False, repr=False)
    dataset: Dataset | None = field(init=False, compare=False, repr=False)
    system_spec: object = field(init=False, compare=False, repr=False)
    scheduler_spec: object = field(init=False, compare=False, repr=False)

    @classmethod
    def resolve(cls, given=None, *, config=None, folder=None) -> Options:
        """`given` (a mapping of option -> value; None or [] for "not given") over the settings file
        `config` (a path; default: the `extradeep.toml` of `folder`, when there is one) over the
        defaults. Unknown keys of the file are refused in one line naming it."""
        from extradeep.io.config import DEFAULTS, folder_config_path, read_config

        if config is None and folder is not None:
            config = folder_config_path(folder)
        from_file = read_config(config) if config is not None else {}
        values, origins = {}, {}
        for key in DEFAULTS:
            value = (given or {}).get(key)
            if value in (None, []) and key in from_file:
                value, origins[key] = from_file[key], str(config)
            if value not in (None, []):
                values[key] = value
        return cls(**values, origins=origins, explicit=frozenset(values))

    def __post_init__(self):
        for key in ("profiles", "param", "alias"):
            value = getattr(self, key)
            items = (value,) if isinstance(value, (str, Path)) else tuple(value or ())
            object.__setattr__(self, key, tuple(str(v) for v in items))
        for key in ("no_cache", "no_replay", "weak_scaling"):
            if getattr(self, key) not in (True, False):
                self._fail(key, f"must be true or false, got {getattr(self, key)!r}")
        for key in ("jobs", "min_points"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                self._fail(key, f"must be at least 1, got {value!r}")
        if not isinstance(self.slurm, dict):
            self._fail("slurm", "must be a table ([slurm] with queue, cores, memory, walltime, jobs, account)")
        self._derive()

    def _derive(self) -> None:
        from extradeep.io.config import READER_KEYS
        from extradeep.io.discover import parse_aliases
        from extradeep.io.settings import ReaderSettings

        for key in READER_KEYS:  # one at a time, so that an error names its option
            self._checked(key, lambda k=key: ReaderSettings(**{k: getattr(self, k)}))
        derived = (  # (attribute, the option an error without a field is about, how it is built)
            ("reader", None, lambda: ReaderSettings(**{k: getattr(self, k) for k in READER_KEYS})),
            ("aliases", "alias", lambda: parse_aliases(self.alias)),
            ("dataset", None, lambda: dataset_from_options(self, self.aliases)),
            ("system_spec", "system", lambda: _system(self.system)),
            ("scheduler_spec", "scheduler", lambda: scheduler_from_options(self)),
        )
        for name, key, build in derived:
            object.__setattr__(self, name, self._checked(key, build))

    def _checked(self, key, build):
        """`build()`, with an error about an option named as the user gave it (:meth:`_fail`); an
        error that names a file (a --system file, the [slurm] table) stays as it is."""
        try:
            return build()
        except InputError as exc:
            if exc.source is not None or (exc.field is None and key is None):
                raise
            self._fail(OPTION_OF_FIELD.get(exc.field, exc.field or key), exc.problem)

    def _fail(self, key: str, problem: str):
        origin = self.origins.get(key)
        if origin is not None:
            raise InputError(origin, f"{key.replace('_', '-')}: {problem}")
        raise InputError(None, field=key, problem=problem)

    def __getitem__(self, key: str):
        """`options["min_points"]`: read like the dict of options it replaces."""
        return getattr(self, key)

    def get(self, key: str, default=None):
        return getattr(self, key, default)

    def given(self, key: str) -> bool:
        """Whether an option was given or set by a settings file (or differs from its default)."""
        from extradeep.io.config import DEFAULTS

        default = DEFAULTS[key]
        return key in self.explicit or getattr(self, key) != (tuple(default) if isinstance(default, list) else default)

    def load_arguments(self) -> dict:
        """Keyword arguments of :func:`load_experiment` (without the profiles)."""
        return {
            "params": list(self.param) or None,
            "settings": self.reader,
            "aliases": self.aliases,
            "manifest": self.manifest,
            "dataset": self.dataset,
            "min_points": int(self.min_points),
            "jobs": self.jobs,
            "cache_dir": self.cache_dir,
            "use_cache": not self.no_cache,
            "replay": not self.no_replay,
            "system": self.system_spec,
            "scheduler": self.scheduler_spec,
        }


# a Dataset field -> the option that sets it
OPTION_OF_FIELD = {"batch_per_rank": "batch_size"}
