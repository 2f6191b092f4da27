import subprocess
import sys

from extradeep.cli import COMMANDS, build_parser


def test_help_lists_every_available_subcommand(capsys):
    parser = build_parser()
    help_text = parser.format_help()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices, "no subcommands registered"
    for name in sub.choices:
        assert name in help_text
        assert name.replace("-", "_") in COMMANDS


def test_python_dash_m_runs_and_no_command_prints_help(tmp_path):
    # from a folder of the user's, as users run it: inside the source checkout, `-m` puts the checkout's
    # extradeep/ (whose gui/ installs as extradeep.gui) before the installed package
    out = subprocess.run([sys.executable, "-m", "extradeep"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2
    assert "usage: extradeep" in out.stdout


def test_every_subcommand_help_is_complete(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, cmd_parser in sub.choices.items():
        text = cmd_parser.format_help()
        assert f"extradeep {name}" in text
        for action in cmd_parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{name} {action.option_strings} has no help text"


def _raising(error):
    def run(args):
        raise error

    return run


def _interrupted_import():
    """What scipy's compiled modules (pybind11) raise when Ctrl-C reaches them while they initialise."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise ImportError("initialization failed") from interrupt
    except ImportError as exc:
        return exc


def test_ctrl_c_during_a_compiled_import_is_an_interruption_not_a_traceback(monkeypatch, capsys):
    """Ctrl-C in the first second of `extradeep layouts --table ...` (while scipy.optimize loads) once
    ended in an 'ImportError: initialization failed' traceback."""
    import pytest

    import extradeep.cli.layouts as layouts
    from extradeep.cli import main

    monkeypatch.setattr(layouts, "run", _raising(_interrupted_import()))
    assert main(["layouts", "--table", "runs.csv"]) == 130
    assert capsys.readouterr().err == "extradeep: interrupted\n"
    monkeypatch.setattr(layouts, "run", _raising(ImportError("no module named foo")))
    with pytest.raises(ImportError, match="foo"):  # a real missing module is not hidden as an interruption
        main(["layouts", "--table", "runs.csv"])
