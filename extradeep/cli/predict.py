"""`extradeep predict`: replay one run's traces, show its critical path, answer what-if questions."""

from __future__ import annotations

import argparse
import sys

from extradeep.cli.analyses import add_optimize_arguments, add_trace_analysis_arguments
from extradeep.cli.common import add_step_mark_arguments
from extradeep.report.trace_text import overhead_legend

HELP = "replay one run's traces: measured vs replayed step time, critical path, what-ifs"
DESCRIPTION = f"""Replay the Nsight Systems exports of ONE run (one file per rank, or one file
holding several processes) as a dependency graph of CPU calls, GPU streams and collectives.

Prints the measured and replayed step time (the replay of measured durations must reproduce
the measured one), the share of compute, communication, memory, CPU overhead and idle time on
the critical path, the T1-T5 host overheads, the sum-of-kernel-times baseline, and the
predicted step time of every what-if scenario.

scenarios (each replayed on its own, next to the measured durations):
  - each --what-if is ONE scenario; items joined with ';' inside one --what-if are applied
    together in that scenario, e.g. --what-if 'kernel:*gemm*=0.5; comm.bandwidth=2'. A key (with
    its pattern) may appear once per scenario: 'cpu=0.5; cpu=2' is refused.
  - --ranks P adds the scenario 'ranks=P; comm.algorithm=ALG' (plus 'pmnf.ranks=P' with --experiment).
  - --combine adds ONE more scenario with the items of all the others together; an item that
    several give with the same value counts once, one key with two values is refused. Without
    --combine no scenario is combined with another.

what-if items:
  kernel:PATTERN=F  name:PATTERN=F  category:computation|communication|memory|cuda_api=F
  comm.bandwidth=F  comm.latency=F  comm.alpha=SECONDS  comm.algorithm=ring|tree|hierarchical
  ranks=P  fusion=K  cpu=F  pmnf.PARAM=V (needs --experiment)
A kernel:/name: pattern that matches nothing in the run gets a warning.

host overheads T1-T5 (Lin et al.; T1-T3 need framework op ranges such as PyTorch's aten::*):
{overhead_legend()}

what to change: --optimize searches the replay for the setting that shortens the step (gradient
bucket layouts as DDP bucket_cap_mb or an FSDP wrap size, kernel fusion, copies on a side
stream, and recomputation or gradient accumulation when --memory-model says memory is short),
and prints each strategy's predicted step time, its interval, the gain against the measured step,
what moved on the critical path and the setting; or says why nothing helps.

examples:
  extradeep predict runs/p4/ --what-if 'kernel:*gemm*=0.5' --what-if 'comm.bandwidth=2'
  extradeep predict runs/p4/ --optimize --analysis all
  extradeep predict runs/p4/ --what-if 'kernel:*gemm*=0.5' --what-if 'comm.bandwidth=2' --combine
  extradeep predict runs/ --run ranks=4 --run rep=1 --ranks 64 --experiment exp.sqlite --json out.json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="folder (or file) with the exports of one run")
    parser.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="SPEC",
        help="one what-if scenario, e.g. 'kernel:gemm*=0.5', or several items applied together "
        "joined with ';', e.g. 'comm.bandwidth=2; cpu=0.5' (repeatable: one scenario each)",
    )
    parser.add_argument(
        "--ranks",
        type=int,
        metavar="P",
        help="add a scenario at P ranks (P >= 1): collectives re-costed by the ring/tree model, and "
        "kernels from the PMNF models when --experiment is given",
    )
    parser.add_argument(
        "--combine",
        action="store_true",
        help="also replay one scenario with the changes of all --what-if scenarios and --ranks "
        "together (each item once)",
    )
    parser.add_argument(
        "--algorithm",
        choices=("ring", "tree", "hierarchical"),
        default="ring",
        help="collective cost model for --ranks (default ring)",
    )
    parser.add_argument(
        "--system",
        metavar="PRESET|FILE",
        help="cluster layout and links for --ranks/ranks=P (a preset: dgx-8-nvswitch, "
        "4gpu-1nic-per-gpu, 4gpu-1nic; or a TOML file, see docs/analysis.md); default: the "
        "layout read from the exports, links unknown",
    )
    parser.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="PARAM=VALUE",
        help="pick one run when RUN_DIR holds several, e.g. --run ranks=4 --run rep=1",
    )
    parser.add_argument(
        "--experiment",
        metavar="FILE",
        help="experiment saved by `extradeep model --save`: PMNF models for pmnf.* what-ifs and the "
        "empirical step-time model shown beside the replay",
    )
    parser.add_argument(
        "--keep-gpu-gaps",
        action="store_true",
        help="also replay unexplained idle time on GPU streams (default: drop it)",
    )
    parser.add_argument(
        "--top", type=int, default=10, metavar="N", help="critical-path ops and overheads shown (default 10)"
    )
    parser.add_argument("--json", metavar="FILE", help="write every table as JSON")
    parser.add_argument("--timeline", metavar="CSV", help="write the replayed timeline (all scenarios) as CSV")
    parser.add_argument("--plot", metavar="PNG", help="plot the critical-path breakdown and the what-if step times")
    add_step_mark_arguments(
        parser.add_argument_group(
            "step marks (as for model and report; e.g. --train-step-pattern 'forward|backward' for other annotations)"
        )
    )
    add_optimize_arguments(parser)
    add_trace_analysis_arguments(parser)


def options_from_args(args):
    """The one PredictOptions of the command line (checked by the library as it is built)."""
    from extradeep.cli.analyses import analysis_options, optimize_options
    from extradeep.workflows.traces import STEP_MARK_KEYS, PredictOptions

    return PredictOptions(
        run_dir=args.run_dir,
        what_if=tuple(args.what_if),
        ranks=args.ranks,
        combine=args.combine,
        algorithm=args.algorithm,
        system=args.system,
        run=tuple(args.run),
        experiment=args.experiment,
        keep_gpu_gaps=args.keep_gpu_gaps,
        top=args.top,
        json=args.json,
        timeline=args.timeline,
        plot=args.plot,
        step_marks={key: getattr(args, key, None) for key in STEP_MARK_KEYS},
        analyses=analysis_options(args),
        optimize=optimize_options(args),
        progress=True,
    )


def run(args) -> int:
    from extradeep.report.trace_text import analyses_text, prediction_text, strategies_text
    from extradeep.workflows.traces import predict_run

    result = predict_run(options_from_args(args))
    print(prediction_text(result.prediction, args.top, result.empirical))
    for line in result.warnings:
        print(f"extradeep predict: warning: {line}", file=sys.stderr)
    for _, path in result.written:
        print(f"wrote {path}", file=sys.stderr)
    if result.analyses is not None:
        print(analyses_text(result.analyses))
    if result.search is not None:
        print(strategies_text(result.search))
    return 0
