"""What the profiles of the measured runs give the layout search, read once (the layout model in
extradeep/layouts/ takes tables, never profiles: reading them is here, beside `layout_study`): per-part observations
(step split and memory peaks: they calibrate the layout model and its memory estimate), GPU power
samples (the power model), kernel-class times (the move to other GPU types) and the profiled GPU's
memory (the capacity a layout must fit in, where the profiles record it)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import (
    FITS,
    GLOBAL_BATCH,
    GPUS,
    METRIC,
    MICRO_BATCHES,
    PART,
    PART_POWER,
    PART_STEP,
    PATH,
    PEAK_MEMORY,
    PREDICTED,
    STAGE,
    STEP_TIME,
    VALUE,
    WORKLOAD,
)
from extradeep.errors import InputError
from extradeep.layouts.energy import LAYOUT_COLUMNS, POWER
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.transfer import CLASS_TIMES, file_class_times


@dataclass
class ProfiledRuns:
    """``parts``: the layout model's per-part observations; ``power``: power observations (empty
    without samples); ``kernel_classes``: kernel-class times per run; ``gpu_memory``: the profiled
    GPU's capacity in bytes (None unless every profile that records it agrees); ``gpu_name``;
    ``problems``: lines about files skipped."""

    parts: pd.DataFrame
    power: pd.DataFrame
    kernel_classes: pd.DataFrame
    gpu_memory: int | None = None
    gpu_name: str | None = None
    problems: list[str] = field(default_factory=list)
    runs: pd.DataFrame | None = None  # the runs' layouts with where each field was read

    def hardware(self, hardware):
        """``hardware`` with the profiled GPU's memory where the profiles record it."""
        if self.gpu_memory is None or hardware.gpu.memory == self.gpu_memory:
            return hardware
        return replace(hardware, gpu=replace(hardware.gpu, memory=float(self.gpu_memory)))


def read_profiled_runs(paths, model: dict | None = None, settings=None, aliases=None, manifest=None) -> ProfiledRuns:
    """Read the profiles under ``paths`` (files or folders, named by the file-name convention, or
    named by a ``manifest``) once. ``model``: the shape as io.parallel takes it (layers, hidden,
    heads, seq, vocab)."""
    from extradeep.io.discover import find_exports
    from extradeep.io.parallel import layout_parts, profile_facts
    from extradeep.io.parallel.parts import part_observations

    facts, problems = {}, []
    if paths:  # read each file once here; layout_parts and the kernel classes reuse the facts
        exports, _ = find_exports(paths)
        for path in exports:
            try:
                facts[str(path)] = profile_facts(str(path), settings)
            except InputError:
                pass  # layout_parts reports it, one line per file
    frame = layout_parts(paths, aliases=aliases, manifest=manifest, model=model, settings=settings, facts=facts)
    problems += list(frame.attrs.get("problems", []))
    used = [facts[p] for p in frame[PATH].unique() if p in facts]
    capacities = {f.gpu_memory for f in used if f.gpu_memory}
    names = {f.gpu_name for f in used if f.gpu_name}
    return ProfiledRuns(
        parts=part_observations(frame, model),
        power=power_observations(frame, model),
        kernel_classes=class_observations(frame, facts, model),
        gpu_memory=capacities.pop() if len(capacities) == 1 else None,
        gpu_name=names.pop() if len(names) == 1 else None,
        problems=problems,
        runs=frame.attrs.get("layouts"),
    )


def power_observations(parts: pd.DataFrame, model: dict | None = None) -> pd.DataFrame:
    """From :func:`extradeep.io.parallel.layout_parts`' frame: one row per run whose profiles
    recorded GPU power, with its layout (as the layout model's observations) and ``power``, the
    mean over its ranks' mean watts. Empty when no profile has power samples."""
    from extradeep.io.parallel.parts import part_observations

    if PART not in parts or not (parts[PART] == PART_POWER).any():
        return pd.DataFrame()
    measured = parts[parts[PART] == PART_POWER].rename(columns={"app": WORKLOAD})
    watts = measured.groupby([WORKLOAD, *LAYOUT_COLUMNS], dropna=False)[VALUE].mean().rename(POWER).reset_index()
    runs = part_observations(parts, model)
    steps = runs[runs[PART] == PART_STEP].drop(columns=[PART, METRIC, VALUE])
    steps = steps.drop_duplicates([WORKLOAD, *LAYOUT_COLUMNS])
    return steps.merge(watts, on=[WORKLOAD, *LAYOUT_COLUMNS], how="inner").reset_index(drop=True)


def class_observations(parts: pd.DataFrame, facts: dict, model: dict | None = None) -> pd.DataFrame:
    """One row per run of :func:`extradeep.io.parallel.layout_parts`' frame: its layout (as the
    layout model's observations, shape from ``model``) with ``gemm_time`` and ``memory_time`` in
    seconds per step (median over steps, then over the last pipeline stage's ranks). ``facts``: the
    profiles' ProfileFacts by path (read for any path missing)."""
    from extradeep.io.parallel import profile_facts
    from extradeep.io.parallel.parts import part_observations

    per_file = []
    for path in parts[PATH].unique():
        if path not in facts:
            facts[path] = profile_facts(path)
        times = file_class_times(facts[path])
        if len(times):
            per_file.append({"path": path, **times[list(CLASS_TIMES)].median().to_dict()})
    if not per_file:
        return pd.DataFrame()
    keys = ["gpus", "tp", "pp", "dp", "micro_batch", MICRO_BATCHES, "zero", "recompute"]
    files = parts.drop_duplicates(PATH).merge(pd.DataFrame(per_file), on=PATH)
    files = files.rename(columns={"app": WORKLOAD})
    last = files[files[STAGE] == files.groupby([WORKLOAD, *keys], dropna=False)[STAGE].transform("max")]
    medians = last.groupby([WORKLOAD, *keys])[list(CLASS_TIMES)].median().reset_index()
    runs = part_observations(parts, model)
    if runs.empty:
        return pd.DataFrame()
    runs = runs[runs[PART] == "step"].drop(columns=[PART, METRIC, VALUE]).drop_duplicates([WORKLOAD, *keys])
    return runs.merge(medians, on=[WORKLOAD, *keys], how="inner").reset_index(drop=True)


def simulator_check(folder, hardware, model_options: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """(per truth layout, summary) for a study written by ``extradeep simulate --gpt ... --gpt-truth``.

    The model is calibrated on what :func:`extradeep.io.parallel.part_observations` reads from the
    profiles in ``folder`` (the model shape from its truth.json, as a user's model description gives
    it) and predicts every ``truth_layouts`` row. Per row: truth and predicted step time, error (%),
    whether the truth is inside the interval, the simulator's peak memory and the estimate, whether
    the model and the simulator call it feasible, and what the prediction extrapolates. The summary:
    median and worst absolute error, coverage, the interval's median half width (%), worst memory
    error, and per GPU count with two or more truth layouts the truth time per sample of the layout
    the model ranks first (among those it calls feasible) over the truly fastest feasible one
    (``pick_over_best``, worst over GPU counts; 1 = the right pick)."""
    import json

    from extradeep.io.parallel.parts import layout_parts, part_observations

    folder = Path(folder)
    truth = json.loads((folder / "truth.json").read_text())
    shape = truth["model"]
    paths = sorted(str(p) for p in folder.iterdir() if p.name.startswith(truth["app"] + ".p"))
    observations = part_observations(layout_parts(paths), shape)
    model = LayoutModel(hardware=hardware, **(model_options or {})).fit(None, observations)
    dims = {"layers": shape["layers"], "hidden": shape["hidden"], "heads": shape["heads"]}
    rows = [{**t["layout"], **dims, "seq_len": shape["seq"], "vocab": shape["vocab"]} for t in truth["truth_layouts"]]
    layouts = pd.DataFrame(rows)
    predicted = model.predict(layouts)
    frame = layouts.assign(
        truth=[t["step_time"] for t in truth["truth_layouts"]],
        predicted=predicted[STEP_TIME].to_numpy(),
        low=predicted[STEP_TIME + "_low"].to_numpy(),
        high=predicted[STEP_TIME + "_high"].to_numpy(),
        peak_memory=[t["peak_memory"] for t in truth["truth_layouts"]],
        memory_estimate=predicted[PEAK_MEMORY].to_numpy(),
        truth_fits=[bool(t[FITS]) for t in truth["truth_layouts"]],
        fits=predicted[FITS].to_numpy(),
        extrapolated=predicted["extrapolated"].to_numpy(),
    )
    frame["error_pct"] = 100 * (frame[PREDICTED] / frame["truth"] - 1)
    frame["inside"] = (frame["low"] <= frame["truth"]) & (frame["truth"] <= frame["high"])
    frame["memory_error_pct"] = 100 * (frame["memory_estimate"] / frame[PEAK_MEMORY] - 1)
    picks = []
    for _, group in frame.groupby(GPUS):
        feasible = group[group[FITS]]
        if len(group) < 2 or feasible.empty:
            continue
        per_sample = group["truth"] / group[GLOBAL_BATCH]
        chosen = (feasible[PREDICTED] / feasible[GLOBAL_BATCH]).idxmin()
        picks.append(
            (per_sample[chosen] / per_sample[group["truth_fits"]].min(), bool(group.loc[chosen, "truth_fits"]))
        )
    summary = {
        "layouts": len(frame),
        "median_error_pct": float(frame["error_pct"].abs().median()),
        "worst_error_pct": float(frame["error_pct"].abs().max()),
        "coverage": float(frame["inside"].mean()),
        # how informative the interval is: its median geometric half width, sqrt(high / low) - 1
        "median_half_width_pct": float(100 * np.median(np.sqrt(frame["high"] / frame["low"]) - 1)),
        "worst_memory_error_pct": float(frame["memory_error_pct"].abs().max()),
        "pick_over_best": max((p for p, _ in picks), default=float("nan")),
        "picked_infeasible": sum(not ok for _, ok in picks),
        "algorithm": model.algorithm_,
    }
    return frame, summary
