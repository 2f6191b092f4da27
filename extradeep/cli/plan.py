"""`extradeep plan`: which configurations and repetitions to profile (next), within a budget."""

from __future__ import annotations

import argparse
import sys

from extradeep.cli.common import add_reading_arguments
from extradeep.cli.model import add_analysis_arguments

HELP = "propose which configurations and repetitions to profile (next) for precise predictions at a target scale"
DESCRIPTION = """\
Without PROFILES: propose an initial set of configurations and repetitions for predictions at
--target ranks, within --max-ranks (the largest allocation) and --budget GPU-hours. With PROFILES
(exports or a saved experiment): propose the next -k runs that shrink the 95% interval of the time
model at the targets the most per unit of cost, and by how much. When the targets lie beyond one
node (--gpus-per-node, else the experiment's layout), at least two configurations on each side of
the node boundary are asked for, and beyond one node only whole nodes, as clusters allocate them
(--partial-nodes also allows half nodes). A run costs --run-seconds on all its GPUs; --price-per-*
or --cost-formula set the unit.
--output writes a plan file for `extradeep profile-cmd --plan`.

examples:
  extradeep plan --target 256 --max-ranks 64 --gpus-per-node 4 --budget 40 --app cifar10 -o plan.csv
  extradeep plan runs/ --target 128,256 --max-ranks 64 --gpus-per-node 4 -k 3 -o next.csv
  extradeep profile-cmd --plan next.csv -- python train.py > next.sh
  extradeep plan --layout-model gpt.toml --target 64,256 --global-batch 512 --max-ranks 16 --budget 3 -o runs.csv
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_reading_arguments(parser)
    add_analysis_arguments(parser)
    plan = parser.add_argument_group("plan")
    plan.add_argument("--target", required=True, metavar="N,N,...", help="rank counts the predictions are for")
    plan.add_argument("--max-ranks", type=int, required=True, metavar="N", help="largest allocation you can profile")
    plan.add_argument("--budget", type=float, metavar="GPU_HOURS", help="profiling budget in GPU-hours")
    plan.add_argument(
        "--run-seconds",
        type=float,
        default=300.0,
        metavar="S",
        help="length of one profiled run incl. start-up and export (default 300)",
    )
    plan.add_argument(
        "--reps",
        type=int,
        default=2,
        help="repetitions per configuration of the initial set and the node rule (default 2; "
        "later new configurations get one)",
    )
    plan.add_argument(
        "--partial-nodes",
        action="store_true",
        help="beyond one node, also propose half nodes (default: whole nodes, as clusters allocate them)",
    )
    layouts = parser.add_argument_group("layouts (issue 23): which small runs pin down the layout model")
    layouts.add_argument(
        "--layout-model",
        metavar="TOML",
        help="plan layout runs for this model description: --target GPU counts, --max-ranks GPUs per run",
    )
    layouts.add_argument("--global-batch", type=int, metavar="B", help="samples per step at the --target GPU counts")
    layouts.add_argument("--hardware", metavar="FILE|PRESET", help="GPU and links of the runs (TOML or a GPU preset)")
    plan.add_argument("-k", type=int, default=3, help="how many next runs to propose for an experiment (default 3)")
    plan.add_argument("--app", help="application name for the plan file (default: the experiment's, else app)")
    plan.add_argument("-o", "--output", metavar="FILE.csv", help="write the plan file for profile-cmd --plan")


def run(args) -> int:
    from extradeep.cli.common import load_problems_shown, problems_on_stderr, resolve_options
    from extradeep.cli.model import options_from_args
    from extradeep.report.plan import plan_text
    from extradeep.workflows import PlanOptions, plan_study

    if args.layout_model:
        from extradeep.cli.plan_layouts import run_layout_plan

        return run_layout_plan(args)
    options = options_from_args(args, resolve_options(args), PlanOptions)  # resolved once per command
    with load_problems_shown():
        result = plan_study(options, on_read=problems_on_stderr)
    print(plan_text(result.plan, result.current))
    for _, path in result.written:
        print(
            f"extradeep: plan written to {path}; next: extradeep profile-cmd --plan {path} -- COMMAND", file=sys.stderr
        )
    return 0
