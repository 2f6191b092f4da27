"""The commands' work as library functions (issue 22 item 2): one call per CLI command.

Each `extradeep <command>` parses its flags into one options value, makes one call here and only
formats what comes back; the GUI calls the same functions. A workflow resolves and checks its
options once (errors name the option), does the reading, modeling and analysis, and returns a
result dataclass of dataframes and fitted models; it prints nothing and writes only the outputs
it is asked for.
"""

from __future__ import annotations

import importlib

# public name -> module that defines it; imported when first used, so `extradeep --help` stays fast
_EXPORTS = {
    "AnalysisOptions": "extradeep.workflows.options",
    "BudgetOptions": "extradeep.workflows.budget",
    "BudgetStudyResult": "extradeep.workflows.budget",
    "budget_study": "extradeep.workflows.budget",
    "EvaluationOptions": "extradeep.workflows.evaluate",
    "EvaluationResult": "extradeep.workflows.evaluate",
    "evaluation_study": "extradeep.workflows.evaluate",
    "ModelOptions": "extradeep.workflows.model",
    "ModelResult": "extradeep.workflows.model",
    "model_study": "extradeep.workflows.model",
    "ReportOptions": "extradeep.workflows.report",
    "ReportResult": "extradeep.workflows.report",
    "report_study": "extradeep.workflows.report",
    "PlanOptions": "extradeep.workflows.plan",
    "PlanResult": "extradeep.workflows.plan",
    "plan_study": "extradeep.workflows.plan",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'extradeep.workflows' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
