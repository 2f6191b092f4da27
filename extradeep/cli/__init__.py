"""The `extradeep` command line: one console script with subcommands.

Each subcommand lives in its own module in this package and provides `HELP` (one line),
`add_arguments(parser)` and `run(args) -> int`. Modules import their heavy dependencies inside
`run`, so `extradeep --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import warnings

from extradeep import __version__
from extradeep.cli.flags import flag_error
from extradeep.errors import InputError

# Order is the order shown by --help.
COMMANDS = (
    "model",
    "evaluate",
    "budget",
    "plan",
    "layouts",
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


# options whose value may start with a minus (a list of numbers): argparse would take "-4,0" for an
# option and answer with its usage; joined as "--predict=-4,0", the value reaches our own check
NUMBER_LIST_OPTIONS = (
    *("--predict", "--candidates", "--eval-points", "--at", "--ranks", "--max-ranks", "--what-if"),
    *("--target", "--plan-target", "--max-time"),  # "-4,8" and "-2h" look like options to argparse
)
_NEGATIVE = re.compile(r"-[\d.]")


def join_negative_values(argv: list[str]) -> list[str]:
    """`--predict -4,0` -> `--predict=-4,0`, so that a negative value gets a message that explains it."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in NUMBER_LIST_OPTIONS and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    from extradeep.processes import one_blas_thread

    one_blas_thread()  # before anything imports NumPy
    parser = build_parser()
    argv = join_negative_values(list(sys.argv[1:] if argv is None else argv))
    with warnings.catch_warnings():
        # a library warning is one "extradeep: warning:" line, never a raw UserWarning with its source line
        warnings.showwarning = _show_warning
        return _main(parser, argv)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    text = " ".join(line.strip() for line in str(message).splitlines() if line.strip())  # one line, always
    print(f"extradeep: warning: {text}", file=sys.stderr)


def _main(parser, argv) -> int:
    from extradeep.processes import exit_status, sigterm_unwinds

    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        with sigterm_unwinds():  # SIGTERM unwinds like Ctrl-C: pools stop, nothing is left behind
            return int(args._run(args) or 0)
    except InputError as exc:
        print(f"extradeep: error: {flag_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("extradeep: interrupted", file=sys.stderr)
        return exit_status(exc)
    except ImportError as exc:
        interrupt = _interrupt_behind(exc)
        if interrupt is None:
            raise
        print("extradeep: interrupted", file=sys.stderr)
        return exit_status(interrupt)
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        # the last guard: a file system refusal that no earlier check caught is still one line naming
        # the file, never a traceback (the checks before the work should make this rare)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"extradeep: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


def _interrupt_behind(exc: BaseException) -> BaseException | None:
    """The Ctrl-C behind an ImportError: a compiled module (scipy's, built with pybind11) that Ctrl-C
    interrupts while it initialises raises ImportError('initialization failed') from it."""
    seen = exc.__cause__ or exc.__context__
    while seen is not None and not isinstance(seen, KeyboardInterrupt):
        seen = seen.__cause__ or seen.__context__
    return seen
