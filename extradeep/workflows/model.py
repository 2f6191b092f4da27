"""`extradeep model` as one call: profiles -> models of time per epoch, its breakdown and every region,
predictions with speedup, efficiency and cost, bottlenecks and derived models (paper Q1-Q4)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from extradeep.aggregate.experiment import NEED_DATASET
from extradeep.workflows.options import AnalysisOptions, field_error
from extradeep.workflows.outputs import check_outputs, input_paths
from extradeep.workflows.reading import is_extrap_text, read_analysis

__all__ = ["NEED_DATASET", "ModelOptions", "ModelResult", "model_study"]


@dataclass(frozen=True)
class ModelOptions(AnalysisOptions):
    """The analysis options, the regions in the bottleneck table (`top`) and the outputs: `json`
    (every model and value, docs/json-schema.md) and `save` (the experiment and its models as one
    SQLite file)."""

    top: int = 10
    json: str | None = None
    save: str | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.save and is_extrap_text(self.reading.profiles):
            raise field_error("save", "only experiments read from exports can be saved")


@dataclass
class ModelResult:
    """What `model_study` found. Without an application model (no step times), only `analysis`,
    `experiment` and `notes` are set. `target`: the last prediction point, where `bottlenecks`
    are ranked; `notes`: the analysis notes and what the extrapolation leaves uncertain; `written`:
    (kind, path) of each output written ("json", "save")."""

    options: ModelOptions
    analysis: object
    experiment: object = None
    grid: pd.DataFrame | None = None
    predictions: pd.DataFrame | None = None
    target: dict | None = None
    bottlenecks: pd.DataFrame | None = None
    derived: pd.DataFrame | None = None
    regions: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    written: list[tuple[str, str]] = field(default_factory=list)


def model_study(options: ModelOptions, *, progress=None, on_read=None) -> ModelResult:
    """Read, model and predict as `options` say; write the outputs they name (checked first, before
    any reading: never over an input). `progress(message)` reports the steps; `on_read(experiment)`
    sees the experiment as soon as it is read (its skipped inputs, notes)."""
    from extradeep.analysis.bottlenecks import bottleneck_table
    from extradeep.analysis.core import derived_models, extrapolation_notes, prediction_table, region_scaling

    if not isinstance(options, ModelOptions):
        raise field_error("options", "must be a ModelOptions")
    check_model_outputs(options)
    analysis, experiment = read_analysis(options, on_read, progress)
    result = ModelResult(options, analysis, experiment, notes=list(analysis.notes))
    if not analysis.application_models.empty:
        analysis, grid = options.prediction_grid(analysis)
        target = grid.iloc[-1].to_dict()
        result = ModelResult(
            options,
            analysis,
            experiment,
            grid=grid,
            predictions=prediction_table(analysis, grid, options.cost, options.level),
            target=target,
            bottlenecks=bottleneck_table(analysis.region_models, target, analysis.params),
            derived=derived_models(analysis),
            regions=region_scaling(analysis, grid, options.level) if options.json else None,
            notes=analysis.notes + extrapolation_notes(analysis, grid),
        )
    write_model_outputs(result)
    return result


def check_model_outputs(options: ModelOptions) -> None:
    if options.json or options.save:
        reading = options.reading
        inputs = input_paths(reading.profiles, reading.manifest, options.config)
        check_outputs({"json": options.json}, inputs, save=options.save)


def write_model_outputs(result: ModelResult) -> None:
    """The JSON file and the saved experiment, each written whole or not at all."""
    from extradeep.analysis.saved import models_tables
    from extradeep.report.jsonout import write_json

    options, analysis = result.options, result.analysis
    if options.json:
        cost = options.cost if result.predictions is not None else None
        write_json(
            options.json,
            analysis,
            result.predictions,
            result.bottlenecks,
            cost,
            options.level,
            result.derived,
            result.regions,
        )
        result.written.append(("json", options.json))
    if options.save:
        if result.experiment is None:
            raise field_error("save", "only experiments read from profiles can be saved")
        # one atomic write (extradeep.io.store): the experiment and its models appear together or not at all
        result.experiment.save(options.save, extra_tables=models_tables(analysis))
        result.written.append(("save", options.save))
