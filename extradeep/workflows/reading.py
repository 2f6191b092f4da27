"""Profiles (or a saved experiment, or an Extra-P text file) into an Experiment and an Analysis, as
every modeling workflow starts: from one resolved :class:`extradeep.pipeline.Options`.

`on_read(experiment)` is called as soon as an experiment is read, so a front end can show its
skipped inputs and notes before the long modeling; `progress(message)` reports the steps.
"""

from __future__ import annotations

from pathlib import Path

from extradeep.errors import InputError
from extradeep.pipeline import Options


def experiment_of_options(options: Options, on_read=None, progress=None):
    """The Experiment of `options`: exports read (and replayed), or a saved experiment loaded with
    the dataset, minimum points and system the options give. Nothing usable: InputError whose
    `.problems` lists every problem."""
    from extradeep.aggregate.experiment import Experiment, dataset_dict
    from extradeep.io.store import is_saved_experiment
    from extradeep.pipeline import load_experiment

    profiles = list(options.profiles)
    if not profiles and not options.manifest:
        raise InputError(None, "give PROFILES (exports or directories) or --manifest")
    if len(profiles) == 1 and not options.manifest and is_saved_experiment(profiles[0]):
        experiment = Experiment.load(profiles[0])
        if options.dataset is not None:
            experiment.settings.dataset = dataset_dict(options.dataset)
        _check_params(experiment, options.param, options.aliases, profiles[0])
        if options.given("min_points"):
            experiment.set_min_points(options.min_points)
        if options.system_spec is not None:
            experiment.settings.system = options.system_spec.to_dict()
    else:
        experiment = load_experiment(profiles or None, progress=progress, **options.load_arguments())
    if on_read is not None:
        on_read(experiment)
    return experiment


def _check_params(experiment, params, aliases, source) -> None:
    wanted = [aliases.get(p, p) for p in params or ()]
    if wanted and sorted(wanted) != sorted(experiment.params):
        raise InputError(source, f"this saved experiment models {experiment.params}, not {wanted}")


def is_extrap_text(profiles) -> bool:
    """One plain-text file (not SQLite, not a Kineto trace) among the profiles: an Extra-P text input.
    A profile's name (.sqlite, .json[.gz]) goes to its reader, which says when the content is wrong."""
    from extradeep.io.formats import GZIP_MAGIC, SQLITE_MAGIC, format_by_name

    profiles = list(profiles or [])
    if len(profiles) != 1 or not Path(profiles[0]).is_file() or format_by_name(profiles[0]) is not None:
        return False
    try:
        with open(profiles[0], "rb") as handle:
            head = handle.read(64)
    except OSError:
        return False  # the profile reader says, in one line, that it cannot be read
    return not head.startswith((SQLITE_MAGIC, GZIP_MAGIC)) and head.lstrip()[:1] not in (b"{", b"[")


def read_analysis(options, on_read=None, progress=None):
    """(Analysis, Experiment or None) of :class:`~extradeep.workflows.options.AnalysisOptions`: an
    Extra-P text file is modeled as it is (no experiment), anything else read and modeled."""
    from extradeep.analysis.core import analyse, analyse_table

    if is_extrap_text(options.reading.profiles):
        from extradeep.modeling import read_extrap_text
        from extradeep.modeling.extrap_text import text_model_options

        table = read_extrap_text(options.reading.profiles[0])
        modeler = text_model_options(options.modeler, table)
        analysis = analyse_table(table, table.attrs["params"], modeler, options.scaling, options.ranks_param)
        return analysis, None
    experiment = experiment_of_options(options.reading, on_read)
    analysis = analyse(
        experiment,
        options=options.modeler,
        scaling=options.scaling,
        ranks_param=options.ranks_param,
        progress=progress,
        refit=options.refit,
    )
    return analysis, experiment


def evaluation_reading(reading: Options, config, folder, params) -> Options:
    """The reading options of a second folder of exports (for evaluation): the options given and the
    settings file (`config`, else the folder's own) of `reading`, with the folder as the only
    profiles and the modeling runs' parameters (an evaluation folder may hold one configuration,
    where nothing varies)."""
    given = {key: getattr(reading, key) for key in reading.explicit if key not in reading.origins}
    given.update(profiles=[str(folder)], manifest=None, param=list(params), alias=None)
    config = config or next(iter(reading.origins.values()), None)
    if config is not None:
        return Options.resolve(given, config=config)
    return Options.resolve(given, folder=folder)
