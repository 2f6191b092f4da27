"""The tool commands as one library call each: `simulate` (:func:`simulate_profiles`), `profile-cmd`
(:func:`profile_jobs`, the job script) and `instrument` (:func:`instrument_project`). Their options
are checked once, when built, in one line naming the option; outputs before any work."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from extradeep.errors import InputError
from extradeep.workflows.outputs import check_writable


def _pairs(items, name: str, convert) -> dict:
    """``["ranks=2,4"]`` -> ``{"ranks": convert("2,4")}``; each name once; an error names ``name``."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(None, f"{item!r} must look like NAME=VALUE", field=name)
        if key.strip() in out:
            raise InputError(None, f"{key.strip()} is given twice; give it once with every value", field=name)
        try:
            out[key.strip()] = convert(value.strip())
        except ValueError:
            raise InputError(None, f"{item!r}: cannot read {value!r}", field=name) from None
    return out


def _numbers(text: str) -> list:
    return [int(v) if float(v).is_integer() else float(v) for v in str(text).split(",") if v.strip()]


GPT_FIELDS = ("layers", "hidden", "heads", "seq", "vocab")


@dataclass(frozen=True)
class SimulateOptions:
    """What `simulate` asks, as the user gives it (``param``: NAME=V1,V2 items, ``noise``: three
    sigmas as text or numbers); the fields are :func:`extradeep.simulate.simulate`'s, and with ``gpt``
    or ``gpt_truth`` layouts those of :func:`extradeep.simulate.gpt.study.simulate_gpt`. ``force``
    skips the disk and memory check; ``progress`` shows a progress line."""

    outdir: str
    app: str | None = None
    param: tuple = ()
    prefix: tuple = ()
    repetitions: int = 2
    epochs: int = 2
    train_steps: int = 5
    val_steps: int = 2
    batch: int = 64
    train_samples: int = 50_000
    val_samples: int = 10_000
    scaling: str = "strong"
    layout: str = "2026"
    marks: str = "ranges"
    nvtx_strings: str = "text"
    ddp: bool = False
    kernel_scale: tuple = ()
    nccl_bandwidth_scale: float = 1.0
    cpu_scale: float = 1.0
    buckets: int | None = None
    gradients: int | None = None
    bucket_cap_mb: float | None = None
    gradient_profile: str = "resnet"
    noise: object = "0.02,0.01,0.01"
    imbalance: float | None = None
    clock_offset: float = 0.0
    warmup_factor: float = 1.3
    truth_replicates: int = 8
    seed: int = 0
    system: object = None
    algorithm: str | None = None
    signals: str = "all"
    truth_ranks: object = ""
    force: bool = False
    gpt: tuple = ()
    gpt_truth: tuple = ()
    gpt_model: str = ""
    gpu: str = "a100-80gb"
    framework: str = "megatron"
    nccl_nvtx: str = "payload"
    formats: object = "nsys,kineto"
    steps: int = 4
    no_flows: bool = False
    progress: bool = False
    sigmas: tuple = field(init=False, compare=False, repr=False)
    settings: dict = field(init=False, compare=False, repr=False)  # simulate()'s or simulate_gpt()'s arguments

    def __post_init__(self):
        for key in ("param", "prefix", "kernel_scale", "gpt", "gpt_truth"):
            object.__setattr__(self, key, tuple(getattr(self, key) or ()))
        params = _pairs(self.param, "param", _numbers)  # before the noise, as the flags come
        object.__setattr__(self, "sigmas", self._noise())
        check_outdir(Path(self.outdir))
        if self.is_gpt:
            if not self.gpt:
                raise InputError(None, "needs at least one --gpt layout to write profiles of", field="gpt_truth")
            object.__setattr__(self, "settings", _gpt_settings(self))
        else:
            object.__setattr__(self, "settings", _settings(self, params))

    def _noise(self) -> tuple:
        text = self.noise
        try:
            noise = tuple(float(v) for v in (text.split(",") if isinstance(text, str) else text))
        except ValueError:
            raise InputError(None, f"{text!r} must be three numbers like 0.02,0.01,0.01", field="noise") from None
        if len(noise) != 3 or min(noise) < 0:
            raise InputError(None, f"{text!r} must be three non-negative numbers", field="noise")
        return noise

    @property
    def is_gpt(self) -> bool:
        return bool(self.gpt or self.gpt_truth)


def check_outdir(outdir: Path) -> None:
    """Refuse a folder that holds exports the simulator did not write: it would overwrite them."""
    if outdir.exists() and not outdir.is_dir():
        raise InputError(outdir, "exists and is not a folder")
    if outdir.is_dir() and not (outdir / "truth.json").exists() and any(outdir.glob("*.sqlite")):
        raise InputError(
            outdir, "already holds .sqlite files that extradeep did not simulate; choose an empty or new folder"
        )
    check_writable(None, outdir, outdir.resolve(), may_create=True)


@dataclass
class SimulateResult:
    """``simulation``: what the simulator returns (its ``files`` and ``outdir``); ``gpt``: GPT mode,
    with its ``layouts`` (the layouts written as profiles)."""

    simulation: object
    gpt: bool = False
    layouts: int = 0


def simulate_profiles(options: SimulateOptions) -> SimulateResult:
    """Write the simulated profiles and truth.json."""
    if options.is_gpt:
        return _simulate_gpt(options)
    from extradeep.simulate import simulate

    settings = options.settings
    if not options.force:  # a million ranks would fill the disk and the memory: say so before, in one line
        from extradeep.simulate.size import check_room, estimate

        check_room(estimate(**settings), options.outdir)
    return SimulateResult(simulate(options.outdir, **settings))


def _settings(o: SimulateOptions, params: dict) -> dict:
    return dict(
        app=o.app or "cifar10",
        params=params or None,
        prefixes=_pairs(o.prefix, "prefix", str),
        repetitions=o.repetitions,
        epochs=o.epochs,
        train_steps=o.train_steps,
        val_steps=o.val_steps,
        batch=o.batch,
        train_samples=o.train_samples,
        val_samples=o.val_samples,
        scaling=o.scaling,
        layout=o.layout,
        marks=o.marks,
        nvtx_strings=o.nvtx_strings,
        ddp=o.ddp,
        kernel_scale=_pairs(o.kernel_scale, "kernel_scale", float),
        nccl_bandwidth_scale=o.nccl_bandwidth_scale,
        cpu_scale=o.cpu_scale,
        buckets=o.buckets,
        gradients=o.gradients,
        bucket_cap_mb=o.bucket_cap_mb,
        gradient_profile=o.gradient_profile,
        noise=o.sigmas,
        seed=o.seed,
        warmup_factor=o.warmup_factor,
        imbalance=o.imbalance,
        clock_offset_ns=o.clock_offset,
        truth_replicates=o.truth_replicates,
        topology=o.system,
        algorithm=o.algorithm or "ring",
        signals=o.signals,
        truth_ranks=_numbers(o.truth_ranks) if isinstance(o.truth_ranks, str) else list(o.truth_ranks or ()),
        progress=o.progress,
    )


def _gpt_settings(o: SimulateOptions) -> dict:
    from extradeep.simulate.gpt.config import GPTModel

    model = _pairs([x for x in o.gpt_model.split(",") if x.strip()], "gpt_model", int)
    unknown = sorted(set(model) - set(GPT_FIELDS))
    if unknown:
        fields = ", ".join(sorted(GPT_FIELDS))
        raise InputError(None, f"unknown key(s) {', '.join(unknown)}; use {fields}", field="gpt_model")
    formats = o.formats.split(",") if isinstance(o.formats, str) else list(o.formats)
    return dict(
        model=GPTModel(**model),
        gpu=o.gpu,
        system=o.system or "dgx-8-nvswitch",
        algorithm=o.algorithm or "auto",
        app=o.app or "gpt",
        formats=[f.strip() for f in formats if f.strip()],
        repetitions=o.repetitions,
        steps=o.steps,
        noise=o.sigmas,
        seed=o.seed,
        framework=o.framework,
        nccl_nvtx=o.nccl_nvtx,
        truth_layouts=list(o.gpt_truth),
        flows=not o.no_flows,
        progress=o.progress,
    )


def _simulate_gpt(o: SimulateOptions) -> SimulateResult:
    from extradeep.simulate.gpt.study import simulate_gpt

    study = simulate_gpt(o.outdir, list(o.gpt), **o.settings)
    return SimulateResult(study, gpt=True, layouts=len(o.gpt))


def _items(text, name: str) -> list[str]:
    """``"2,4, 6"`` -> ``["2", "4", "6"]``; an empty item is an error naming ``name``."""
    items = [item.strip() for item in str(text).split(",")]
    if not all(items):
        raise InputError(None, f"empty value in {text!r}", field=name)
    return items


@dataclass(frozen=True)
class ProfileCmdOptions:
    """What `profile-cmd` asks: the training ``command`` ({ranks}, {rep}, {<param>} filled in), the
    grid (``ranks`` and ``param`` NAME=V1,V2 items as text, ``reps``) or a ``plan`` file from `extradeep
    plan`; how jobs start (``launcher``, ``launcher_arg``, ``gpus_per_node``, ``rank_var``) and are
    traced (``trace``, ``cuda_profiler``, ``mpi_impl``); the sample marked (``train_steps``,
    ``val_steps``, ``epochs``, ``sampling``); ``format`` sh or slurm (``sbatch`` lines)."""

    command: tuple = ()
    app: str = "app"
    ranks: object = None
    plan: str | None = None
    reps: int = 2
    param: tuple = ()
    launcher: str = "srun"
    format: str = "sh"
    outdir: str = "profiles"
    trace: str | None = None
    cuda_profiler: bool = False
    mpi_impl: str | None = None
    rank_var: str | None = None
    gpus_per_node: int = 4
    launcher_arg: tuple = ()
    sbatch: tuple = ()
    train_steps: int = 5
    val_steps: int = 2
    epochs: int = 2
    sampling: str = "truncate"

    def __post_init__(self):
        command = list(self.command or ())
        object.__setattr__(self, "command", tuple(command[1:] if command[:1] == ["--"] else command))
        for key in ("param", "launcher_arg", "sbatch"):
            object.__setattr__(self, key, tuple(getattr(self, key) or ()))
        if self.format not in ("sh", "slurm"):
            raise InputError(None, f"must be sh or slurm, not {self.format!r}", field="format")
        if self.plan is not None and (self.ranks or self.param):
            raise InputError(None, "gives the ranks, parameters and repetitions; drop --ranks/--param", field="plan")
        if self.plan is None and self.ranks is None:
            raise InputError(None, "give it (e.g. 2,4,6,8,10) or --plan FILE", field="ranks")


@dataclass
class ProfileJobs:
    """The :class:`extradeep.capture.profile_cmd.ProfilePlan`, its job ``script`` and the plan file's
    ``problems`` (one line each)."""

    plan: object
    script: str
    problems: list = field(default_factory=list)


def profile_jobs(options: ProfileCmdOptions) -> ProfileJobs:
    """The profiling jobs of the grid or of the plan file, as a bash script or a Slurm job array."""
    from extradeep.capture.profile_cmd import ProfilePlan

    problems = []
    if options.plan is not None:
        from extradeep.capture.plan_file import read_plan

        planned = read_plan(options.plan)
        problems = list(planned.problems)
        ranks = sorted({run.ranks for run in planned.runs})
        grid = {"app": planned.app or options.app, "ranks": ranks, "params": planned.params, "planned": planned.runs}
    else:
        grid = {"app": options.app, "ranks": _ranks(options.ranks), "reps": options.reps, "params": _grid(options)}
    plan = ProfilePlan(command=list(options.command), **grid, **_job_options(options))
    script = plan.to_slurm(list(options.sbatch)) if options.format == "slurm" else plan.to_sh()
    return ProfileJobs(plan, script, problems)


def _ranks(text) -> list[int]:
    if not isinstance(text, str):
        return [int(r) for r in text]
    try:
        return [int(r) for r in _items(text, "ranks")]
    except ValueError:
        raise InputError(None, f"{text!r}: whole numbers only, e.g. 2,4,6,8,10", field="ranks") from None


def _grid(options: ProfileCmdOptions) -> dict:
    params = {}
    for item in options.param:
        name, sep, values = item.partition("=")
        if not sep:
            raise InputError(None, f"{item!r} is not NAME=V1,V2", field="param")
        params[name.strip()] = _items(values, "param")
    return params


def _job_options(o: ProfileCmdOptions) -> dict:
    from extradeep.capture.frameworks.sampling import Sampling

    return {
        "launcher": o.launcher,
        "trace": o.trace,
        "cuda_profiler": o.cuda_profiler,
        "outdir": o.outdir,
        "gpus_per_node": o.gpus_per_node,
        "mpi_impl": o.mpi_impl,
        "rank_variable": o.rank_var,
        "launcher_args": list(o.launcher_arg),
        "sampling": Sampling(o.train_steps, o.val_steps, o.epochs, o.sampling, o.cuda_profiler),
    }


@dataclass(frozen=True)
class InstrumentOptions:
    """What `instrument` asks: ``src`` (a script, package or project folder) copied with NVTX ranges to
    ``out`` (created when missing); ``progress(module)`` hears of each module."""

    src: str
    out: str
    progress: object = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        check_writable("out", self.out, Path(self.out).resolve(), may_create=True)  # before any work


def instrument_project(options: InstrumentOptions):
    """Write the instrumented copies; returns the :class:`extradeep.capture.instrument` report (its
    ``lines(verbose)`` list what was instrumented or left out)."""
    try:
        from extradeep.capture.instrument import instrument
    except ModuleNotFoundError as exc:
        if exc.name != "libcst":
            raise
        raise InputError(None, "extradeep instrument needs libcst: pip install 'extradeep[instrument]'") from None
    return instrument(options.src, options.out, progress=options.progress)
