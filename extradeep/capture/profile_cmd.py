"""Ready-to-run profiling jobs: one `nsys profile` run per configuration and repetition.

Every run writes one report per rank named in the convention the reader discovers
(`<app>.p<ranks>[.<name><value>...].r<rep>.mpi<rank>`, the rank filled in by nsys from the
launcher's rank variable through `%q{VAR}`), then exports each report with
`nsys export --type=sqlite`. The environment turns the extradeep marks on (EXTRADEEP_NVTX=1) and
sets the sample (EXTRADEEP_TRAIN_STEPS, ...). With `cuda_profiler` nsys waits for the helpers'
cudaProfilerStart (`--capture-range=cudaProfilerApi`) and stops at their cudaProfilerStop, so the
reports hold exactly the sampled steps. Output: a shell script (`to_sh`) or a Slurm job array with
one task per run (`to_slurm`).
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from dataclasses import dataclass, field

from extradeep.capture.frameworks.sampling import ENV, Sampling
from extradeep.errors import InputError
from extradeep.io.naming import APP, NAME, NUMBER, RANKS_TOKEN, RESERVED_NAMES, rank_name, run_stem

LAUNCHERS = ("srun", "mpirun", "torchrun")
RANK_VARIABLES = {"srun": "SLURM_PROCID", "mpirun": "OMPI_COMM_WORLD_RANK", "torchrun": "RANK"}
TRACE_MPI = "cuda,nvtx,osrt,cudnn,cublas,mpi"
TRACE_NO_MPI = "cuda,nvtx,osrt,cudnn,cublas"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z_0-9]*)\}")
RDZV_PORT = 29500


@dataclass(frozen=True)
class ProfileRun:
    """One launch: `ranks` processes, repetition `rep`, other parameter values in `params`."""

    ranks: int
    rep: int
    params: dict

    def stem(self, app: str) -> str:
        return run_stem(app, {RANKS_TOKEN: self.ranks, **self.params}, self.rep)


@dataclass
class ProfilePlan:
    """The profiling runs for a grid of configurations and the job script that runs them."""

    app: str
    command: list[str]  # the training command; {ranks}, {rep} and {<param>} are filled in
    ranks: list[int]
    reps: int = 2
    params: dict = field(default_factory=dict)  # name -> list of values (strings of numbers)
    launcher: str = "srun"
    trace: str | None = None  # default: with MPI for srun and mpirun, without for torchrun
    cuda_profiler: bool = False
    outdir: str = "profiles"
    gpus_per_node: int = 4
    mpi_impl: str | None = None
    rank_variable: str | None = None
    launcher_args: list[str] = field(default_factory=list)
    sampling: Sampling = field(default_factory=Sampling)
    planned: list[ProfileRun] | None = None  # runs from a plan file instead of the grid

    def __post_init__(self):
        self._check()

    def runs(self) -> list[ProfileRun]:
        """All (ranks, parameter values, repetition) combinations, ranks outermost (or the planned runs)."""
        if self.planned is not None:
            return list(self.planned)
        names = list(self.params)
        combos = itertools.product(*(self.params[n] for n in names))
        return [
            ProfileRun(ranks, rep, dict(zip(names, values)))
            for ranks, values in itertools.product(self.ranks, list(combos))
            for rep in range(1, self.reps + 1)
        ]

    def to_sh(self) -> str:
        """A bash script that runs every configuration in turn, then exports its reports."""
        runs = self.runs()
        lines = [
            *self._header(len(runs)),
            "set -euo pipefail",
            "shopt -s nullglob",
            *self._environment(),
            f"mkdir -p {self.outdir}",
            "",
        ]
        for i, run in enumerate(runs, 1):
            values = {"ranks": str(run.ranks), "rep": str(run.rep), **run.params}
            stem = f"{self.outdir}/{run.stem(self.app)}"
            label = " ".join(f"{k}={v}" for k, v in values.items())
            launch = self._launch(str(run.ranks), self._nodes(run.ranks), stem, lambda t: _fill(t, values), slurm=False)  # noqa: B023 (called here)
            export = self._export(shlex.quote(stem), _in_double_quotes(stem))
            lines += [f"# run {i}/{len(runs)}: {label}", *launch, *export, ""]
        return "\n".join(lines)

    def to_slurm(self, sbatch: list[str] = ()) -> str:
        """A Slurm job array, one task per run, sized for the largest configuration."""
        runs = self.runs()
        most = max(self.ranks)
        if self.launcher == "torchrun":
            size = [f"#SBATCH --nodes={self._nodes(most)[0]}", "#SBATCH --ntasks-per-node=1"]
        else:
            size = [f"#SBATCH --ntasks={most}"]
        lines = [
            *self._header(len(runs)),
            f"#SBATCH --job-name=extradeep-{self.app}",
            f"#SBATCH --array=0-{len(runs) - 1}",
            *size,
            "#SBATCH --output=%x.%A_%a.out",
            *(f"#SBATCH {option}" for option in sbatch),
            "# Smaller configurations use part of the allocation; to pay only for what a run uses,",
            "# submit each configuration separately with its own --ntasks.",
            "set -euo pipefail",
            "shopt -s nullglob",
            "",
            _bash_array("RANKS", [r.ranks for r in runs]),
            _bash_array("REPS", [r.rep for r in runs]),
            *(_bash_array(f"PARAM_{name}", [r.params[name] for r in runs]) for name in self.params),
            'task="$SLURM_ARRAY_TASK_ID"',
            'ranks="${RANKS[$task]}"',
            'rep="${REPS[$task]}"',
            *(f'{name}="${{PARAM_{name}[$task]}}"' for name in self.params),
        ]
        if self.launcher == "torchrun":
            lines += [
                _bash_array("NODES", [self._nodes(r.ranks)[0] for r in runs]),
                _bash_array("PER_NODE", [self._nodes(r.ranks)[1] for r in runs]),
                'nodes="${NODES[$task]}"',
                'per_node="${PER_NODE[$task]}"',
                # sed reads all hostnames; `head -n 1` could kill scontrol with SIGPIPE under pipefail
                'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"',
            ]
        names = ["ranks", "rep", *self.params]
        shell = run_stem(self.app, {RANKS_TOKEN: "${ranks}", **{n: f"${{{n}}}" for n in self.params}}, "${rep}")
        stem = f"{self.outdir}/{shell}"
        lines += [*self._environment(), f"mkdir -p {self.outdir}", f'stem="{stem}"', ""]
        launch = self._launch(
            '"$ranks"', ('"$nodes"', '"$per_node"'), "${stem}", lambda t: _fill_shell(t, names), slurm=True
        )
        lines += [*launch, *self._export('"$stem"', "${stem}")]
        return "\n".join(lines) + "\n"

    def _check(self) -> None:
        if not APP.match(self.app):
            raise InputError(None, f"--app {self.app!r}: use letters, digits, '_' or '-' (no dots)")
        if not self.command:
            raise InputError(None, "give the training command after --, e.g. -- python train.py")
        if not self.ranks or any(r < 1 for r in self.ranks):
            raise InputError(None, "--ranks needs positive whole numbers, e.g. 2,4,6,8,10")
        if self.reps < 1:
            raise InputError(None, "--reps must be at least 1")
        if self.gpus_per_node < 1:
            raise InputError(None, f"--gpus-per-node must be at least 1, got {self.gpus_per_node}")
        if self.launcher not in LAUNCHERS:
            raise InputError(None, f"--launcher must be one of {', '.join(LAUNCHERS)}")
        for name, values in self.params.items():
            if not NAME.match(name) or name in RESERVED_NAMES:
                raise InputError(None, f"--param {name!r}: use letters and '_' only, not {', '.join(RESERVED_NAMES)}")
            bad = [v for v in values if not NUMBER.match(str(v))]
            if bad or not values:
                raise InputError(None, f"--param {name}: values must be numbers (file names carry them), got {bad}")
        known = {"ranks", "rep", *self.params}
        unknown = sorted({m for token in self.command for m in PLACEHOLDER.findall(token)} - known)
        if unknown:
            raise InputError(None, f"command uses {{{unknown[0]}}}, which is not ranks, rep or a --param name")
        for ranks in self.ranks:
            self._nodes(ranks)

    def _nodes(self, ranks: int) -> tuple[int, int]:
        """(nodes, processes per node) for torchrun, which needs the same count on every node."""
        if ranks <= self.gpus_per_node:
            return 1, ranks
        if self.launcher == "torchrun" and ranks % self.gpus_per_node:
            raise InputError(
                None, f"torchrun: {ranks} ranks do not fill nodes of {self.gpus_per_node} GPUs (--gpus-per-node)"
            )
        return math.ceil(ranks / self.gpus_per_node), self.gpus_per_node

    def _header(self, n_runs: int) -> list[str]:
        params = "".join(f" x {name}={','.join(map(str, v))}" for name, v in self.params.items())
        ranks = ",".join(map(str, self.ranks))
        what = (
            f"{n_runs} runs from a plan (ranks {ranks}{params})"
            if self.planned is not None
            else f"{n_runs} runs = ranks {ranks}{params} x {self.reps} repetitions"
        )
        return [
            "#!/bin/bash",
            f"# extradeep profiling jobs: {what}.",
            f"# Reports: {self.outdir}/{self.app}.p<ranks>...r<rep>.mpi<rank>.nsys-rep, exported to .sqlite beside them.",
            f"# Then: extradeep model {self.outdir}/",
        ]

    def _environment(self) -> list[str]:
        s = self.sampling
        settings = {
            ENV["train_steps"]: s.train_steps,
            ENV["val_steps"]: s.val_steps,
            ENV["epochs"]: s.epochs,
            ENV["mode"]: s.mode,
        }
        if self.cuda_profiler:
            settings[ENV["cuda_profiler"]] = 1
        exports = " ".join(f"{k}={v}" for k, v in settings.items())
        return ["export EXTRADEEP_NVTX=1  # extradeep marks on under nsys", f"export {exports}"]

    def _environment_names(self) -> list[str]:
        names = ["EXTRADEEP_NVTX", ENV["train_steps"], ENV["val_steps"], ENV["epochs"], ENV["mode"]]
        return names + ([ENV["cuda_profiler"]] if self.cuda_profiler else [])

    def _nsys(self, output: str) -> list[str]:
        trace = self.trace or (TRACE_NO_MPI if self.launcher == "torchrun" else TRACE_MPI)
        words = ["nsys", "profile", f"--trace={trace}", "--sample=none", "--cpuctxsw=none"]
        if self.mpi_impl and "mpi" in trace.split(","):
            words.append(f"--mpi-impl={self.mpi_impl}")
        if self.cuda_profiler:
            words += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
        rank = self.rank_variable or RANK_VARIABLES[self.launcher]
        return [*words, "--force-overwrite=true", f'--output="{rank_name(output, f"%q{{{rank}}}", suffix="")}"']

    def _launch(self, ranks: str, nodes, stem: str, fill, slurm: bool) -> list[str]:
        command = [fill(token) for token in self.command]
        extra = [shlex.quote(a) for a in self.launcher_args]
        nsys = self._nsys(stem)
        if self.launcher == "srun":
            return _continued(["srun", f"--ntasks={ranks}", *extra], nsys, command)
        if self.launcher == "mpirun":
            forward = [f"-x {name}" for name in self._environment_names()]
            return _continued(["mpirun", f"-np {ranks}", *forward, *extra], nsys, command)
        n_nodes, per_node = nodes
        torchrun = ["torchrun", f"--nnodes={n_nodes}", f"--nproc-per-node={per_node}"]
        if slurm:
            start = ["srun", f"--nodes={n_nodes}", f"--ntasks={n_nodes}", "--ntasks-per-node=1"]
            rdzv = ["--rdzv-backend=c10d", f'--rdzv-endpoint="$MASTER_ADDR:{RDZV_PORT}"']
            return _continued(start, [*torchrun, *rdzv, *extra, "--no-python"], nsys, command)
        if n_nodes == 1:
            return _continued([*torchrun, "--standalone", *extra, "--no-python"], nsys, command)
        rdzv = ["--rdzv-backend=c10d", f'--rdzv-endpoint="${{MASTER_ADDR:?set MASTER_ADDR}}:{RDZV_PORT}"']
        return [
            f"# start on each of the {n_nodes} nodes, MASTER_ADDR = the first node's address",
            *_continued([*torchrun, *rdzv, *extra, "--no-python"], nsys, command),
        ]

    def _export(self, stem: str, shown: str) -> list[str]:
        """Export each rank's report of a run (`stem`: shell word of the name; `shown`: for messages)."""
        hint = " (nsys records only after cudaProfilerStart: use an extradeep helper)" if self.cuda_profiler else ""
        return [
            f"reports=({rank_name(stem, '*', suffix='.nsys-rep')})",
            'if [ "${#reports[@]}" -eq 0 ]; then',
            f'    echo "extradeep: nsys wrote no reports {rank_name(shown, "*", suffix=".nsys-rep")}{hint}" >&2',
            "    exit 1",
            "fi",
            'for report in "${reports[@]}"; do',
            '    nsys export --type=sqlite --force-overwrite=true --output="${report%.nsys-rep}.sqlite" "$report"',
            "done",
        ]


def _fill(token: str, values: dict) -> str:
    """A command word with placeholders replaced by values, quoted for the shell."""
    return shlex.quote(PLACEHOLDER.sub(lambda m: str(values[m[1]]), token))


def _in_double_quotes(text: str) -> str:
    return re.sub(r'(["\\$`])', r"\\\1", text)


def _fill_shell(token: str, names: list[str]) -> str:
    """A command word with placeholders turned into shell variables, double-quoted where needed."""
    if not PLACEHOLDER.search(token):
        return shlex.quote(token)
    parts, at = [], 0
    for match in PLACEHOLDER.finditer(token):
        parts.append(_in_double_quotes(token[at : match.start()]))
        parts.append(f"${{{match[1]}}}")
        at = match.end()
    parts.append(_in_double_quotes(token[at:]))
    return '"' + "".join(parts) + '"'


def _continued(*parts: list[str]) -> list[str]:
    """One shell command over several lines, one part per line."""
    lines = [("    " if i else "") + " ".join(part) for i, part in enumerate(parts)]
    return [line + " \\" for line in lines[:-1]] + lines[-1:]


def _bash_array(name: str, values) -> str:
    return f"{name}=({' '.join(str(v) for v in values)})"


def parse_list(text: str, what: str) -> list[str]:
    """'2,4, 6' -> ['2', '4', '6']; an empty item is an InputError naming the option."""
    items = [item.strip() for item in str(text).split(",")]
    if not all(items):
        raise InputError(None, f"{what}: empty value in {text!r}")
    return items
