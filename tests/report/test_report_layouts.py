"""The layout model's text: errors in percent stay readable whatever their size."""

from __future__ import annotations

import pytest

from extradeep.report.layouts import error_percent


@pytest.mark.parametrize(
    "value,text",
    [(6.6, "6.6%"), (0.0, "0.0%"), (9999.94, "9999.9%"), (12345.0, "1.23e+04%"), (1.38e300, "1.38e+300%")],
)
def test_error_percent_is_short_at_any_size(value, text):
    """A step time of 1e-300 ms in a table once printed its fit error as a 300-digit number."""
    assert error_percent(value) == text
