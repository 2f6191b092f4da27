"""The trace analyses (HolisticTraceAnalysis-like) and the strategy search, as parts of the `inspect`
and `predict` workflows: their options, checked once, and their answers as tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from extradeep.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

ANALYSES = ("idle", "launch", "sequences", "overlap")


@dataclass(frozen=True)
class TraceAnalysisOptions:
    """``analysis``: names of :data:`ANALYSES` or ``all``; ``diff``: another run (folder or file) to
    compare with; ``top``: rows of the comparison shown."""

    analysis: tuple[str, ...] = ()
    diff: str | None = None
    top: int = 10

    def __post_init__(self):
        object.__setattr__(self, "analysis", tuple(self.analysis or ()))
        unknown = [n for n in self.analysis if n not in (*ANALYSES, "all")]
        if unknown:
            raise InputError(
                None, f"unknown analysis {unknown[0]!r}; use {', '.join(ANALYSES)} or all", field="analysis"
            )

    @property
    def names(self) -> list[str]:
        """The analyses asked for, in the order given, ``all`` expanded, each once."""
        names = []
        for name in self.analysis:
            names += list(ANALYSES) if name == "all" else [name]
        return list(dict.fromkeys(names))

    @property
    def asked(self) -> bool:
        return bool(self.names or self.diff)


@dataclass
class TraceAnalyses:
    """The analyses of one run: a table each (None when not asked), the diff's changed rows."""

    title: str | None
    idle: pd.DataFrame | None = None
    launch: pd.DataFrame | None = None
    sequences: pd.DataFrame | None = None
    overlap: pd.DataFrame | None = None
    diff: pd.DataFrame | None = None
    diff_against: str | None = None
    runtime_cutoff: float = 0.0
    launch_delay_cutoff: float = 0.0


def trace_analyses(run, options: TraceAnalysisOptions, settings=None, title: str | None = None) -> TraceAnalyses:
    """The analyses `options` ask for of one run (files or a folder)."""
    from extradeep.predictor import analyses as an

    names = options.names
    trace = an.run_trace(run, settings=settings)
    out = TraceAnalyses(title, runtime_cutoff=an.RUNTIME_CUTOFF, launch_delay_cutoff=an.LAUNCH_DELAY_CUTOFF)
    if "idle" in names:
        out.idle = an.idle_time(trace)
    if "launch" in names:
        out.launch = an.launch_summary(an.kernel_launch_stats(trace))
    if "sequences" in names:
        out.sequences = an.kernel_sequences(trace, top=10)
    if "overlap" in names:
        out.overlap = an.comm_overlap(trace)
    if options.diff:
        diff = an.compare_runs(options.diff, trace, settings=settings)
        out.diff, out.diff_against = diff[diff["change"] != "same"].head(options.top or 10), options.diff
    return out


@dataclass(frozen=True)
class OptimizeOptions:
    """The strategy search: strategies that save at least ``min_gain`` percent of the step; the memory
    check's ``memory_model`` (TOML or dict) and ``gpu_memory`` (GB); ``optimize_report``: an HTML page."""

    min_gain: float = 1.0
    memory_model: object = None
    gpu_memory: float | None = None
    optimize_report: str | None = None

    def __post_init__(self):
        from extradeep.predictor.memory import load_description

        if not 0 <= self.min_gain < 100:
            raise InputError(None, f"must be a percentage in [0, 100), not {self.min_gain:g}", field="min_gain")
        if self.gpu_memory is not None and not self.gpu_memory > 0:
            raise InputError(None, f"must be > 0 GB, not {self.gpu_memory:g}", field="gpu_memory")
        load_description(self.memory_model)  # a bad file fails before the long replay


def optimize_run(run, options: OptimizeOptions, settings=None, select=None, progress: bool = False):
    """The fitted strategy search of one run (its HTML page written when asked)."""
    from extradeep.predictor.optimize import StrategySearch

    search = StrategySearch(
        min_gain=options.min_gain / 100.0,
        memory=options.memory_model,
        gpu_memory_gb=options.gpu_memory,
        select=select,
        settings=settings,
    ).fit(run, progress=progress)
    if options.optimize_report:
        from extradeep.report.optimisation import write_optimisation_page

        write_optimisation_page(search, options.optimize_report)
    return search
