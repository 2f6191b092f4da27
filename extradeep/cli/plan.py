"""`extradeep plan`: which configurations and repetitions to profile (next), within a budget."""

from __future__ import annotations

import argparse
import sys

from extradeep.cli.common import add_reading_arguments
from extradeep.cli.model import add_analysis_arguments, cost_settings, modeler_options

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
    from extradeep.analysis.advisor import MeasurementAdvisor
    from extradeep.analysis.points import parse_values
    from extradeep.analysis.saved import effective_options
    from extradeep.capture.plan_file import write_plan
    from extradeep.cli.common import experiment_from_args, resolve_options
    from extradeep.cli.outputs import check_output_path, input_paths
    from extradeep.io.config import DEFAULTS
    from extradeep.report.plan import plan_text

    if args.layout_model:
        from extradeep.cli.plan_layouts import run_layout_plan

        return run_layout_plan(args)
    cost = cost_settings(args)
    targets = parse_values(args.target, "--target")
    if args.output:
        check_output_path("--output", args.output, input_paths(args))
    reading = resolve_options(args)  # once per command
    options = modeler_options(args, reading)
    experiment = experiment_from_args(args, options=reading) if (args.profiles or args.manifest) else None
    if experiment is not None:  # a saved experiment's own options (--min-points 4) hold unless given here
        options = effective_options(experiment, options)
    advisor = MeasurementAdvisor(
        targets,
        args.max_ranks,
        args.gpus_per_node,
        args.budget,
        cost=cost,
        run_seconds=args.run_seconds,
        level=args.level,
        reps=args.reps,
        min_points=options.get("min_points", DEFAULTS["min_points"]),
        options=options,
        partial_nodes=args.partial_nodes,
    )
    plan = advisor.fit(experiment).propose(args.k)
    print(plan_text(plan, advisor.current_))
    if args.output:
        path = write_plan(args.output, plan, app=args.app)
        print(
            f"extradeep: plan written to {path}; next: extradeep profile-cmd --plan {path} -- COMMAND", file=sys.stderr
        )
    return 0


def plan_for_report(args, experiment, cost, analysis=None):
    """The plan for `report --plan-target` (None without it): 3 next runs within --max-ranks
    (default: twice the largest measured ranks), for the report's own primary time model."""
    if not getattr(args, "plan_target", None) or experiment is None:
        return None
    from extradeep.analysis.advisor import MeasurementAdvisor
    from extradeep.analysis.points import parse_values

    measured = experiment.points[cost.ranks_param].max()
    max_ranks = int(args.max_ranks or 2 * measured)
    options = dict(analysis.options) if analysis is not None else {}
    advisor = MeasurementAdvisor(
        parse_values(args.plan_target, "--plan-target"),
        max_ranks,
        args.gpus_per_node,
        cost=cost,
        level=args.level,
        min_points=int(options.get("min_points", 5)),
        options=options or None,
        partial_nodes=getattr(args, "partial_nodes", False),
    )
    return advisor.fit(experiment, None if analysis is None else analysis.primary).propose(3)
