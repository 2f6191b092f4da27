"""The `extradeep` command line: one console script with subcommands.

Each subcommand lives in its own module in this package and provides `HELP` (one line),
`add_arguments(parser)` and `run(args) -> int`. Modules import their heavy dependencies inside
`run`, so `extradeep --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from extradeep import __version__
from extradeep.cli.flags import flag_error
from extradeep.errors import InputError

# Order is the order shown by --help.
COMMANDS = (
    "model",
    "evaluate",
    "budget",
    "plan",
    "report",
    "inspect",
    "predict",
    "simulate",
    "instrument",
    "profile_cmd",
    "gui",
)


def _available_commands():
    for name in COMMANDS:
        try:
            yield name.replace("_", "-"), importlib.import_module(f"extradeep.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"extradeep.cli.{name}":
                raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="extradeep",
        description="Model how distributed deep-learning training scales, from a few small Nsight Systems profiles.",
    )
    parser.add_argument("--version", action="version", version=f"extradeep {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _available_commands():
        cmd = sub.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except InputError as exc:
        print(f"extradeep: error: {flag_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("extradeep: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
