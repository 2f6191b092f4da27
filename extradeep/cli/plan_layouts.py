"""`extradeep plan --layout-model`: the small runs (layouts and GPU counts) that pin down the layout
model's parts for predictions at the target GPU counts, per GPU-hour (extradeep.workflows.layouts)."""

from __future__ import annotations


def options_from_args(args):
    """The one LayoutPlanOptions of the command line (checked by the library as it is built)."""
    from extradeep.workflows.layouts import LayoutPlanOptions

    return LayoutPlanOptions(
        layout_model=args.layout_model,
        target=args.target,
        max_ranks=args.max_ranks,
        global_batch=args.global_batch,
        hardware=args.hardware,
        budget=args.budget,
        k=args.k,
        run_seconds=args.run_seconds,
        output=args.output,
    )


def run_layout_plan(args) -> int:
    from extradeep.columns import GAIN, GPU_HOURS
    from extradeep.report.layouts import layout_cells
    from extradeep.report.text import render_table
    from extradeep.workflows.layouts import layout_plan

    result = layout_plan(options_from_args(args))
    runs = result.runs
    headers = ["GPUs", "t", "p", "d", "micro-batch", "count", "ZeRO", "recompute", "schedule", "GPU-hours", "gain"]
    rows = [[*layout_cells(r), f"{r[GPU_HOURS]:.3g}", f"{100 * r[GAIN]:.1f}%"] for _, r in runs.iterrows()]
    print(
        f"{len(runs)} runs of {runs.attrs['candidates']} candidates on <= {args.max_ranks} GPUs, "
        f"{runs[GPU_HOURS].sum():.3g} GPU-hours, chosen {runs.attrs['criterion']} per GPU-hour "
        f"(gain: how much each run shrinks the targets' predicted variance)"
    )
    print(render_table(headers, rows, "r" * 7 + "ll" + "rr"))
    for _, path, rows in result.written:
        print(f"wrote {rows} runs to {path}")
    return 0
