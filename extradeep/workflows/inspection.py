"""`extradeep inspect` as one library call: what profiles hold, the layouts they show, and their trace
analyses (:func:`inspect_profiles`). A profile that cannot be read is one problem line; the others are
still inspected."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from extradeep.columns import PATH
from extradeep.errors import InputError
from extradeep.workflows.trace_analyses import TraceAnalysisOptions
from extradeep.workflows.traces import reader_settings


def parse_model_shape(text: str | None) -> dict | None:
    """``"2048,4096"`` -> ``{"seq": 2048, "hidden": 4096}``: message sizes give the micro-batch size."""
    if not text:
        return None
    try:
        seq, hidden = (int(v) for v in text.split(","))
    except ValueError:
        raise InputError(None, f"{text!r} is not SEQ,HIDDEN (two whole numbers)", field="model_shape") from None
    if seq < 1 or hidden < 1:
        raise InputError(None, f"{text!r}: both must be >= 1", field="model_shape")
    return {"seq": seq, "hidden": hidden}


@dataclass(frozen=True)
class InspectOptions:
    """What `inspect` asks: ``paths`` (profiles or folders of them), the ``top`` NVTX range names
    listed, ``alias`` tokens and a ``manifest`` for the runs' layouts, ``model_shape`` (SEQ,HIDDEN),
    the ``step_marks`` and the trace ``analyses`` of each path."""

    paths: tuple[str, ...]
    top: int = 10
    alias: tuple[str, ...] = ()
    manifest: str | None = None
    model_shape: str | None = None
    step_marks: object = None
    analyses: TraceAnalysisOptions = field(default_factory=TraceAnalysisOptions)
    settings: object = field(init=False, compare=False, repr=False)
    shape: dict | None = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "paths", tuple(str(p) for p in self.paths))
        object.__setattr__(self, "alias", tuple(self.alias or ()))
        if self.top < 0:
            raise InputError(None, f"must be at least 0, got {self.top}", field="top")
        object.__setattr__(self, "settings", reader_settings(self.step_marks))
        object.__setattr__(self, "shape", parse_model_shape(self.model_shape))


@dataclass
class InspectedProfile:
    """One profile: what it holds (JSON-ready, with its ``parallel_layout``; the summary `inspect`
    prints of it is `extradeep.report.inspect_text.profile_text`)."""

    info: dict


@dataclass
class InspectResult:
    """``profiles`` read; ``problems``: inputs that could not be read, one line each, of ``found``
    paths; ``layout``: the cluster layout the file names give (None without such names); ``runs``:
    each run's layout (folders or a manifest; else None) and ``run_params``, the parameters that
    name a run's point; ``analyses`` of each path; ``warnings``: other problems (the runs, an
    analysis), one line each. Data only: `extradeep.report.inspect_text` formats it."""

    profiles: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    found: int = 0
    layout: dict | None = None
    runs: object = None
    run_params: list = field(default_factory=list)
    analyses: list = field(default_factory=list)
    warnings: list = field(default_factory=list)


def inspect_profiles(options: InspectOptions) -> InspectResult:
    """Inspect every profile given (a folder stands for the profiles below it)."""
    result = InspectResult()
    paths = []
    for given in options.paths:
        found = _expand(given)
        if not found:
            result.problems.append(f"{given}: no profiles in this folder (nor below it)")
        paths += found
    result.found = len(paths)
    facts = {}  # path -> ProfileFacts: read once, for a profile's layout and its run's
    for path in paths:
        try:
            result.profiles.append(_inspect(path, options, facts))
        except InputError as exc:
            result.problems.append(str(exc))
    infos = [p.info for p in result.profiles]
    result.layout = study_layout(infos)
    if options.manifest or any(Path(g).is_dir() for g in options.paths):
        _runs(options, result, facts)
    if infos and options.analyses.asked:
        _analyses(options, result)
    return result


def _inspect(path: str, options: InspectOptions, facts: dict) -> InspectedProfile:
    from extradeep.io.formats import KINETO, profile_format

    trace = None
    if profile_format(path) == KINETO:
        from extradeep.io.kineto.inspect import inspect_trace
        from extradeep.io.kineto.load import load

        trace = load(path)  # once, for the summary and the layout: a large trace takes seconds to parse
        info = inspect_trace(path, options.settings, top=options.top, trace=trace)
    else:
        from extradeep.io.nsys.inspect import inspect_export

        info = inspect_export(path, options.settings, top=options.top)
    info["parallel_layout"] = _layout(path, options, facts, trace)
    return InspectedProfile(info)


def study_layout(infos: list[dict]) -> dict | None:
    """The cluster layout of the inspected profiles whose names give their point, repetition and
    rank (extradeep.io.placement.cluster_layout); None when no name does."""
    import pandas as pd

    from extradeep.io.discover import param_columns, parse_name
    from extradeep.io.placement import cluster_layout

    names, places = [], []
    for info in infos:
        try:
            names.append({PATH: info[PATH], **parse_name(Path(info[PATH]).name)})
        except InputError:
            continue
        places.append(info.get("placement") or {})
    if not names:
        return None
    runs = pd.DataFrame(names)
    params = [p for p in param_columns(runs) if runs[p].nunique() > 1 or p == "ranks"]
    return cluster_layout(pd.concat([runs, pd.DataFrame(places, index=runs.index)], axis=1), params)


def _layout(path, options: InspectOptions, facts: dict, trace=None) -> dict:
    """The layout fields one profile shows (JSON-ready), or the one-line problem; its facts are kept
    in ``facts`` for the runs' layouts."""
    from extradeep.io.parallel.layout import layout_fields, layout_json, profile_facts

    try:
        facts[path] = profile_facts(path, options.settings, trace)
        return layout_json(layout_fields(facts[path], options.shape))
    except InputError as exc:
        return {"problem": exc.problem}


def _runs(options: InspectOptions, result: InspectResult, facts: dict) -> None:
    """Each run's layout, of the folders or the manifest given."""
    from extradeep.io.discover import manifest_runs, param_columns, parse_aliases, runs_from_names
    from extradeep.io.parallel.layout import RUN_FIELDS, TOKEN_ALIASES, run_layouts

    aliases = parse_aliases(options.alias)
    try:
        if options.manifest:
            runs, _ = manifest_runs(options.manifest, aliases)
        else:
            runs, _ = runs_from_names([g for g in options.paths if Path(g).is_dir()], aliases)
    except InputError as exc:
        result.warnings.append(str(exc))
        return
    if runs.empty:
        return
    named_by = "manifest" if options.manifest else "file name"
    layouts, _ = run_layouts(runs, options.settings, options.shape, named_by, facts)
    result.runs = layouts
    result.run_params = [c for c in param_columns(runs) if c not in RUN_FIELDS and c not in TOKEN_ALIASES]


def _analyses(options: InspectOptions, result: InspectResult) -> None:
    """The trace analyses of each path given (a folder is one run); a run that fails is one warning."""
    from extradeep.workflows.trace_analyses import trace_analyses

    for given in options.paths:
        try:
            result.analyses.append(trace_analyses(given, options.analyses, options.settings, title=given))
        except InputError as exc:
            result.warnings.append(str(exc))


def _expand(given: str) -> list[str]:
    """A folder stands for the profiles below it (as `model` finds them); anything else as is."""
    from extradeep.io.discover import find_exports

    return [str(p) for p in find_exports(given)[0]] if Path(given).is_dir() else [given]
