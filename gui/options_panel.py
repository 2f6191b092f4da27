"""Modeler options: exponent sets, number of terms, signs of the terms, minimum points, hold-out.

The form fills the library's options value (:class:`extradeep.workflows.AnalysisOptions`, as the CLI
does from its flags), which parses and checks the exponents (`0, 1/2, 2/3, 1`, as fractions, never
evaluated) once; an error names its field, shown here next to the widget that sets it. Edits are
debounced and then emit `changed`, which re-models in the background.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel, QLineEdit, QSpinBox, QWidget

from extradeep.errors import InputError
from extradeep.modeling import PMNFModeler

# The default I and J search Extra-P 4.2.5's pairs of them (extradeep.modeling.terms.factor_pairs);
# this preset keeps them fixed (read-only).
EXTRAP_PAIRS = "Extra-P 4.2.5 pairs"
# The modeler's `nonnegative` option constrains the signs of the terms, never the constant.
TERM_SIGNS = {"follow the data's trend (default)": "auto", "non-negative terms": True, "any sign": False}


def _text(values) -> str:
    return ", ".join(str(v) for v in values)


def exponent_presets() -> dict:
    """Preset name -> (i text, j text); the extradeep default comes from the modeler itself."""
    from extradeep.modeling import DEFAULT_I, DEFAULT_J

    return {
        "extradeep default (I x J)": (_text(DEFAULT_I), _text(DEFAULT_J)),
        EXTRAP_PAIRS: (_text(DEFAULT_I), _text(DEFAULT_J)),
        "Coarse": ("0, 1/2, 1, 3/2, 2, 3", "0, 1"),
        "Polynomial only": ("0, 1/2, 1, 3/2, 2, 5/2, 3", "0"),
        "Custom": None,
    }


DEBOUNCE_MS = 400
# The library's field (extradeep.workflows.AnalysisOptions) -> the label of the widget that sets it
FIELD_LABELS = {
    "exponents_i": "Exponents i",
    "exponents_j": "Exponents j",
    "terms": "Terms",
    "nonnegative": "Term signs",
    "min_points": "Min points",
}
BAD_FIELD_STYLE = "border: 1px solid #b00020"


class OptionsPanel(QWidget):
    """Form for the PMNF modeler's options; `options()` gives the library's AnalysisOptions, whose
    `modeler` dict is what the GUI models with (`fit_models`, `extradeep.analyse`)."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.preset = QComboBox()
        self.presets = exponent_presets()
        self.preset.addItems(list(self.presets))
        self.exp_i = QLineEdit()
        self.exp_j = QLineEdit()
        self.exp_i.setToolTip("Polynomial exponents i in c * p^i * log2(p)^j")
        self.exp_j.setToolTip("Logarithm exponents j in c * p^i * log2(p)^j")
        self.n_terms = QSpinBox(minimum=1, maximum=3, value=1)
        self.n_terms.setToolTip("Number of terms besides the constant")
        self.term_signs = QComboBox()
        self.term_signs.addItems(list(TERM_SIGNS))
        default = PMNFModeler().nonnegative
        self.term_signs.setCurrentText(next(k for k, v in TERM_SIGNS.items() if v == default))
        self.term_signs.setToolTip(
            "Signs allowed for the coefficients of the terms (as the CLI's --nonnegative). "
            "The constant is never constrained: it may be negative."
        )
        self.min_points = QSpinBox(minimum=2, maximum=20, value=5)
        self.min_points.setToolTip("Regions with fewer measured points get no model")
        self.n_eval = QSpinBox(minimum=0, maximum=10, value=0)
        self.n_eval.setToolTip(
            "Keep the largest values of the first parameter out of modeling, to show as evaluation points"
        )
        self.error = QLabel(wordWrap=True)
        self.error.setStyleSheet("color: #b00020")
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Exponents", self.preset)
        form.addRow("  i (powers)", self.exp_i)
        form.addRow("  j (log2 powers)", self.exp_j)
        form.addRow("Terms", self.n_terms)
        form.addRow("Term signs", self.term_signs)
        form.addRow("Min points", self.min_points)
        form.addRow("Hold out largest", self.n_eval)
        form.addRow(self.error)
        self._timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._timer.timeout.connect(self._emit_if_valid)
        self._apply_preset(self.preset.currentText())
        self.preset.currentTextChanged.connect(self._apply_preset)
        for edit in (self.exp_i, self.exp_j):
            edit.textEdited.connect(self._custom_edit)
        for spin in (self.n_terms, self.min_points, self.n_eval):
            spin.valueChanged.connect(lambda *_: self._timer.start())
        self.term_signs.currentTextChanged.connect(lambda *_: self._timer.start())

    def _apply_preset(self, name: str) -> None:
        preset = self.presets.get(name)
        if preset is None:
            return
        self.exp_i.setText(preset[0])
        self.exp_j.setText(preset[1])
        for edit in (self.exp_i, self.exp_j):
            edit.setReadOnly(name == EXTRAP_PAIRS)
        self._timer.start()

    def _custom_edit(self, *_):
        self.preset.blockSignals(True)
        self.preset.setCurrentText("Custom")
        self.preset.blockSignals(False)
        self._timer.start()

    def _emit_if_valid(self) -> None:
        try:
            self.options()
        except InputError as exc:
            self.show_problem(exc)
            return
        self.show_problem(None)
        self.changed.emit()

    def field_widgets(self) -> dict:
        """The library's field -> the widget that sets it."""
        return {
            "exponents_i": self.exp_i,
            "exponents_j": self.exp_j,
            "terms": self.n_terms,
            "nonnegative": self.term_signs,
            "min_points": self.min_points,
        }

    def problem_text(self, exc: InputError) -> str:
        """The library's error with its field shown as the form's label ("Exponents i: ...")."""
        return exc.labelled(FIELD_LABELS.get(exc.field, exc.field or ""))

    def show_problem(self, exc: InputError | None) -> None:
        """Show the error under the form and mark the widget of its field; None clears both."""
        self.error.setText("" if exc is None else self.problem_text(exc))
        for name, widget in self.field_widgets().items():
            widget.setStyleSheet(BAD_FIELD_STYLE if exc is not None and exc.field == name else "")

    def set_min_points(self, value: int) -> None:
        """Set the minimum number of points without re-modeling (the caller models next)."""
        self.min_points.blockSignals(True)
        self.min_points.setValue(value)
        self.min_points.blockSignals(False)

    def set_options(self, options: dict) -> None:
        """Show an input's own modeler options (min_points, n_terms, nonnegative, exponents) without
        re-modeling (the caller models next); options the form has no control for are left as they are."""
        widgets = (self.preset, self.exp_i, self.exp_j, self.n_terms, self.term_signs)
        for widget in widgets:
            widget.blockSignals(True)
        try:
            if "min_points" in options:
                self.set_min_points(int(options["min_points"]))
            if "n_terms" in options:
                self.n_terms.setValue(int(options["n_terms"]))
            signs = {value: name for name, value in TERM_SIGNS.items()}
            if options.get("nonnegative") in signs:
                self.term_signs.setCurrentText(signs[options["nonnegative"]])
            if "exponents_i" in options or "exponents_j" in options:
                self.preset.setCurrentText("Custom")
                for edit, key in ((self.exp_i, "exponents_i"), (self.exp_j, "exponents_j")):
                    if key in options:
                        edit.setReadOnly(False)
                        edit.setText(_text(options[key]))
        finally:
            for widget in widgets:
                widget.blockSignals(False)

    def options(self):
        """The library's AnalysisOptions filled from the form (exponents as typed, terms, signs, min
        points); building it checks them, raising InputError naming the field."""
        import extradeep

        # min_points counts as given even at its default, so it overrides an input's own
        reading = extradeep.Options(min_points=self.min_points.value(), explicit=frozenset({"min_points"}))
        return extradeep.AnalysisOptions(
            reading=reading,
            exponents_i=self.exp_i.text(),
            exponents_j=self.exp_j.text(),
            terms=self.n_terms.value(),
            nonnegative=TERM_SIGNS[self.term_signs.currentText()],
        )
