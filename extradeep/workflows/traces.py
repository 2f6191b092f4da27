"""`extradeep predict` as one library call: replay one run's traces, answer what-if questions, and
optionally analyse the trace and search for what to change (:func:`predict_run`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from extradeep.columns import METRIC, PATH, PHASE, REGION, STEP_REGION, TIME, TRAIN
from extradeep.errors import InputError
from extradeep.workflows.trace_analyses import OptimizeOptions, TraceAnalyses, TraceAnalysisOptions

STEP_MARK_KEYS = ("epoch_pattern", "train_step_pattern", "val_step_pattern", "warmup_epochs", "warmup_steps")
JSON_TABLES = (
    *("summary", "steps", "breakdown", "critical_path", "owners", "overheads", "kernel_sums", "collectives"),
    *("what_if_steps", "files"),
)


def reader_settings(step_marks):
    """ReaderSettings from the step-mark options (a dict of :data:`STEP_MARK_KEYS`; None values keep
    the reader's defaults), a ReaderSettings or None; an error names the option."""
    from extradeep.io.settings import ReaderSettings

    if not isinstance(step_marks, dict):
        return ReaderSettings.from_any(step_marks)
    for key, value in step_marks.items():  # one at a time, so that an error names its option
        try:
            ReaderSettings.from_any({key: value})
        except InputError as exc:
            raise InputError(None, exc.problem, field=exc.field or key) from None
    return ReaderSettings.from_any(step_marks)


def parse_selection(items) -> dict:
    """``["ranks=4", "rep=1"]`` -> ``{"ranks": 4, "rep": 1}``: which run of a folder to replay."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(None, f"{item!r} is not PARAM=VALUE", field="run")
        try:
            out[key.strip()] = int(value) if value.strip().lstrip("-").isdigit() else float(value)
        except ValueError:
            raise InputError(None, f"{item!r}: {value!r} is not a number", field="run") from None
    return out


@dataclass(frozen=True)
class PredictOptions:
    """What `predict` asks. ``run_dir``: the exports of one run; ``run``: PARAM=VALUE items picking one
    run of a folder; ``what_if``: one scenario each; ``ranks`` adds the scenario at P ranks (costed by
    ``algorithm`` on ``system``); ``combine`` one more with all changes together; ``experiment``: a saved
    experiment whose PMNF models serve pmnf.* changes; ``step_marks``: the step conventions; outputs
    ``json``, ``timeline`` (CSV), ``plot`` (PNG); ``analyses`` and ``optimize`` (None: no search).
    Built once, checked once: every error names its option, outputs are checked before any reading."""

    run_dir: str
    what_if: tuple[str, ...] = ()
    ranks: int | None = None
    combine: bool = False
    algorithm: str = "ring"
    system: object = None
    run: tuple[str, ...] = ()
    experiment: str | None = None
    keep_gpu_gaps: bool = False
    top: int = 10
    json: str | None = None
    timeline: str | None = None
    plot: str | None = None
    step_marks: object = None
    analyses: TraceAnalysisOptions = field(default_factory=TraceAnalysisOptions)
    optimize: OptimizeOptions | None = None
    progress: bool = False
    settings: object = field(init=False, compare=False, repr=False)
    selection: dict = field(init=False, compare=False, repr=False)
    scenarios: list = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        from extradeep.workflows.outputs import check_outputs, input_paths

        for key in ("what_if", "run"):
            object.__setattr__(self, key, tuple(getattr(self, key) or ()))
        if self.ranks is not None and (isinstance(self.ranks, bool) or self.ranks < 1):
            raise InputError(None, f"must be a whole number >= 1 (got {self.ranks})", field="ranks")
        if self.top < 1:
            raise InputError(None, f"must be >= 1 (got {self.top})", field="top")
        report = self.optimize.optimize_report if self.optimize else None
        # everything predict reads (the exports of the run, the experiment) counts as an input
        read = [self.run_dir] + ([self.experiment] if self.experiment else [])
        outputs = {"json": self.json, "timeline": self.timeline, "plot": self.plot, "optimize_report": report}
        if any(outputs.values()):  # finding the run's exports costs a walk; no outputs, nothing to guard
            check_outputs(outputs, input_paths(read))
        if self.system:
            from extradeep.system import load_system

            load_system(self.system)  # a bad file fails before the long read
        object.__setattr__(self, "settings", reader_settings(self.step_marks))
        object.__setattr__(self, "selection", parse_selection(self.run))
        object.__setattr__(self, "scenarios", self._scenarios())

    def _scenarios(self) -> list:
        """One per what-if, the ranks one, the combined one; the same changes asked twice once."""
        from extradeep.predictor.whatif import change_key, combine_what_ifs, parse_what_if

        scenarios = [parse_what_if(spec) for spec in self.what_if]
        if self.ranks is not None:
            spec = f"ranks={self.ranks}; comm.algorithm={self.algorithm}"
            scenarios.append(parse_what_if(spec + (f"; pmnf.ranks={self.ranks}" if self.experiment else "")))
        if self.combine:
            if len(scenarios) < 2:
                raise InputError(None, "needs at least two scenarios (--what-if or --ranks)", field="combine")
            scenarios.append(combine_what_ifs(scenarios))
        unique = {}
        for w in scenarios:
            unique.setdefault(frozenset((change_key(c), c.value) for c in w.changes), w)
        return list(unique.values())


@dataclass
class EmpiricalStep:
    """The experiment's empirical PMNF step-time model at ``ranks`` (``seconds`` None: no such model)."""

    ranks: int
    seconds: float | None = None
    formula: str | None = None


@dataclass
class PredictResult:
    """The :class:`extradeep.predictor.Prediction`; the empirical step time at --ranks (with an
    experiment); the trace analyses and the fitted strategy search when asked; ``written``: (what,
    path) of every file written; ``warnings``: one line each."""

    prediction: object
    empirical: EmpiricalStep | None = None
    analyses: TraceAnalyses | None = None
    search: object = None
    written: list = field(default_factory=list)
    warnings: list = field(default_factory=list)


def predict_run(options: PredictOptions) -> PredictResult:
    """Replay the run, write the outputs asked for, and run the analyses and the search."""
    from extradeep.predictor import predict

    models = _models(options.experiment) if options.experiment else None
    pred = predict(
        options.run_dir,
        what_if=options.scenarios,
        select=options.selection,
        settings=options.settings,
        gpu_gaps="keep" if options.keep_gpu_gaps else "drop",
        models=models,
        progress=options.progress,
        system=options.system,
    )
    result = PredictResult(pred, warnings=list(pred.warnings))
    if models is not None and options.ranks:
        result.empirical = _empirical(models, options.ranks)
    _write_outputs(pred, options, result.written)
    paths = sorted(set(pred.files[PATH]))  # the files the prediction read, without resolving the folder again
    if options.analyses.asked:
        from extradeep.workflows.trace_analyses import trace_analyses

        result.analyses = trace_analyses(paths, options.analyses, options.settings)
    if options.optimize is not None:
        from extradeep.workflows.trace_analyses import optimize_run

        result.search = optimize_run(paths, options.optimize, options.settings, progress=options.progress)
        if options.optimize.optimize_report:
            result.written.append(("strategies", options.optimize.optimize_report))
    return result


def _models(path):
    from extradeep.aggregate.experiment import Experiment
    from extradeep.modeling import fit_models

    exp = Experiment.load(path)
    points = exp.points[(exp.points[METRIC] == TIME) & (exp.points[PHASE] == TRAIN)]
    return fit_models(points, exp.params, by=(REGION,))


def _empirical(models, ranks: int) -> EmpiricalStep:
    import numpy as np

    step = models[(models[REGION] == STEP_REGION) & models["model"].notna()]
    if step.empty:
        return EmpiricalStep(ranks)
    model = step["model"].iloc[0]
    return EmpiricalStep(ranks, float(np.ravel(model.predict(np.array([float(ranks)])))[0]), model.formula())


def _write_outputs(pred, options: PredictOptions, written: list) -> None:
    import pandas as pd

    if options.json:
        _write_json(pred, options.json)
        written.append(("JSON", options.json))
    if options.timeline:
        frames = [pred.timeline(s).assign(scenario=s) for s in pred.results]
        pd.concat(frames, ignore_index=True).to_csv(options.timeline, index=False)
        written.append(("timeline", options.timeline))
    if options.plot:
        from extradeep.predictor.plot import plot_prediction

        plot_prediction(pred, options.plot)
        written.append(("plot", options.plot))


def _write_json(pred, path) -> None:
    out = {
        "notes": pred.notes,
        "warnings": pred.warnings,
        **{name: json.loads(getattr(pred, name).to_json(orient="records")) for name in JSON_TABLES},
    }
    try:
        with open(path, "w") as fh:
            json.dump(out, fh, indent=1)
    except OSError as exc:
        raise InputError(path, f"cannot write JSON ({exc.strerror})") from None
