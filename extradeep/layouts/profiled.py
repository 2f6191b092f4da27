"""What the profiles of the measured runs give the layout search, read once: per-part observations
(step split and memory peaks: they calibrate the layout model and its memory estimate), GPU power
samples (the power model), kernel-class times (the move to other GPU types) and the profiled GPU's
memory (the capacity a layout must fit in, where the profiles record it)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from extradeep.errors import InputError


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
    from extradeep.layouts.energy import power_observations
    from extradeep.layouts.transfer import class_observations

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
    used = [facts[p] for p in frame["path"].unique() if p in facts]
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
