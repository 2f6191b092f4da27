"""`extradeep gui`: a clear line without PySide6, a clear error for a missing path."""

import sys

from extradeep.cli import main


def test_without_pyside6_it_says_how_to_install_and_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "PySide6", None)  # makes `import PySide6` fail
    assert main(["gui"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["extradeep gui needs PySide6: pip install 'extradeep[gui]'"]


def test_a_missing_path_is_one_line_error(tmp_path, capsys):
    assert main(["gui", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope: no such file or folder" in err[0]


def test_the_core_package_imports_without_the_gui():
    import subprocess

    code = "import sys; sys.modules['PySide6'] = None; import extradeep.cli.gui, extradeep.cli; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_the_pyside_release_that_crashes_on_old_pythons_is_refused():
    from extradeep.gui.launch import pyside_problem

    assert "pip install" in pyside_problem("6.12.0", (3, 11))
    assert pyside_problem("6.12.0", (3, 12)) is None
    assert pyside_problem("6.11.3", (3, 11)) is None
