"""`extradeep predict`: replay one run's traces, show its critical path, answer what-if questions."""

from __future__ import annotations

import argparse
import json
import sys

from extradeep.cli.analyses import add_optimize_arguments, add_trace_analysis_arguments
from extradeep.cli.common import add_step_mark_arguments, step_mark_settings
from extradeep.columns import OVERHEAD_TYPES
from extradeep.errors import InputError


def overhead_legend(types=None, indent: str = "  ") -> str:
    """One line per host overhead type (all, or those in `types`), in order."""
    return "\n".join(f"{indent}{t}  {text}" for t, text in OVERHEAD_TYPES.items() if types is None or t in types)


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


def _select(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(None, f"--run {item!r} is not PARAM=VALUE")
        try:
            out[key.strip()] = int(value) if value.strip().lstrip("-").isdigit() else float(value)
        except ValueError:
            raise InputError(None, f"--run {item!r}: {value!r} is not a number") from None
    return out


def _scenarios(args, has_models: bool) -> list:
    """The scenarios to replay: one per --what-if, the --ranks one, and the --combine one."""
    from extradeep.predictor.whatif import change_key, combine_what_ifs, parse_what_if

    scenarios = [parse_what_if(spec) for spec in args.what_if]
    if args.ranks is not None:
        spec = f"ranks={args.ranks}; comm.algorithm={args.algorithm}"
        scenarios.append(parse_what_if(spec + (f"; pmnf.ranks={args.ranks}" if has_models else "")))
    if args.combine:
        if len(scenarios) < 2:
            raise InputError(None, "--combine needs at least two scenarios (--what-if or --ranks)")
        scenarios.append(combine_what_ifs(scenarios))
    unique = {}  # the same changes asked twice are replayed once
    for w in scenarios:
        unique.setdefault(frozenset((change_key(c), c.value) for c in w.changes), w)
    return list(unique.values())


def _check_arguments(args) -> None:
    """Refuse bad numbers and unsafe output paths before anything is read."""
    from extradeep.cli.outputs import check_outputs

    if args.ranks is not None and args.ranks < 1:
        raise InputError(None, f"--ranks must be a whole number >= 1 (got {args.ranks})")
    if args.top < 1:
        raise InputError(None, f"--top must be >= 1 (got {args.top})")
    # everything predict reads (the exports in RUN_DIR, the experiment) counts as an input
    read = argparse.Namespace(profiles=[args.run_dir] + ([args.experiment] if args.experiment else []))
    check_outputs(
        read,
        {
            "--json": args.json,
            "--timeline": args.timeline,
            "--plot": args.plot,
            "--optimize-report": args.optimize_report,
        },
    )
    if args.optimize_report and not args.optimize:
        raise InputError(None, "--optimize-report needs --optimize")
    if args.optimize:  # the search's options are checked before the long replay
        from extradeep.cli.analyses import check_optimize_arguments

        check_optimize_arguments(args)


def _models(path):
    from extradeep.aggregate.experiment import Experiment
    from extradeep.modeling import fit_models

    exp = Experiment.load(path)
    points = exp.points[(exp.points["metric"] == "time") & (exp.points["phase"] == "train")]
    return exp, fit_models(points, exp.params, by=("region",))


def run(args) -> int:
    import pandas as pd

    from extradeep.predictor import predict

    _check_arguments(args)
    if args.system:
        from extradeep.system import load_system

        load_system(args.system)  # a bad file fails before the long read
    models, exp = None, None
    if args.experiment:
        exp, models = _models(args.experiment)
    pred = predict(
        args.run_dir,
        what_if=_scenarios(args, models is not None),
        select=_select(args.run),
        settings=step_mark_settings(args),
        gpu_gaps="keep" if args.keep_gpu_gaps else "drop",
        models=models,
        progress=True,
        system=args.system,
    )
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        _print_report(pred, args, models, exp)
    for line in pred.warnings:
        print(f"extradeep predict: warning: {line}", file=sys.stderr)
    if args.json:
        _write_json(pred, args.json)
    if args.timeline:
        frames = [pred.timeline(s).assign(scenario=s) for s in pred.results]
        pd.concat(frames, ignore_index=True).to_csv(args.timeline, index=False)
    if args.plot:
        from extradeep.predictor.plot import plot_prediction

        plot_prediction(pred, args.plot)
    if args.analysis or args.diff:
        from extradeep.cli.analyses import print_analyses

        print_analyses(pred_paths(pred), args, step_mark_settings(args))
    if args.optimize:
        from extradeep.cli.analyses import print_optimization

        print_optimization(pred_paths(pred), args, step_mark_settings(args))
    return 0


def pred_paths(pred) -> list[str]:
    """The files the prediction read (the run, without re-resolving the folder)."""
    return sorted(set(pred.files["path"]))


def _print_report(pred, args, models, exp) -> None:
    from extradeep.analysis.points import format_seconds
    from extradeep.predictor.critical_path import CLASSES

    f = pred.files
    print(f"run: {f['path'].nunique()} export(s), {len(f)} rank(s)")
    for note in pred.notes:
        print(f"note: {note}")
    s = pred.summary
    base = s[s["scenario"] == s["scenario"].iloc[0]]
    print("\nStep time, median over steps of the slowest rank:")
    cols = ["phase", "steps", "measured", "replayed", "median_abs_error", "max_abs_error"]
    cols += ["kernel_sum_baseline"] if "kernel_sum_baseline" in base else []
    print(_table(base[cols], seconds=cols[2:]))
    b = pred.breakdown
    shares = {c: b[c].sum() / b["span"].sum() for c in CLASSES}
    print(
        "\nCritical path, share of the step time: "
        + ", ".join(f"{c} {100 * v:.1f}%" for c, v in shares.items())
        + f" (idle includes {100 * b['os_wait'].sum() / b['span'].sum():.1f}% in OS calls, e.g. data loading)"
    )
    _print_owners(pred.owners, args.top)
    ov = pred.overheads.sort_values("total", ascending=False).head(args.top)
    ov = ov.assign(name=ov["name"].astype(str).str.slice(0, 60))
    print(f"\nHost overheads T1-T5, top {args.top} by total:")
    print(_table(ov, seconds=["mean", "median", "std", "p95", "total"]))
    print(overhead_legend(set(ov["type"])))
    if len(pred.collectives):
        c = pred.collectives
        print(
            f"\nCollectives: {len(c)} matched; median pure {format_seconds(c['pure'].median())}, "
            f"median wait for the slowest rank {format_seconds(c['wait'].median())}"
        )
    wi = s[s["scenario"] != s["scenario"].iloc[0]]
    if len(wi):
        print("\nWhat-if (each re-replayed):")
        what_if = wi[["scenario", "phase", "replayed", "predicted", "speedup"]]
        print(
            _table(what_if.assign(speedup=[f"{v:.3g}x" for v in what_if["speedup"]]), seconds=["replayed", "predicted"])
        )
    if exp is not None and args.ranks:
        _print_empirical(models, args.ranks)


def _table(frame, seconds: list[str]) -> str:
    """A frame as text, its time columns as durations with units (850 us, 12.3 ms, 1.57 s)."""
    from extradeep.analysis.points import format_seconds

    return frame.to_string(index=False, formatters={c: format_seconds for c in seconds})


def _print_owners(owners, top: int) -> None:
    """The outermost owners of the critical path (they partition it), each with its hot path: the
    largest owner inside it, level by level, while that holds at least half of its parent."""
    from extradeep.predictor.critical_path import CLASSES
    from extradeep.predictor.owners import hot_path

    first = owners[owners["level"] == 1]
    if first.empty:
        return
    shown = first.head(top)
    print(
        f"top {len(shown)} owners of the critical path (the operator or annotation around each piece; summed over steps):"
    )
    for row in shown.itertuples(index=False):
        mix = ", ".join(
            f"{c} {100 * getattr(row, c) / row.seconds:.0f}%" for c in CLASSES if getattr(row, c) >= 0.05 * row.seconds
        )
        inside = " > ".join(f"{name[:50]} {100 * share:.1f}%" for name, share in hot_path(owners, row.owner))
        print(
            f"  {100 * row.share:5.1f}%  {row.seconds:9.4f} s  {str(row.owner)[:60]}  [{mix}]"
            + (f"  > {inside}" if inside else "")
        )
    print(
        f"these {len(shown)} owners hold {100 * shown['share'].sum():.1f}% of the critical path ({len(first)} in all)"
    )


def _print_empirical(models, ranks: int) -> None:
    """The empirical step-time model (fitted on several runs) at the same point, for comparison."""
    import numpy as np

    from extradeep.analysis.points import format_seconds

    step = models[(models["region"] == "step") & models["model"].notna()]
    if step.empty:
        print("\nempirical step-time model: none in the experiment")
        return
    model = step["model"].iloc[0]
    value = float(np.ravel(model.predict(np.array([float(ranks)])))[0])
    print(f"\nEmpirical PMNF step-time model at ranks={ranks}: {format_seconds(value)}  ({model.formula()})")


def _write_json(pred, path) -> None:
    tables = {
        name: getattr(pred, name)
        for name in (
            "summary",
            "steps",
            "breakdown",
            "critical_path",
            "owners",
            "overheads",
            "kernel_sums",
            "collectives",
            "what_if_steps",
            "files",
        )
    }
    out = {
        "notes": pred.notes,
        "warnings": pred.warnings,
        **{k: json.loads(v.to_json(orient="records")) for k, v in tables.items()},
    }
    try:
        with open(path, "w") as fh:
            json.dump(out, fh, indent=1)
    except OSError as exc:
        raise InputError(path, f"cannot write JSON ({exc.strerror})") from None
    print(f"wrote {path}", file=sys.stderr)
