"""Export the budgeting HTML report with the library's `extradeep.build_report`, with the GUI's settings.

The report is built from `extradeep.analyse` of the open experiment with the GUI's modeler options,
and priced and limited as the Cost tab is (cores per rank, deadline, budget). Its modeling runs in
the modeling process when there is one, so the window stays responsive.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from extradeep.errors import InputError
from extradeep.gui.workspace import Workspace


@dataclass(frozen=True)
class ReportRequest:
    """What the report is made with: output path, modeler options (the `modeler` dict of the options
    panel's AnalysisOptions, as the open models) and the Cost tab's settings."""

    output: Path
    options: dict
    cores_per_rank: float = 1.0
    max_time: float | None = None
    max_cost: float | None = None


def write_report(report, ws: Workspace, request: ReportRequest) -> Path:
    """Model and write the report (in a worker); returns the written file."""
    if ws.experiment is None:
        raise InputError(
            ws.source,
            "the HTML report needs profiles or a saved experiment (Extra-P text has no application time to budget)",
        )
    report(0, 0, "Writing the HTML report (modeling the experiment)")
    if ws.reopen is not None:
        from extradeep.gui.modeling_process import run_remote

        return run_remote(ws, build_in_workspace, request)
    return build_in_workspace(ws, request)


def build_in_workspace(ws: Workspace, request: ReportRequest) -> Path:
    """`extradeep.analyse` and `extradeep.build_report` on the workspace's experiment."""
    import extradeep

    limits = None
    if request.max_time is not None or request.max_cost is not None:
        limits = extradeep.BudgetLimits(max_time=request.max_time, max_cost=request.max_cost)
    analysis = extradeep.analyse(ws.experiment, options=request.options)
    extradeep.build_report(
        analysis,
        request.output,
        cost=extradeep.CostSettings(cores_per_rank=request.cores_per_rank),
        limits=limits,
        experiment=ws.experiment,
    )
    return request.output
