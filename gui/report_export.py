"""Export the budgeting HTML report with the same code as `extradeep report`, with the GUI's settings."""

from __future__ import annotations

from pathlib import Path

from extradeep.gui.workspace import Workspace


def report_argv(ws: Workspace, out: Path, options: dict, cores_per_rank: float = 1.0,
                max_time: float | None = None, max_cost: float | None = None) -> list[str]:
    """Command line of `extradeep report` for the open input and the GUI's modeler and cost settings."""
    argv = ["report", str(ws.source), "-o", str(out), "--cores-per-rank", f"{cores_per_rank:g}",
            "--exponents-i", ",".join(str(v) for v in options["exponents_i"]),
            "--exponents-j", ",".join(str(v) for v in options["exponents_j"]),
            "--terms", str(options["n_terms"])]
    if options.get("nonnegative"):
        argv.append("--nonnegative")
    if max_time is not None:
        argv += ["--max-time", f"{max_time:.6g}"]
    if max_cost is not None:
        argv += ["--max-cost", f"{max_cost:.6g}"]
    return argv


def write_report(report, argv: list[str]) -> Path:
    """Run `extradeep report` with `argv` (in a worker); returns the written file."""
    from extradeep.cli import build_parser
    from extradeep.cli import report as report_command

    report(0, 0, "Writing the HTML report")
    args = build_parser().parse_args(argv)
    report_command.run(args)
    return Path(args.output)
