"""`extradeep report` as one call: the cost-per-epoch budgeting report, one self-contained HTML file
(with the budget search, the evaluation, the measurement plan and the strategy search it asks for)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from extradeep.errors import InputError
from extradeep.workflows.budget import BudgetOptions
from extradeep.workflows.evaluate import EvaluationOptions, evaluation_study
from extradeep.workflows.options import field_error, rank_values, values_of
from extradeep.workflows.outputs import check_outputs

__all__ = ["ReportOptions", "ReportResult", "report_study"]

LAYOUT_TOKENS = ("tp", "pp", "dp", "mbs", "nmb", "zero", "rc", "vpp")


@dataclass(frozen=True)
class ReportOptions(BudgetOptions, EvaluationOptions):
    """The analysis options, optional budget limits and held-out points, and the report: `output`
    (HTML file), `plots` (a folder for every figure, in `plot_formats`), `title`, `top` (regions in
    the bottleneck table), `plan_target` (rank counts for "What to profile next") and
    `optimize_run` (one run's profiles for the strategy search)."""

    limits_required: ClassVar[bool] = False
    evaluation_required: ClassVar[bool] = False

    output: str = "report.html"
    plots: str | None = None
    plot_formats: object = "png,svg"
    title: str | None = None
    top: int = 10
    plan_target: object = None
    optimize_run: str | None = None
    formats: list = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        super().__post_init__()
        if self.plan_target is not None:
            values_of(self.plan_target, "plan_target")  # checked before the long work that precedes its use
        formats = self.plot_formats.split(",") if isinstance(self.plot_formats, str) else self.plot_formats
        object.__setattr__(self, "formats", [f.strip().lower() for f in formats if f.strip()])


@dataclass
class ReportResult:
    """The report written (`html`, `figures`: name -> figure) and what it was made of."""

    options: ReportOptions
    analysis: object
    experiment: object
    html: str
    figures: dict
    written: list[tuple[str, str]] = field(default_factory=list)


def report_study(options: ReportOptions, *, progress=None, on_read=None) -> ReportResult:
    """Read, model, search, evaluate and plan as `options` say and write the report (its path and the
    figure folder are checked first: never over an input). `progress` and `on_read` as for
    :func:`extradeep.workflows.model_study`."""
    from extradeep.report.build import build_report

    if not isinstance(options, ReportOptions):
        raise field_error("options", "must be a ReportOptions")
    refuse_layout_study(options)
    check_outputs({"output": options.output}, options.inputs(), plots=options.plots)
    evaluation = evaluation_study(options, progress=progress, on_read=on_read)
    analysis, experiment = evaluation.analysis, evaluation.experiment
    built = build_report(
        analysis,
        options.output,
        grid=options.prediction_grid(analysis)[1] if options.predict_values is not None else None,
        cost=options.cost,
        limits=options.limits,
        candidates=rank_values(options.candidates, "candidates"),
        max_ranks=options.max_ranks,
        fixed=options.fixed(analysis),
        errors=evaluation.errors,
        evaluation_points=evaluation.evaluation_points,
        experiment=experiment,
        level=options.level,
        title=options.title,
        plots_dir=options.plots,
        plot_formats=options.formats,
        plan=plan_for_report(options, experiment, analysis),
        optimization=optimization(options),
    )
    written = [("report", options.output)] + ([("plots", options.plots)] if options.plots else [])
    return ReportResult(options, analysis, experiment, built["html"], built["figures"], written)


def refuse_layout_study(options: ReportOptions) -> None:
    """Runs in several parallel layouts are a question for `extradeep layouts`: say so at once, from
    the file names, instead of failing after the whole read with too many parameters to model."""
    from extradeep.io.discover import runs_from_names

    reading = options.reading
    if reading.manifest or not reading.profiles:
        return
    try:
        runs, _ = runs_from_names(list(reading.profiles), reading.aliases)
    except InputError:
        return  # the reading names the problem
    varying = [c for c in LAYOUT_TOKENS if c in runs and runs[c].nunique() > 1]
    if varying:
        raise InputError(
            None,
            f"the profiles are runs in several parallel layouts ({', '.join(varying)} vary), and this report models "
            f"one data-parallel axis; write the layout report instead: extradeep layouts {' '.join(reading.profiles)} "
            f"--model MODEL.toml --gpus N,N --global-batch B --report {options.output}",
        )


def plan_for_report(options: ReportOptions, experiment, analysis=None):
    """The plan of `plan_target` (None without it): 3 next runs within `max_ranks` (default: twice
    the largest measured ranks), for the report's own primary time model."""
    if not options.plan_target or experiment is None:
        return None
    from extradeep.analysis.advisor import MeasurementAdvisor

    measured = experiment.points[options.cost.ranks_param].max()
    max_ranks = int(options.max_ranks or 2 * measured)
    modeler = dict(analysis.options) if analysis is not None else {}
    advisor = MeasurementAdvisor(
        values_of(options.plan_target, "plan_target"),
        max_ranks,
        options.gpus_per_node,
        cost=options.cost,
        level=options.level,
        min_points=int(modeler.get("min_points", 5)),
        options=modeler or None,
        partial_nodes=False,
    )
    return advisor.fit(experiment, None if analysis is None else analysis.primary).propose(3)


def optimization(options: ReportOptions):
    """The strategy search of `optimize_run`, or None."""
    if not options.optimize_run:
        return None
    from extradeep.predictor.optimize import StrategySearch

    return StrategySearch().fit(options.optimize_run, progress=True)
