"""`extradeep plan` as one call: which configurations and repetitions to profile (next), within a
budget, for precise predictions at target scales (:class:`extradeep.analysis.advisor.MeasurementAdvisor`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from extradeep.workflows.options import AnalysisOptions, field_error, values_of
from extradeep.workflows.outputs import check_output_path, input_paths
from extradeep.workflows.reading import experiment_of_options

__all__ = ["PlanOptions", "PlanResult", "plan_study"]


@dataclass(frozen=True)
class PlanOptions(AnalysisOptions):
    """The analysis options (profiles optional: without them an initial set is planned) and the plan:
    `target` rank counts ("128,256" or a list), `max_ranks` (largest allocation), `budget`
    (GPU-hours), `run_seconds` (one profiled run), `reps` (repetitions per configuration),
    `partial_nodes` (also half nodes beyond one), `k` (next runs for an experiment), `app` and
    `output` (a plan file for `extradeep profile-cmd --plan`). Derived: `target_values`."""

    target: object = None
    max_ranks: int | None = None
    budget: float | None = None
    run_seconds: float = 300.0
    reps: int = 2
    partial_nodes: bool = False
    k: int = 3
    app: str | None = None
    output: str | None = None
    target_values: list = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        super().__post_init__()
        if self.target is None or self.max_ranks is None:
            raise field_error("target" if self.target is None else "max_ranks", "is needed to plan measurements")
        object.__setattr__(self, "target_values", values_of(self.target, "target"))


@dataclass
class PlanResult:
    """The proposed runs (`plan`, a MeasurementAdvisor.propose() table), the advisor's current
    interval widths at the targets (`current`), the experiment planned from (None: initial set) and
    the plan file written (`written`: ("plan", path) or nothing)."""

    options: PlanOptions
    plan: pd.DataFrame
    current: object = None
    experiment: object = None
    written: list[tuple[str, str]] = field(default_factory=list)


def plan_study(options: PlanOptions, *, on_read=None) -> PlanResult:
    """Plan the measurements `options` ask for and write the plan file they name (checked first:
    never over an input). `on_read(experiment)` sees an experiment as soon as it is read."""
    from extradeep.analysis.advisor import MeasurementAdvisor
    from extradeep.analysis.saved import effective_options
    from extradeep.capture.plan_file import write_plan
    from extradeep.io.config import DEFAULTS

    if not isinstance(options, PlanOptions):
        raise field_error("options", "must be a PlanOptions")
    reading = options.reading
    if options.output:
        check_output_path("output", options.output, input_paths(reading.profiles, reading.manifest, options.config))
    experiment = experiment_of_options(reading, on_read) if (reading.profiles or reading.manifest) else None
    modeler = options.modeler
    if experiment is not None:  # a saved experiment's own options (--min-points 4) hold unless given here
        modeler = effective_options(experiment, modeler)
    advisor = MeasurementAdvisor(
        options.target_values,
        options.max_ranks,
        options.gpus_per_node,
        options.budget,
        cost=options.cost,
        run_seconds=options.run_seconds,
        level=options.level,
        reps=options.reps,
        min_points=modeler.get("min_points", DEFAULTS["min_points"]),
        options=modeler,
        partial_nodes=options.partial_nodes,
    )
    plan = advisor.fit(experiment).propose(options.k)
    result = PlanResult(options, plan, advisor.current_, experiment)
    if options.output:
        result.written.append(("plan", str(write_plan(options.output, plan, app=options.app))))
    return result
