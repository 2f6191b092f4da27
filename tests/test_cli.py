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
