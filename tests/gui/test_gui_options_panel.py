"""The modeler options panel fills the library's options value (issue 22): the same AnalysisOptions the
CLI builds from its flags, checked once by the library, its errors shown at the widget they are about."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


@pytest.fixture
def panel(qapp):
    from extradeep.gui.options_panel import OptionsPanel

    widget = OptionsPanel()
    yield widget
    widget.deleteLater()


def cli_options(argv: list[str]):
    """The options value `extradeep model` builds from `argv`."""
    from extradeep.cli import build_parser
    from extradeep.cli.common import resolve_options
    from extradeep.cli.model import options_from_args
    from extradeep.workflows import ModelOptions

    args = build_parser().parse_args(["model", *argv])
    return options_from_args(args, resolve_options(args), ModelOptions)


def test_the_panel_fills_the_same_options_value_as_the_cli(panel, gui_experiment):
    from extradeep.workflows import AnalysisOptions

    panel.exp_i.setText("0, 1/2, 1")
    panel.exp_j.setText("0; 1")  # the GUI's ';' separator is the library's too
    panel.n_terms.setValue(2)
    panel.term_signs.setCurrentText("non-negative terms")
    panel.set_min_points(4)
    options = panel.options()
    assert type(options) is AnalysisOptions
    flags = ["--exponents-i", "0,1/2,1", "--exponents-j", "0,1", "--terms", "2", "--nonnegative"]
    cli = cli_options([str(gui_experiment), *flags, "--min-points", "4"])
    assert options.modeler == cli.modeler
    assert options.modeler == {
        "min_points": 4,
        "exponents_i": ("0", "1/2", "1"),
        "exponents_j": ("0", "1"),
        "n_terms": 2,
        "nonnegative": True,
    }


@pytest.mark.parametrize(
    ("edit", "text", "label", "problem"),
    [
        ("exp_i", "0, x", "Exponents i", "'x' is not a number or fraction"),
        ("exp_i", "0, -1", "Exponents i", "'-1' is negative"),
        ("exp_j", " , ", "Exponents j", "needs at least one exponent"),
        ("exp_j", "1/0", "Exponents j", "'1/0' is not a number or fraction"),
    ],
)
def test_a_bad_exponent_is_refused_at_its_field_without_a_traceback(panel, qtbot, capfd, edit, text, label, problem):
    from extradeep.errors import InputError

    field = {"exp_i": "exponents_i", "exp_j": "exponents_j"}[edit]
    widget = getattr(panel, edit)
    widget.clear()
    emitted = []
    panel.changed.connect(lambda: emitted.append(True))
    qtbot.keyClicks(widget, text)  # as typed: the preset becomes Custom, the debounced check runs
    qtbot.waitUntil(lambda: panel.error.text() != "", timeout=5000)
    assert panel.preset.currentText() == "Custom"
    assert panel.error.text().startswith(f"{label}: ") and problem in panel.error.text()
    assert widget.styleSheet() and not panel.n_terms.styleSheet()  # the bad field is marked, only it
    assert emitted == []  # nothing re-models with a refused value
    with pytest.raises(InputError) as refused:
        panel.options()
    assert refused.value.field == field and problem in refused.value.problem
    assert "Traceback" not in "".join(capfd.readouterr())

    widget.clear()
    qtbot.keyClicks(widget, "0, 1")
    qtbot.waitUntil(lambda: emitted == [True], timeout=5000)
    assert panel.error.text() == "" and widget.styleSheet() == ""


def test_the_window_refuses_bad_options_in_one_line(opened, tmp_path, capfd):
    """Re-modeling and the report export show the library's error with the panel's label, no traceback,
    and keep the models of the last good options."""
    from extradeep.gui.options_panel import exponent_presets

    window = opened
    formulas = window.ws.regions["formula"].copy()
    window.options.exp_i.setText("0, 2/x")
    try:
        window.remodel()
        assert window.last_error == "Exponents i: '2/x' is not a number or fraction like 1/2"
        assert window.options.error.text() == window.last_error
        window.last_error = ""
        window.export_report(tmp_path / "report.html")
        assert window.last_error.startswith("Exponents i: ")
        assert not (tmp_path / "report.html").exists() and not window.runner.busy
        assert window.ws.regions["formula"].equals(formulas)
        assert "Traceback" not in "".join(capfd.readouterr())
    finally:
        window.options.exp_i.setText(exponent_presets()[window.options.preset.currentText()][0])
        window.options.show_problem(None)
        if window._error_box is not None:
            window._error_box.close()
        window.last_error = ""
