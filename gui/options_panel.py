"""Modeler options: exponent sets, number of terms, signs of the terms, minimum points, hold-out.

Exponents are typed as comma-separated numbers or fractions (`0, 1/2, 2/3, 1`) and parsed with
`fractions.Fraction`, never evaluated. Edits are debounced and then emit `changed`, which re-models in
the background.
"""

from __future__ import annotations

from fractions import Fraction

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel, QLineEdit, QSpinBox, QWidget

from extradeep.errors import InputError
from extradeep.modeling import PMNFModeler

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


def parse_exponents(text: str, what: str) -> tuple[Fraction, ...]:
    """'0, 1/2, 2' -> (0, 1/2, 2) as Fractions; raises InputError naming the bad entry."""
    values = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            values.append(Fraction(part))
        except (ValueError, ZeroDivisionError):
            raise InputError(what, f"{part!r} is not a number or fraction like 2/3") from None
    if not values:
        raise InputError(what, "needs at least one exponent")
    return tuple(sorted(set(values)))


class OptionsPanel(QWidget):
    """Form for the PMNF modeler's options; `options()` gives the dict passed to `fit_models`."""

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
            self.error.setText(str(exc))
            return
        self.error.clear()
        self.changed.emit()

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

    def options(self) -> dict:
        """Keyword arguments for the PMNF modeler; raises InputError for unparsable exponents."""
        return {
            "exponents_i": parse_exponents(self.exp_i.text(), "exponents i"),
            "exponents_j": parse_exponents(self.exp_j.text(), "exponents j"),
            "pairs": "extrap" if self.preset.currentText() == EXTRAP_PAIRS else None,
            "n_terms": self.n_terms.value(),
            "nonnegative": TERM_SIGNS[self.term_signs.currentText()],
            "min_points": self.min_points.value(),
        }
