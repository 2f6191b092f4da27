"""extradeep: performance models of distributed deep-learning training from a few cheap profiles.

The whole pipeline in a few names (see docs/notebook.md)::

    import extradeep as xd
    experiment = xd.load_experiment("sample_profiles/", params=["ranks"])   # read + aggregate (+ replay)
    analysis = xd.analyse(experiment)                                         # PMNF models, step composition
    table = xd.prediction_table(analysis, xd.point_grid([32, 64], ["ranks"], "ranks", {}))
    xd.build_report(analysis, "report.html")                                  # the HTML budgeting report
    prediction = xd.predict("one_run/", what_if=["comm.bandwidth=2"])         # trace replay and what-ifs
    strategies = xd.optimize("one_run/")                                      # what to change, best first

Names are imported on first use, so `import extradeep` stays cheap and never needs PySide6. No name
here is also a subpackage's (importing `extradeep.simulate` would shadow a function of that name).
"""

from __future__ import annotations

import importlib
import os

__version__ = "0.1.0"

# The GUI's sources are the top-level gui/ folder, installed as extradeep.gui. Run from a source
# checkout instead (`python -m extradeep` inside it, which puts the checkout before an installed
# copy), they are found under the same name, as an editable install finds them.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.path.isdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gui")) and os.path.isfile(
    os.path.join(_CHECKOUT, "gui", "__init__.py")
):
    __path__.append(_CHECKOUT)  # noqa: F821 (a package's own __path__)

# public name -> module that defines it (one place; `__all__` is derived from it)
_EXPORTS = {
    # profiles in
    "load_experiment": "extradeep.pipeline",
    "load_arguments": "extradeep.pipeline",
    "Options": "extradeep.pipeline",
    "dataset_from_options": "extradeep.pipeline",
    "folder_config": "extradeep.io.config",
    "read_experiment": "extradeep.aggregate.ingest",
    "add_exposure_curves": "extradeep.predictor.exposure",
    "read_export": "extradeep.io.nsys.read",
    "read_profile": "extradeep.io.read",
    "inspect_export": "extradeep.io.nsys.inspect",
    "ReaderSettings": "extradeep.io.settings",
    "SlurmOptions": "extradeep.io.cluster",
    "Experiment": "extradeep.aggregate.experiment",
    "Dataset": "extradeep.aggregate.experiment",
    # models
    "fit_models": "extradeep.modeling.modeler",
    "PMNFModeler": "extradeep.modeling.modeler",
    "Model": "extradeep.modeling.model",
    "read_extrap_text": "extradeep.modeling.extrap_text",
    # answers
    "analyse": "extradeep.analysis.core",
    "Analysis": "extradeep.analysis.core",
    "prediction_table": "extradeep.analysis.core",
    "point_grid": "extradeep.analysis.points",
    "CostSettings": "extradeep.analysis.cost",
    "bottleneck_table": "extradeep.analysis.bottlenecks",
    "BudgetLimits": "extradeep.analysis.budget",
    "budget_search": "extradeep.analysis.budget",
    "prediction_errors": "extradeep.analysis.evaluation",
    "evaluate": "extradeep.analysis.workflows",
    "Evaluation": "extradeep.analysis.workflows",
    "plan_budget": "extradeep.analysis.workflows",
    "prediction_grid": "extradeep.analysis.workflows",
    "MeasurementAdvisor": "extradeep.analysis.advisor",
    "plan_measurements": "extradeep.analysis.advisor",
    # the analysis commands as one call each (model, budget, evaluate, report, plan): typed options in, a result out
    "AnalysisOptions": "extradeep.workflows.options",
    "ModelOptions": "extradeep.workflows.model",
    "ModelResult": "extradeep.workflows.model",
    "model_study": "extradeep.workflows.model",
    "BudgetOptions": "extradeep.workflows.budget",
    "BudgetStudyResult": "extradeep.workflows.budget",
    "budget_study": "extradeep.workflows.budget",
    "EvaluationOptions": "extradeep.workflows.evaluate",
    "EvaluationResult": "extradeep.workflows.evaluate",
    "evaluation_study": "extradeep.workflows.evaluate",
    "ReportOptions": "extradeep.workflows.report",
    "ReportResult": "extradeep.workflows.report",
    "report_study": "extradeep.workflows.report",
    "PlanOptions": "extradeep.workflows.plan",
    "PlanResult": "extradeep.workflows.plan",
    "plan_study": "extradeep.workflows.plan",
    # parallel layouts (which t, p, d, micro-batches, ZeRO stage: time, memory, cost, energy)
    "LayoutModel": "extradeep.layouts.model",
    "search_layouts": "extradeep.layouts.search",
    "pareto_front": "extradeep.layouts.search",
    "read_layout_table": "extradeep.layouts.tables",
    "TransformerShape": "extradeep.layouts.workload",
    "load_transformer": "extradeep.layouts.workload",
    "load_hardware": "extradeep.layouts.hardware",
    "LayoutStudy": "extradeep.layout_study",
    "run_layout_study": "extradeep.layout_study",
    # reports
    "build_report": "extradeep.report.build",
    "build_layout_report": "extradeep.report.layout_html",
    "mark_node_boundaries": "extradeep.report.plots",
    # trace-based predictor
    "predict": "extradeep.predictor.api",
    "Prediction": "extradeep.predictor.api",
    "optimize": "extradeep.predictor.optimize",
    "StrategySearch": "extradeep.predictor.optimize",
    # trace analyses (as HolisticTraceAnalysis offers them)
    "idle_time": "extradeep.predictor.analyses",
    "kernel_launch_stats": "extradeep.predictor.analyses",
    "kernel_sequences": "extradeep.predictor.analyses",
    "comm_overlap": "extradeep.predictor.analyses",
    "compare_runs": "extradeep.predictor.analyses",
    # errors
    "InputError": "extradeep.errors",
    # one call per command (issue 22 item 2): trace, layout and tool commands
    **{n: "extradeep.workflows.traces" for n in ("PredictOptions", "PredictResult", "predict_run")},
    **{n: "extradeep.workflows.inspection" for n in ("InspectOptions", "InspectResult", "inspect_profiles")},
    **{n: "extradeep.workflows.trace_analyses" for n in ("TraceAnalysisOptions", "OptimizeOptions")},
    **{
        n: "extradeep.workflows.layouts"
        for n in ("LayoutsOptions", "layout_search", "LayoutPlanOptions", "layout_plan")
    },
    **{n: "extradeep.workflows.tools" for n in ("SimulateOptions", "simulate_profiles", "ProfileCmdOptions")},
    **{n: "extradeep.workflows.tools" for n in ("profile_jobs", "InstrumentOptions", "instrument_project")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'extradeep' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
