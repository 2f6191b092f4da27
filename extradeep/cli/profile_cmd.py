"""`extradeep profile-cmd`: print the nsys profiling jobs for a grid of configurations."""

from __future__ import annotations

import argparse
import sys

HELP = "print ready-to-run nsys profiling jobs (srun, mpirun or torchrun) for a grid of configurations"
DESCRIPTION = """\
Print a bash script (--format sh) or a Slurm job array (--format slurm) that profiles the training
command once per configuration and repetition with Nsight Systems, one report per rank named
APP.p<ranks>[.<param><value>].r<rep>.mpi<rank>, and exports every report to SQLite. The command
follows `--`; {ranks}, {rep} and {<param>} in it are replaced by each run's values. The script
exports EXTRADEEP_NVTX=1 and the sample (EXTRADEEP_TRAIN_STEPS, EXTRADEEP_VAL_STEPS,
EXTRADEEP_EPOCHS, EXTRADEEP_SAMPLING) for extradeep's marks and framework helpers.

examples:
  extradeep profile-cmd --app cifar10 --ranks 2,4,6,8,10 --reps 2 -- python train.py > profile.sh
  extradeep profile-cmd --app cifar10 --ranks 2,4,8 --param b=32,64 --cuda-profiler \\
      --format slurm --sbatch=--gres=gpu:4 -- python train.py --batch-size {b} > profile.sbatch
  extradeep profile-cmd --app gpt --launcher torchrun --ranks 4,8,16 --gpus-per-node 4 -- python train.py
  extradeep profile-cmd --plan plan.csv -- python train.py > next.sh      # the runs `extradeep plan` proposed
"""


def add_arguments(parser) -> None:
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="the training command, after --; {ranks}, {rep} and {<param>} are filled in",
    )
    parser.add_argument("--app", default="app", help="application name at the start of every file name (default: app)")
    parser.add_argument("--ranks", metavar="N,N,...", help="process counts to profile, e.g. 2,4,6,8,10 (or --plan)")
    parser.add_argument(
        "--plan",
        metavar="FILE",
        help="profile the runs of a plan file from `extradeep plan` "
        "(its app, ranks, parameters and repetitions) instead of --ranks/--param/--reps",
    )
    parser.add_argument("--reps", type=int, default=2, help="repetitions of every configuration (default: 2)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="another parameter and its values, e.g. b=32,64 (repeatable; grid of all combinations)",
    )
    parser.add_argument(
        "--launcher",
        choices=("srun", "mpirun", "torchrun"),
        default="srun",
        help="how processes are started (default: srun)",
    )
    parser.add_argument(
        "--format",
        choices=("sh", "slurm"),
        default="sh",
        help="a bash script running every configuration in turn, or a Slurm job array (default: sh)",
    )
    parser.add_argument(
        "--outdir", default="profiles", help="folder for the reports and SQLite exports (default: profiles)"
    )
    parser.add_argument(
        "--trace",
        metavar="APIS",
        help="nsys --trace value (default: cuda,nvtx,osrt,cudnn,cublas plus mpi for srun and mpirun)",
    )
    parser.add_argument(
        "--cuda-profiler",
        action="store_true",
        help="capture only between the helpers' cudaProfilerStart/Stop (--capture-range=cudaProfilerApi)",
    )
    parser.add_argument(
        "--mpi-impl", choices=("openmpi", "mpich"), help="nsys --mpi-impl, for MPI tracing on older nsys"
    )
    parser.add_argument(
        "--rank-var",
        metavar="VAR",
        help="environment variable holding the rank, for %%q{VAR} in report names "
        "(default: SLURM_PROCID, OMPI_COMM_WORLD_RANK or RANK by launcher)",
    )
    parser.add_argument(
        "--gpus-per-node", type=int, default=4, help="GPUs per node, for torchrun node counts (default: 4)"
    )
    parser.add_argument(
        "--launcher-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for the launcher, e.g. --launcher-arg=--gpus-per-task=1 (repeatable)",
    )
    parser.add_argument(
        "--sbatch",
        action="append",
        default=[],
        metavar="OPTION",
        help="extra #SBATCH line for --format slurm, e.g. --sbatch=--time=00:30:00 (repeatable)",
    )
    parser.add_argument("--train-steps", type=int, default=5, help="training steps marked per epoch (default: 5)")
    parser.add_argument("--val-steps", type=int, default=2, help="validation steps marked per epoch (default: 2)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs marked; the first is a warm-up (default: 2)")
    parser.add_argument(
        "--sampling",
        choices=("truncate", "stop"),
        default="truncate",
        help="after the sample: end epochs early and stop training, or also exit (default: truncate)",
    )


def run(args) -> int:
    from extradeep.cli.thin import options_of
    from extradeep.workflows.tools import ProfileCmdOptions, profile_jobs

    jobs = profile_jobs(options_of(ProfileCmdOptions, args))
    for problem in jobs.problems:
        print(f"extradeep: {problem}", file=sys.stderr)
    print(jobs.script, end="")
    return 0
