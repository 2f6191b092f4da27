"""`extradeep plan --layout-model`: the small runs (layouts and GPU counts) that pin down the layout
model's parts for predictions at the target GPU counts, per GPU-hour (extradeep.layouts.design)."""

from __future__ import annotations


def run_layout_plan(args) -> int:
    from extradeep.analysis.points import parse_values
    from extradeep.cli.outputs import check_output_path
    from extradeep.errors import InputError
    from extradeep.layouts.design import plan_layout_runs
    from extradeep.layouts.model import LayoutModel
    from extradeep.layouts.space import enumerate_layouts
    from extradeep.layouts.workload import load_transformer
    from extradeep.report.layouts import layout_cells
    from extradeep.report.text import render_table

    if args.global_batch is None:
        raise InputError("--global-batch", "a layout plan needs the samples per step at the targets")
    if args.output:
        check_output_path("--output", args.output, {args.layout_model})
    shape = load_transformer(args.layout_model)
    model = LayoutModel(hardware=args.hardware, interval=None).fit(None)
    gpus = [int(v) for v in parse_values(args.target, "--target")]
    targets = enumerate_layouts(shape, gpus, args.global_batch, model.hardware_.system.gpus_per_node)
    if targets.empty:
        raise InputError("--target", f"no valid layout for {args.global_batch} samples per step on {gpus} GPUs")
    fits = model.predict(targets)["fits"].to_numpy()
    runs = plan_layout_runs(
        shape,
        args.max_ranks,
        model,
        budget_gpu_hours=args.budget,
        runs=None if args.budget else args.k,
        targets=targets[fits] if fits.any() else targets,
        run_seconds=args.run_seconds,
    )
    headers = ["GPUs", "t", "p", "d", "micro-batch", "count", "ZeRO", "recompute", "schedule", "GPU-hours", "gain"]
    rows = [[*layout_cells(r), f"{r['gpu_hours']:.3g}", f"{100 * r['gain']:.1f}%"] for _, r in runs.iterrows()]
    print(
        f"{len(runs)} runs of {runs.attrs['candidates']} candidates on <= {args.max_ranks} GPUs, "
        f"{runs['gpu_hours'].sum():.3g} GPU-hours, chosen {runs.attrs['criterion']} per GPU-hour "
        f"(gain: how much each run shrinks the targets' predicted variance)"
    )
    print(render_table(headers, rows, "r" * 7 + "ll" + "rr"))
    if args.output:
        runs.to_csv(args.output, index=False)
        print(f"wrote {len(runs)} runs to {args.output}")
    return 0
