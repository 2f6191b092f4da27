"""simulate_gpt(): profiles of simulated GPT training in several parallel layouts, with their truth.

Each layout (up to a few dozen GPUs; a run is simulated rank by rank) is profiled `repetitions`
times; every rank writes an Nsight Systems export and/or a Kineto trace named
`<app>.p<world>.tp<t>.pp<p>.dp<d>.mbs<b>.nmb<m>.zero<z>.rc<r>.vpp<v>.r<rep>.mpi<rank>.<suffix>`.
`truth.json` holds, per layout, the noise-free truth (:func:`.truth.layout_truth`); `truth_layouts`
are layouts (any size: 64 to 512 GPUs take a second or two each) whose truth is computed without
writing files, from one rank per pipeline stage.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.simulate.gpt import memory as mem
from extradeep.simulate.gpt.config import FRAMEWORKS, GPTModel, ParallelLayout, load_gpu, parse_layout
from extradeep.simulate.gpt.costs import SIM_ALGORITHMS
from extradeep.simulate.gpt.kineto_writer import write_kineto_rank
from extradeep.simulate.gpt.nsys_writer import NCCL_NVTX, write_nsys_rank
from extradeep.simulate.gpt.run import simulate_run
from extradeep.simulate.gpt.truth import layout_truth
from extradeep.simulate.writer import Placement
from extradeep.system import ALGORITHMS, PRESETS, load_system

FORMAT = "extradeep-gpt-truth/1"
SUFFIX = {"nsys": ".sqlite", "kineto": ".pt.trace.json.gz"}
MAX_FILE_WORLD = 64


@dataclass
class GPTStudy:
    """What simulate_gpt wrote: one row per file, and the truth."""

    outdir: Path
    files: pd.DataFrame
    truth: dict


def gpt_truth(
    layout, model: GPTModel | None = None, gpu="a100-80gb", system="dgx-8-nvswitch", algorithm: str = "auto"
) -> dict:
    """Truth of one layout without writing files (one rank per pipeline stage, no noise)."""
    model = model or GPTModel()
    layout = parse_layout(layout) if isinstance(layout, str) else layout
    run = simulate_run(
        model,
        layout,
        load_gpu(gpu),
        load_system(system),
        steps=3,
        ranks="stages",
        warmup_factor=1.0,
        algorithm=algorithm,
    )
    out = layout_truth(run)
    if layout.schedule == "1f1b" and layout.zero < 3:
        out["expected_peak_memory"] = [mem.expected_peak(model, layout, s) for s in range(layout.pp)]
    return out


def simulate_gpt(
    outdir,
    layouts,
    *,
    model: GPTModel | None = None,
    gpu="a100-80gb",
    system="dgx-8-nvswitch",
    algorithm: str = "auto",
    app: str = "gpt",
    formats=("nsys", "kineto"),
    repetitions: int = 1,
    steps: int = 4,
    noise=(0.02, 0.01, 0.01),
    seed: int = 0,
    framework: str = "megatron",
    nccl_nvtx: str = "payload",
    warmup_factor: float = 1.3,
    truth_layouts=(),
    flows: bool = True,
    progress: bool = False,
    clock_skew_ns: float = 0.0,
) -> GPTStudy:
    """Write every rank's profile of every layout and truth.json into outdir (created if missing).
    ``clock_skew_ns``: every rank but the first writes its times on a clock shifted by up to this
    much either way (drawn from ``seed``), as separate profiling sessions on several hosts do."""
    model = model or GPTModel()
    formats = (formats,) if isinstance(formats, str) else tuple(formats)
    layouts = [_layout(x, framework) for x in layouts]
    extra = [_layout(x, framework) for x in truth_layouts]
    _check(layouts, formats, repetitions, steps, noise, nccl_nvtx, algorithm, framework, model)
    gpu_spec, topo = load_gpu(gpu), load_system(system)
    placement = Placement(topo.gpus_per_node)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rows, entries = [], []
    for k, layout in enumerate(layouts):
        entry = gpt_truth(layout, model, gpu_spec, topo, algorithm)
        entry["files"] = []
        for rep in range(1, repetitions + 1):
            run = simulate_run(
                model,
                layout,
                gpu_spec,
                topo,
                steps=steps,
                ranks="all",
                noise=tuple(noise),
                seed=seed + 1000 * k,
                rep=rep,
                warmup_factor=warmup_factor,
                algorithm=algorithm,
            )
            clocks = np.random.default_rng([seed, k, rep]).uniform(-clock_skew_ns, clock_skew_ns, layout.world)
            clocks[0] = 0.0
            for rank in range(layout.world):
                offset = float(np.round(clocks[rank]))
                for fmt in formats:
                    name = file_name(app, layout, rep, rank, fmt)
                    if fmt == "nsys":
                        write_nsys_rank(
                            outdir / name,
                            run.timeline(rank),
                            layout,
                            placement,
                            gpu_spec,
                            nccl_nvtx=nccl_nvtx,
                            offset=offset,
                        )
                    else:
                        write_kineto_rank(
                            outdir / name, run.timeline(rank), layout, placement, gpu_spec, flows=flows, offset=offset
                        )
                    entry["files"].append(name)
                    rows.append(
                        {
                            "path": str(outdir / name),
                            "layout": layout.label(),
                            "world": layout.world,
                            "rep": rep,
                            "rank": rank,
                            "format": fmt,
                        }
                    )
            if progress:
                print(
                    f"\rsimulate: layout {k + 1}/{len(layouts)} repetition {rep}/{repetitions}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        entries.append(entry)
    if progress:
        print(file=sys.stderr)
    truth = {
        "format": FORMAT,
        "app": app,
        "seed": seed,
        "model": model.to_dict(),
        "gpu": gpu_spec.to_dict(),
        "system": topo.to_dict(),
        "algorithm": algorithm,
        "framework": framework,
        "nccl_nvtx": nccl_nvtx,
        "formats": list(formats),
        "steps": steps,
        "warmup_steps": [0],
        "warmup_factor": warmup_factor,
        "repetitions": repetitions,
        "noise": dict(zip(("instance", "rank", "repetition"), map(float, noise))),
        "layouts": entries,
        "truth_layouts": [gpt_truth(x, model, gpu_spec, topo, algorithm) for x in extra],
    }
    (outdir / "truth.json").write_text(json.dumps(truth, indent=1, default=_plain))
    (outdir / "extradeep.toml").write_text(_reading_config(topo))
    return GPTStudy(outdir, pd.DataFrame(rows), truth)


def _reading_config(topo) -> str:
    """The folder's settings: its own extradeep.toml also keeps a parent folder's reading out of it."""
    lines = [
        "# A simulated GPT layout study (extradeep simulate --gpt). Its own settings file makes it a study",
        "# of its own: reading a parent folder leaves these profiles out.",
    ]
    if topo.name in PRESETS and PRESETS[topo.name] == topo:
        lines.append(f'system = "{topo.name}"  # the cluster the layouts ran on')
    return "\n".join(lines) + "\n"


def file_name(app: str, layout: ParallelLayout, rep: int, rank: int, fmt: str) -> str:
    return f"{app}.p{layout.world}.{layout.label()}.r{rep}.mpi{rank}{SUFFIX[fmt]}"


def _layout(spec, framework: str) -> ParallelLayout:
    if isinstance(spec, ParallelLayout):
        return spec
    return parse_layout(spec, framework=framework)


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


def _check(layouts, formats, repetitions, steps, noise, nccl_nvtx, algorithm, framework, model) -> None:
    problems = []
    if not layouts:
        problems.append("give at least one layout")
    if not formats or set(formats) - set(SUFFIX):
        problems.append(f"formats must be nsys and/or kineto, not {formats!r}")
    if repetitions < 1 or steps < 3:
        problems.append("repetitions must be >= 1 and steps >= 3 (the first is a warm-up)")
    if len(noise) != 3 or min(noise) < 0:
        problems.append(f"noise must be three sigmas >= 0, not {noise!r}")
    if nccl_nvtx not in NCCL_NVTX:
        problems.append(f"nccl_nvtx must be one of {', '.join(NCCL_NVTX)}, not {nccl_nvtx!r}")
    if algorithm not in (*SIM_ALGORITHMS, *ALGORITHMS):
        problems.append(f"algorithm must be one of {', '.join((*SIM_ALGORITHMS, *ALGORITHMS))}, not {algorithm!r}")
    if framework not in FRAMEWORKS:
        problems.append(f"framework must be one of {', '.join(FRAMEWORKS)}, not {framework!r}")
    too_big = [x.label() for x in layouts if x.world > MAX_FILE_WORLD]
    if too_big:
        problems.append(
            f"layouts over {MAX_FILE_WORLD} GPUs are not written as files ({', '.join(too_big)}); "
            "give them as truth layouts"
        )
    if problems:
        raise InputError(None, "; ".join(problems))
    for layout in layouts:
        layout.check(model)


# A simulated study for simulator_check (tests/layouts/test_layouts_simulated.py, benchmarks/bench_layouts_sim.py):
# a GPT of 8 layers, hidden 1,536, profiled in 5 layouts on at most 16 GPUs (one and two nodes), and
# 12 unmeasured layouts at 64 to 512 GPUs. Its shape, layouts and seed differ from
# sample_profiles/layouts/profiles, on whose truth layouts the model's parts were diagnosed.
STUDY_MODEL = {"layers": 8, "hidden": 1536, "heads": 16, "seq": 1024, "vocab": 51200}

STUDY_PROFILED = (
    "tp1.pp1.dp4.mbs1.nmb4",
    "tp2.pp2.dp2.mbs1.nmb4.zero1",
    "tp4.pp1.dp4.mbs1.nmb4",
    "tp2.pp4.dp2.mbs1.nmb8.rc2",
    "tp8.pp1.dp2.mbs1.nmb2",
)

STUDY_TRUTH = (
    "tp2.pp1.dp32.mbs1.nmb4",
    "tp4.pp2.dp8.mbs1.nmb8.zero1",
    "tp8.pp2.dp4.mbs2.nmb4",
    "tp1.pp8.dp8.mbs1.nmb8.rc2",
    "tp2.pp4.dp16.mbs1.nmb8",
    "tp8.pp4.dp4.mbs1.nmb8.zero1",
    "tp4.pp4.dp16.mbs1.nmb8",
    "tp8.pp8.dp8.mbs1.nmb8",
    "tp2.pp2.dp128.mbs1.nmb2.zero1",
    "tp8.pp1.dp32.mbs2.nmb2",
    "tp4.pp1.dp128.mbs1.nmb2",
    "tp1.pp1.dp64.mbs1.nmb4.zero1",
)


def simulate_study(folder, seed: int = 1, algorithm: str = "auto") -> Path:
    """Write the study of STUDY_PROFILED (Kineto traces, 3 steps, the simulator's default noise) with
    the truth of STUDY_TRUTH into ``folder``, on A100-80GB GPUs of dgx-8-nvswitch nodes, collectives
    crossing nodes as ``algorithm`` says."""
    from extradeep.simulate.gpt.config import GPTModel
    from extradeep.simulate.gpt.study import simulate_gpt

    model = GPTModel(**STUDY_MODEL)
    kept = {"formats": ("kineto",), "steps": 3, "flows": False, "seed": seed, "algorithm": algorithm}
    simulate_gpt(folder, list(STUDY_PROFILED), model=model, truth_layouts=list(STUDY_TRUTH), **kept)
    return Path(folder)
