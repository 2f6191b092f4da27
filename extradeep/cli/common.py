"""Options shared by every subcommand that reads profiles (model, evaluate, report, budget).

`add_reading_arguments(parser)` adds them; `experiment_from_args(args)` turns them into an
Experiment, from exports or from an experiment saved by extradeep. A `--config FILE` (TOML) may hold
the same keys as the long options (`train-samples = 50000` or `train_samples = 50000`); options given
on the command line win over the file.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager

from extradeep.cli.flags import flag_error
from extradeep.errors import InputError
from extradeep.workflows.settings import CONFIG_NAME, DEFAULTS, folder_config_path


def add_reading_arguments(parser: argparse.ArgumentParser) -> None:
    """Add PROFILES and the reading, caching and dataset options to a subcommand's parser."""
    parser.add_argument(
        "profiles",
        nargs="*",
        metavar="PROFILES",
        help="Nsight Systems SQLite exports or directories of them (searched recursively), "
        "or one experiment .sqlite saved by extradeep",
    )
    read = parser.add_argument_group("reading profiles")
    read.add_argument(
        "--param",
        action="append",
        metavar="NAME",
        help="modeled parameter (repeatable; default: every parameter that varies)",
    )
    read.add_argument(
        "--alias",
        action="append",
        metavar="TOK=NAME",
        help="file-name token for a parameter name (repeatable; p=ranks, r=rep, mpi=rank are built in)",
    )
    read.add_argument(
        "--manifest",
        metavar="FILE",
        help="CSV or TOML list of exports with path, parameter values, rank and rep, for any file naming",
    )
    add_step_mark_arguments(read)
    read.add_argument(
        "--kernel-names", choices=["short", "demangled"], help="name kernels by short (default) or demangled name"
    )
    read.add_argument(
        "--min-points", type=int, metavar="N", help="configurations a region needs to be modeled (default 5)"
    )
    read.add_argument(
        "--jobs", type=int, metavar="N", help="files read in parallel (default: the CPUs this process may use)"
    )
    read.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help=(
            "read on a Dask cluster: a scheduler address (tcp://HOST:8786) or scheduler file (.json), 'local' "
            "(worker processes here) or 'slurm' (workers as Slurm jobs, options in the config's [slurm] table); "
            "default env EXTRADEEP_SCHEDULER, else this machine without Dask (docs/cluster.md)"
        ),
    )
    read.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="cache of per-file results (default $XDG_CACHE_HOME/extradeep or ~/.cache/extradeep)",
    )
    read.add_argument("--no-cache", action="store_true", default=None, help="read every export again and cache nothing")
    read.add_argument(
        "--no-replay",
        action="store_true",
        default=None,
        help=(
            "do not replay the largest runs' traces to learn how much communication a step can hide "
            "(the step-time model then assumes the measured share; saves time with very large exports)"
        ),
    )
    read.add_argument(
        "--system",
        metavar="PRESET|FILE",
        help=(
            "the cluster: a preset (dgx-8-nvswitch, 4gpu-1nic-per-gpu, 4gpu-1nic) or a TOML file with gpus-per-node, "
            "intra-bandwidth, intra-latency, inter-bandwidth (per NIC), inter-latency, nics-per-node; gives the links, "
            "and the layout where the profiles carry no node signal (where they do and disagree, they win, with a "
            "warning); lets predictions leave the nodes that were measured"
        ),
    )
    read.add_argument(
        "--config",
        metavar="FILE",
        help=(
            f"TOML file with any of these keys: {', '.join(k.replace('_', '-') for k in DEFAULTS)} (other options "
            f"are command-line only; command-line options win; default: {CONFIG_NAME} in the one PROFILES folder)"
        ),
    )
    data = parser.add_argument_group("dataset (turns per-step values into per-epoch values, paper Eq. 2-4)")
    data.add_argument("--train-samples", type=float, metavar="D_T", help="samples in the training set")
    data.add_argument("--val-samples", type=float, metavar="D_V", help="samples in the validation set (default 0)")
    data.add_argument("--batch-size", metavar="B", help="batch size per rank: a number or a parameter name")
    data.add_argument(
        "--gpus-param", metavar="G", help="data-parallel degree G: a parameter name or a number (default: ranks)"
    )
    data.add_argument(
        "--model-parallel", metavar="M", help="model-parallel degree M: a number or a parameter name (default 1)"
    )
    data.add_argument(
        "--weak-scaling", action="store_true", default=None, help="the data sets grow with G (weak scaling)"
    )
    data.add_argument(
        "--last-batch",
        choices=["drop", "keep"],
        help="a last partial batch per epoch is dropped "
        "(default, paper Eq. 2: floor) or kept (ceil; PyTorch drop_last=False)",
    )


STEP_MARK_KEYS = ("epoch_pattern", "train_step_pattern", "val_step_pattern", "warmup_epochs", "warmup_steps")


def add_step_mark_arguments(group) -> None:
    """The step-convention options (patterns for epochs and steps, warm-up), for every command that
    finds steps in profiles: the reading commands, inspect and predict."""
    nvtx = "regular expression searched for in NVTX range names of {} (^...$ for whole names; optionally DOMAIN:REGEX)"
    group.add_argument("--epoch-pattern", metavar="REGEX", help=nvtx.format("epochs"))
    group.add_argument("--train-step-pattern", metavar="REGEX", help=nvtx.format("training steps"))
    group.add_argument("--val-step-pattern", metavar="REGEX", help=nvtx.format("validation steps"))
    group.add_argument("--warmup-epochs", type=int, metavar="N", help="leading epochs excluded as warm-up (default 1)")
    group.add_argument(
        "--warmup-steps",
        type=int,
        metavar="N",
        help="with a single epoch, its first N steps per phase are excluded instead (default 1)",
    )


def step_mark_settings(args: argparse.Namespace):
    """ReaderSettings from the step-convention options (unset ones keep the reader's defaults)."""
    from extradeep import ReaderSettings

    return ReaderSettings.from_any({k: getattr(args, k, None) for k in STEP_MARK_KEYS})


def resolve_options(args: argparse.Namespace):
    """The command's one :class:`extradeep.pipeline.Options`: command line over config file over
    defaults, checked once by the library. Without --config, the `extradeep.toml` in the one PROFILES
    folder is the config file (said once on stderr). A bad value is named as the user gave it: its
    flag, or the config file and its key."""
    from extradeep.pipeline import Options

    use_directory_config(args)
    try:
        return Options.resolve(
            {key: getattr(args, key, None) for key in DEFAULTS}, config=getattr(args, "config", None)
        )
    except InputError as exc:
        raise flag_error(exc) from None


def use_directory_config(args) -> None:
    """Without --config, take the settings file `extradeep.toml` that sits in the one PROFILES
    directory (so a folder of exports can carry its dataset sizes)."""
    profiles = getattr(args, "profiles", None) or []
    if getattr(args, "config", None) or len(profiles) != 1:
        return
    config = folder_config_path(profiles[0])
    if config is not None:
        args.config = str(config)
        print(f"extradeep: using settings from {config}", file=sys.stderr)


def experiment_from_args(args: argparse.Namespace, progress=None, options=None):
    """Experiment from parsed arguments; prints each skipped input and a summary on stderr. `options`:
    the command's resolved options (:func:`resolve_options`; resolved here when not given)."""
    from extradeep.workflows.reading import experiment_of_options

    options = resolve_options(args) if options is None else options
    with load_problems_shown():
        return experiment_of_options(options, on_read=problems_on_stderr, progress=progress)


@contextmanager
def load_problems_shown():
    """When nothing usable remains, print the problems that the error line (which carries the
    first) does not."""
    try:
        yield
    except InputError as exc:
        for problem in getattr(exc, "problems", [])[1:]:
            print(f"extradeep: warning: {problem}", file=sys.stderr)
        raise


def problems_on_stderr(experiment) -> None:
    """The `on_read` of the workflows: the experiment's problems and notes on stderr."""
    report_problems(experiment, sys.stderr)


def progress_line(message: str) -> None:
    """The `progress` of the workflows: one line on stderr per step."""
    print(f"extradeep: {message} ...", file=sys.stderr, flush=True)


def report_problems(experiment, stream) -> None:
    """One line per problem, then a summary line; notes from the reader after them. A saved
    experiment's lines say that they come from the reading it was saved from, not from this run."""
    saved = experiment.saved_path
    earlier = f" (when {saved.name} was read)" if saved is not None else ""
    for problem in experiment.problems:
        print(f"extradeep: warning{earlier}: {problem}", file=stream)
    if experiment.problems:
        used = len(experiment.provenance)
        print(f"extradeep: {len(experiment.problems)} problem(s){earlier}; {used} export(s) used", file=stream)
    for note in experiment.settings.notes:
        print(f"extradeep: note{earlier}: {note}", file=stream)
