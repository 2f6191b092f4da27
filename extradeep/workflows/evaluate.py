"""`extradeep evaluate` as one call: how well the models predict measured points they were not built
from (paper section 4: accuracy and predictive power)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pandas as pd

from extradeep.errors import InputError
from extradeep.workflows.options import AnalysisOptions, field_error, values_of
from extradeep.workflows.outputs import check_outputs, input_paths
from extradeep.workflows.reading import evaluation_reading, experiment_of_options, read_analysis

__all__ = ["EvaluationOptions", "EvaluationResult", "check_compatible", "evaluation_study"]


@dataclass(frozen=True)
class EvaluationOptions(AnalysisOptions):
    """The analysis options and the held-out points: `eval_points` (measured values of the ranks
    parameter held out of modeling: "16,32" or a list) or `eval_dir` (a folder of exports of further
    configurations, not used for modeling); `csv`: a file for the error of every model at every
    point. Derived: `eval_values`."""

    evaluation_required: ClassVar[bool] = True

    eval_points: object = None
    eval_dir: str | None = None
    csv: str | None = None
    eval_values: list | None = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        super().__post_init__()
        if self.eval_points is not None and self.eval_dir:
            raise InputError(None, "give --eval-points or --eval-dir, not both")
        if self.eval_points is None and not self.eval_dir and self.evaluation_required:
            raise InputError(None, "give --eval-points (held-out measured configurations) or --eval-dir")
        values = None if self.eval_points is None else values_of(self.eval_points, "eval_points")
        object.__setattr__(self, "eval_values", values)

    def inputs(self):
        """Everything read, which no output may overwrite."""
        reading = self.reading
        return input_paths(reading.profiles, reading.manifest, self.config, self.eval_dir)


@dataclass
class EvaluationResult:
    """The models fitted without the held-out points (`analysis`), the experiment they came from,
    `errors` (every model at every point, role "modeling" or "evaluation"; None when nothing was
    held out), the measured `evaluation_points` and the outputs written (("csv", path))."""

    options: EvaluationOptions
    analysis: object
    experiment: object = None
    errors: pd.DataFrame | None = None
    evaluation_points: pd.DataFrame | None = None
    written: list[tuple[str, str]] = field(default_factory=list)


def evaluation_study(options: EvaluationOptions, *, progress=None, on_read=None) -> EvaluationResult:
    """Fit the models without the held-out points and compare them there; write the CSV `options`
    name (checked first: never over an input). `progress` and `on_read` as for
    :func:`extradeep.workflows.model_study`. Without held-out points (where they are optional) the
    models are fitted on everything and `errors` is None."""
    from extradeep.analysis.workflows import evaluate

    if not isinstance(options, EvaluationOptions):
        raise field_error("options", "must be an EvaluationOptions")
    if options.csv:
        check_outputs({"csv": options.csv}, options.inputs())
    if options.eval_values is None and not options.eval_dir:
        analysis, experiment = read_analysis(options, on_read, progress)
        return EvaluationResult(options, analysis, experiment)
    experiment = experiment_of_options(options.reading, on_read)
    if options.eval_dir:
        held = dict(eval_experiment=evaluation_experiment(options, experiment, on_read))
    else:
        held = dict(eval_points=options.eval_values)
    evaluation = evaluate(
        experiment,
        **held,
        options=options.modeler,
        scaling=options.scaling,
        ranks_param=options.ranks_param,
        level=options.level,
        progress=progress,
    )
    result = EvaluationResult(options, evaluation.analysis, experiment, evaluation.errors, evaluation.evaluation_points)
    if options.csv:
        evaluation.errors.to_csv(options.csv, index=False)
        result.written.append(("csv", options.csv))
    return result


def evaluation_experiment(options: EvaluationOptions, modeling, on_read=None):
    """The experiment of `eval_dir`, read with the modeling experiment's parameters and refused when
    it is of another application or has other parameters."""
    reading = evaluation_reading(options.reading, options.config, options.eval_dir, modeling.params)
    full = experiment_of_options(reading, on_read)
    check_compatible(modeling, full, options.eval_dir)
    return full


def check_compatible(modeling, evaluation, source) -> None:
    """One line naming what differs when the evaluation runs cannot be compared with the models."""
    apps = modeling.settings.app, evaluation.settings.app
    if apps[0] != apps[1]:
        raise InputError(source, f"holds application {apps[1]!r}, the models are of {apps[0]!r}")
    names = set(modeling.params) | set(modeling.fixed_params), set(evaluation.params) | set(evaluation.fixed_params)
    if names[0] != names[1]:
        raise InputError(
            source,
            f"has parameters {', '.join(sorted(names[1]))}; the modeling runs have {', '.join(sorted(names[0]))}",
        )
    fixed = {k: v for k, v in modeling.fixed_params.items() if k not in modeling.params}
    differ = [
        f"{k}={evaluation.fixed_params.get(k)!s} (modeling runs: {v})"
        for k, v in fixed.items()
        if k in evaluation.fixed_params and float(evaluation.fixed_params[k]) != float(v)
    ]
    if differ:
        raise InputError(source, f"differs in a parameter that is not modeled: {'; '.join(differ)}")
