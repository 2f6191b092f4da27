"""A layout study as one library call: calibrate the layout model on profiles and/or measured
tables, then search the layouts of a model. The CLI (`extradeep layouts`), the HTML report and the
GUI's Layouts tab all fill one :class:`LayoutStudy` and call :func:`run_layout_study`, so they show
the same table and the same best layout.

Profiles (Nsight Systems exports or Kineto traces of runs in several layouts) calibrate the model
with the per-part times of their steps and their memory peaks
(:func:`extradeep.io.parallel.layout_parts`, :func:`extradeep.io.parallel.parts.part_observations`);
tables (vTrain's or Megatron-LM's published CSVs, :func:`extradeep.layouts.tables.read_layout_table`)
with whole step times. The profiled runs' shape is ``profiled_model`` (default ``model``): profile a
small proxy of a few layers and search the full model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pandas as pd

from extradeep.columns import VOCAB
from extradeep.errors import InputError
from extradeep.layouts.energy import PowerModel
from extradeep.layouts.hardware import Hardware, load_hardware
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.search import OBJECTIVES, search_layouts
from extradeep.layouts.space import RECOMPUTE_KINDS, SCHEDULES
from extradeep.layouts.workload import LARGEST_WHOLE, TransformerShape, load_transformer


@dataclass
class LayoutStudy:
    """What a layout study asks. Calibration: ``profiles`` (files or folders), ``tables`` (CSV
    paths), ``hardware`` they ran on (file, preset or Hardware), ``aliases``/``manifest`` for the
    profiles' layout columns, ``dp_overlap``, ``grad_overlap`` (whether ZeRO 0-1 reduce gradient
    buckets during the last backward pass: auto, select, none or buckets; the layout model's). Search (only with ``model``): ``gpus`` (GPU counts),
    ``global_batch``, ``samples_per_epoch`` (time per epoch instead of per step), ``search_hardware``
    (GPU types to search; default the calibration's), the choices to enumerate, ``objective``,
    ``max_time`` (seconds) / ``max_cost``, and prices that override the hardware files'."""

    profiles: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    hardware: object = None
    model: object = None
    profiled_model: object = None
    aliases: object = None
    manifest: object = None
    dp_overlap: float = 0.0
    grad_overlap: str = "auto"
    gpus: list = field(default_factory=list)
    global_batch: int | None = None
    samples_per_epoch: float | None = None
    search_hardware: list = field(default_factory=list)
    micro_batches: tuple = (1, 2, 4, 8, 16)
    zero: tuple = (0, 1)
    recompute: tuple = ("full",)
    schedules: tuple = ("1f1b",)
    chunks: tuple = (2,)
    objective: str = "time"
    max_time: float | None = None
    max_cost: float | None = None
    price_per_gpu_hour: float | None = None
    price_per_kwh: float | None = None

    @property
    def searching(self) -> bool:
        return self.model is not None

    @property
    def profiled(self) -> bool:
        return bool(self.profiles) or self.manifest is not None


@dataclass
class LayoutStudyResult:
    """The answer: the fitted ``model``; ``observations`` (measured step times of the tables, or
    None), ``parts`` (per-part observations of the profiles, or None), ``runs`` (the profiled runs'
    layouts with where each field was read, or None); ``table`` (the search, as
    :func:`extradeep.layouts.search.search_layouts` returns it; None without a model to search) and
    ``problems`` (files skipped, one line each)."""

    study: LayoutStudy
    model: LayoutModel
    observations: pd.DataFrame | None = None
    parts: pd.DataFrame | None = None
    runs: pd.DataFrame | None = None
    table: pd.DataFrame | None = None
    problems: list = field(default_factory=list)
    shape: TransformerShape | None = None
    profiled: object = None  # extradeep.layout_profiles.ProfiledRuns of the profiles, or None
    power: object = None  # the PowerModel the search used (profile samples, else the hardware file)


def check_study(study: LayoutStudy) -> None:
    """Every option checked before any file is read: one-line InputError naming the option."""
    if not study.searching and not study.tables and not study.profiled:
        raise InputError(
            None,
            "give --table (measured layouts) or PROFILES (profiled runs), and/or --model, --gpus and --global-batch",
        )
    if study.searching and (not list(study.gpus) or study.global_batch is None):
        raise InputError(None, "a search needs --gpus and --global-batch")
    if study.profiled and study.model is None and study.profiled_model is None:
        raise InputError("--model", "profiles need the model they trained (its layers, hidden size, heads, ...)")
    if study.global_batch is not None and (
        isinstance(study.global_batch, bool) or not 1 <= int(study.global_batch) <= LARGEST_WHOLE
    ):
        raise InputError(
            "--global-batch", f"must be a whole number from 1 to {LARGEST_WHOLE}, got {study.global_batch!r}"
        )
    if any(int(g) != g or not 1 <= g <= LARGEST_WHOLE for g in study.gpus):
        raise InputError("--gpus", f"GPU counts are whole numbers from 1 to {LARGEST_WHOLE}")
    if any(int(m) != m or not 1 <= m <= LARGEST_WHOLE for m in study.micro_batches):
        raise InputError("--micro-batches", f"micro-batch sizes are whole numbers from 1 to {LARGEST_WHOLE}")
    if any(z not in (0, 1, 2, 3) for z in study.zero):
        raise InputError("--zero", "ZeRO stages are 0, 1, 2 and 3")
    for option, words, allowed in (
        ("--recompute", study.recompute, RECOMPUTE_KINDS),
        ("--schedules", study.schedules, SCHEDULES),
    ):
        unknown = sorted(set(words) - set(allowed))
        if unknown:
            raise InputError(option, f"unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    if study.objective not in OBJECTIVES:
        raise InputError("--objective", f"must be one of {', '.join(OBJECTIVES)}, got {study.objective!r}")
    for option, value in (
        ("--max-time", study.max_time),
        ("--max-cost", study.max_cost),
        ("--samples-per-epoch", study.samples_per_epoch),
        ("--price-per-gpu-hour", study.price_per_gpu_hour),
        ("--price-per-kwh", study.price_per_kwh),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InputError(option, f"must be a positive number, got {value!r}")
    if not 0 <= study.dp_overlap <= 1:
        raise InputError("--dp-overlap", f"must be between 0 and 1, got {study.dp_overlap!r}")


def priced(study: LayoutStudy, spec) -> Hardware:
    """The hardware of ``spec`` (file, preset, Hardware or None) with the study's prices."""
    hardware = load_hardware(spec)
    prices = {k: getattr(study, k) for k in ("price_per_gpu_hour", "price_per_kwh") if getattr(study, k) is not None}
    return replace(hardware, **prices) if prices else hardware


def run_layout_study(study: LayoutStudy, progress: Callable | None = None) -> LayoutStudyResult:
    """Calibrate on the study's profiles and tables, then search (see the module docstring).
    ``progress(done, total, message)`` hears of each stage (the GUI's worker may cancel there)."""
    report = progress or (lambda *_: None)
    check_study(study)
    shape = load_transformer(study.model) if study.model is not None else None
    profiled = load_transformer(study.profiled_model) if study.profiled_model is not None else shape
    hardware = priced(study, study.hardware)
    targets = [priced(study, h) for h in study.search_hardware] or [hardware]
    if study.tables:
        report(0, 4, f"reading {len(study.tables)} measured table(s)")
    observations = _tables(study.tables)
    parts = runs = measured = None
    problems: list[str] = []
    if study.profiled:
        report(1, 4, "reading the layouts and parts of the profiles")
        measured = _profile_parts(study, profiled)
        parts, runs, problems = measured.parts, measured.runs, measured.problems
        hardware = measured.hardware(hardware)  # the profiled GPU's memory, where they record it
    report(2, 4, "calibrating the layout model")
    model = LayoutModel(hardware=hardware, dp_overlap=study.dp_overlap, grad_overlap=study.grad_overlap)
    model = model.fit(observations, parts)
    power = PowerModel().fit(model, measured.power if measured is not None else None)
    table = None
    if shape is not None:
        report(3, 4, f"searching the layouts of {shape.label()} on {', '.join(str(int(g)) for g in study.gpus)} GPUs")
        table = search_layouts(
            model,
            shape,
            [int(g) for g in study.gpus],
            int(study.global_batch),
            hardware=targets,
            samples_per_epoch=study.samples_per_epoch,
            max_time=study.max_time,
            max_cost=study.max_cost,
            objective=study.objective,
            micro_batches=[int(m) for m in study.micro_batches],
            zero=[int(z) for z in study.zero],
            recompute=list(study.recompute),
            schedules=list(study.schedules),
            chunks=[int(c) for c in study.chunks],
            power=power,
            kernel_classes=measured.kernel_classes if measured is not None else None,
        )
    report(4, 4, "done")
    return LayoutStudyResult(study, model, observations, parts, runs, table, problems, shape, measured, power)


def _tables(paths) -> pd.DataFrame | None:
    from extradeep.layouts.tables import read_layout_table

    tables = [read_layout_table(path) for path in paths or []]
    return pd.concat(tables, ignore_index=True) if tables else None


def _profile_parts(study: LayoutStudy, shape: TransformerShape):
    """What the profiled runs give, read once (:func:`extradeep.layout_profiles.read_profiled_runs`):
    per-part observations, layouts, power samples, kernel classes, the GPU's memory, files skipped."""
    from extradeep.layout_profiles import read_profiled_runs

    keys = {"layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads, "seq": shape.seq_len}
    keys[VOCAB] = shape.vocab
    paths = list(study.profiles) or None
    measured = read_profiled_runs(paths, keys, aliases=study.aliases or None, manifest=study.manifest)
    if measured.parts.empty:
        raise InputError(
            study.manifest or study.profiles[0],
            "no profiled run has a complete layout (tp, pp, dp, micro-batch and count, ZeRO, recomputation): "
            "name them in the files (tp2.pp2.dp2.mbs1.nmb8.zero1.rc0) or a manifest; see docs/profiling.md",
        )
    return measured
