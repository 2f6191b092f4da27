"""`extradeep layouts` and `extradeep plan --layout-model` as one library call each: the layout study
(:func:`layout_search`, calibrate and search, writing the table and the HTML report) and the small
runs that pin down the layout model (:func:`layout_plan`). Options come as the user gave them (text
lists such as ``"64:512:64"`` or lists of numbers), are resolved into a
:class:`extradeep.layout_study.LayoutStudy` once and checked before any file is read."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from extradeep.analysis.points import parse_values
from extradeep.errors import InputError
from extradeep.workflows.outputs import check_outputs, input_paths, resolved


def _named(name: str, parse):
    """``parse()``, with an error that names a flag-like source named as the field ``name``."""
    try:
        return parse()
    except InputError as exc:
        if exc.source is not None and exc.source.lstrip("-").replace("-", "_") == name:
            raise InputError(None, exc.problem, field=name) from None
        raise


def whole_numbers(value, name: str, low: int = 1) -> list[int]:
    """``"0,1"``, ``"64:512:64"`` or a list -> whole numbers >= ``low``; an error names ``name``."""
    if not isinstance(value, str):
        values = [float(v) for v in value]
        if any(v < low for v in values):
            raise InputError(None, f"{list(value)!r}: each must be >= {low}", field=name)
    else:
        values = _named(name, lambda: parse_values(value, name, minimum=low))
    if any(v != int(v) for v in values):
        raise InputError(None, f"{value!r}: whole numbers only", field=name)
    return [int(v) for v in values]


def words(value) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value or ())
    return [str(w).strip().lower() for w in items if str(w).strip()]


def hardware_list(value) -> list:
    """``"a100-80gb,h100.toml"`` or a list -> the GPU types to search, each once, in the order given;
    an empty entry (``"a100-80gb,"``) is no type (it read as the folder '.')."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    items = [h.strip() if isinstance(h, str) else h for h in items]
    chosen = list(dict.fromkeys(h for h in items if not isinstance(h, str) or h))
    if value and not chosen:
        raise InputError(None, f"{value!r} names no GPU type (give presets or hardware files)", field="search_hardware")
    return chosen


@dataclass(frozen=True)
class LayoutsOptions:
    """What `layouts` asks; the fields are :class:`extradeep.layout_study.LayoutStudy`'s as the user
    gives them (``table``: measured CSVs, ``alias``: file-name tokens; lists as text or values,
    ``max_time`` as a duration such as ``"90min"``), plus the outputs ``output`` (.csv or .json: every
    candidate) and ``report`` (HTML) and ``progress(done, total, message)``. ``study`` is the
    resolved, checked study."""

    profiles: tuple = ()
    table: tuple = ()
    hardware: object = None
    model: object = None
    profiled_model: object = None
    alias: tuple = ()
    manifest: str | None = None
    dp_overlap: float = 0.0
    grad_overlap: str = "none"
    gpus: object = None
    global_batch: int | None = None
    samples_per_epoch: float | None = None
    search_hardware: object = None
    micro_batches: object = "1,2,4,8,16"
    zero: object = "0,1"
    recompute: object = "full"
    schedules: object = "1f1b"
    chunks: object = "2"
    objective: str = "time"
    max_time: object = None
    max_cost: float | None = None
    price_per_gpu_hour: float | None = None
    price_per_kwh: float | None = None
    output: str | None = None
    report: str | None = None
    progress: Callable | None = field(default=None, compare=False, repr=False)
    study: object = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        from extradeep.layout_study import check_study

        for key in ("profiles", "table", "alias"):
            object.__setattr__(self, key, tuple(str(p) for p in getattr(self, key) or ()))
        self._check_outputs()
        study = self._study()
        if self.report and not study.searching:
            raise InputError(
                None, "the layout report shows a search: give --model, --gpus and --global-batch", field="report"
            )
        check_study(study)
        object.__setattr__(self, "study", study)

    def _study(self):
        from extradeep.analysis.points import parse_duration
        from extradeep.layout_study import LayoutStudy

        searching = self.model is not None
        max_time = self.max_time
        if isinstance(max_time, str):
            max_time = _named("max_time", lambda: parse_duration(self.max_time, "max_time"))
        return LayoutStudy(
            profiles=list(self.profiles),
            tables=list(self.table),
            hardware=self.hardware,
            model=self.model,
            profiled_model=self.profiled_model,
            aliases=list(self.alias),
            manifest=self.manifest,
            dp_overlap=self.dp_overlap,
            grad_overlap=self.grad_overlap,
            gpus=whole_numbers(self.gpus, "gpus") if searching and self.gpus else [],
            global_batch=self.global_batch,
            samples_per_epoch=self.samples_per_epoch,
            search_hardware=hardware_list(self.search_hardware),
            micro_batches=tuple(whole_numbers(self.micro_batches, "micro_batches")),
            zero=tuple(whole_numbers(self.zero, "zero", low=0)),
            recompute=tuple(words(self.recompute)),
            schedules=tuple(words(self.schedules)),
            chunks=tuple(whole_numbers(self.chunks, "chunks")),
            objective=self.objective,
            max_time=max_time,
            max_cost=self.max_cost,
            price_per_gpu_hour=self.price_per_gpu_hour,
            price_per_kwh=self.price_per_kwh,
        )

    def _check_outputs(self) -> None:
        """Outputs that would replace an input (or lie in an input folder) or cannot be written are
        refused before any work."""
        given = [*self.profiles, *self.table, self.model, self.profiled_model, self.hardware, self.manifest]
        given = [p for p in given if isinstance(p, (str, Path)) and p]
        if self.output and self.report and resolved(self.output) == resolved(self.report):
            raise InputError(None, "give --output and --report different files", field="report")
        if self.output or self.report:
            check_outputs({"output": self.output, "report": self.report}, input_paths(given))
        folders = [resolved(p) for p in given if Path(p).is_dir()]
        for name, path in (("output", self.output), ("report", self.report)):
            target = resolved(path) if path else None
            if target is not None and target.exists() and any(f in target.parents for f in folders):
                raise InputError(
                    None, f"{path} lies in an input folder and exists; refusing to overwrite it", field=name
                )
        if self.report and resolved(self.report).suffix.lower() not in (".html", ".htm"):
            raise InputError(None, f"{self.report}: the layout report is one HTML file (.html)", field="report")


@dataclass
class LayoutsResult:
    """The study's :class:`extradeep.layout_study.LayoutStudyResult`; ``fit``: without a search, the
    tables' layouts with the calibrated model's prediction and its error (else None); ``written``:
    (what, path, rows) of each file written; ``warnings``: files skipped, one line each."""

    study: object
    fit: object = None
    written: list = field(default_factory=list)
    warnings: list = field(default_factory=list)


def layout_search(options: LayoutsOptions) -> LayoutsResult:
    """Calibrate, search, and write the table and the report asked for."""
    from extradeep.layout_study import run_layout_study
    from extradeep.layouts.search import write_search

    study = run_layout_study(options.study, progress=options.progress if options.study.profiled else None)
    result = LayoutsResult(study, warnings=list(study.problems))
    if study.table is None:
        result.fit = _fit_table(study.model, study.observations)
        table = result.fit
    else:
        table = study.table
    if options.output and table is not None:
        write_search(table, options.output)
        result.written.append(("layouts", options.output, len(table)))
    if options.report:
        from extradeep.report.layout_html import build_layout_report

        build_layout_report(study, options.report)
        result.written.append(("report", options.report, None))
    return result


def _fit_table(model, observations):
    from extradeep.columns import PREDICTED, STEP_TIME

    if observations is None:
        return None
    predicted = model.predict(observations)
    frame = observations.assign(**{PREDICTED: predicted[STEP_TIME].to_numpy()})
    frame["error_pct"] = 100 * (frame[PREDICTED] / frame[STEP_TIME] - 1)
    return frame


@dataclass(frozen=True)
class LayoutPlanOptions:
    """What `plan --layout-model` asks: the ``layout_model`` (a model description), the ``target`` GPU
    counts (text such as ``"64,256"`` or numbers) at ``global_batch`` samples per step, runs of at
    most ``max_ranks`` GPUs on ``hardware``, chosen within ``budget`` GPU-hours (else ``k`` runs) of
    ``run_seconds`` each; ``output``: the runs as CSV."""

    layout_model: str
    target: object
    max_ranks: int
    global_batch: int | None = None
    hardware: object = None
    budget: float | None = None
    k: int = 3
    run_seconds: float = 300.0
    output: str | None = None
    targets: list = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        from extradeep.analysis.points import parse_values
        from extradeep.layouts.workload import LARGEST_WHOLE

        if self.global_batch is None:
            raise InputError(None, "a layout plan needs the samples per step at the targets", field="global_batch")
        if not 1 <= int(self.global_batch) <= LARGEST_WHOLE:
            raise InputError(None, f"must be a whole number from 1 to {LARGEST_WHOLE}", field="global_batch")
        if not (math.isfinite(self.run_seconds) and self.run_seconds > 0):
            raise InputError(None, f"must be a number of seconds > 0, got {self.run_seconds!r}", field="run_seconds")
        if self.output:
            check_outputs({"output": self.output}, input_paths([self.layout_model]))
        target = self.target
        values = _named("target", lambda: parse_values(target, "target")) if isinstance(target, str) else target
        if any(not 1 <= v <= LARGEST_WHOLE for v in values):
            raise InputError(None, f"GPU counts are whole numbers from 1 to {LARGEST_WHOLE}", field="target")
        object.__setattr__(self, "targets", [int(v) for v in values])


@dataclass
class LayoutPlanResult:
    """The chosen ``runs`` (a table: layout, GPU-hours, gain; attrs ``candidates`` and ``criterion``)
    and ``written``: (what, path, rows) of the file written."""

    runs: object
    written: list = field(default_factory=list)


def layout_plan(options: LayoutPlanOptions) -> LayoutPlanResult:
    """The small runs that pin down the layout model's parts for predictions at the targets."""
    from extradeep.columns import FITS
    from extradeep.layouts.design import plan_layout_runs
    from extradeep.layouts.model import LayoutModel
    from extradeep.layouts.space import enumerate_layouts
    from extradeep.layouts.workload import load_transformer

    shape = load_transformer(options.layout_model)
    model = LayoutModel(hardware=options.hardware, interval=None).fit(None)
    gpus = options.targets
    targets = enumerate_layouts(shape, gpus, options.global_batch, model.hardware_.system.gpus_per_node)
    if targets.empty:
        raise InputError(
            None, f"no valid layout for {options.global_batch} samples per step on {gpus} GPUs", field="target"
        )
    fits = model.predict(targets)[FITS].to_numpy()
    runs = plan_layout_runs(
        shape,
        options.max_ranks,
        model,
        budget_gpu_hours=options.budget,
        runs=None if options.budget else options.k,
        targets=targets[fits] if fits.any() else targets,
        run_seconds=options.run_seconds,
    )
    result = LayoutPlanResult(runs)
    if options.output:
        runs.to_csv(options.output, index=False)
        result.written.append(("runs", options.output, len(runs)))
    return result
