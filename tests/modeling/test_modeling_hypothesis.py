"""Properties (issue 17): the Extra-P text reader turns any text into a table or one InputError, and
the modeler turns any finite data into a model or a stated reason, never a crash."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from extradeep.errors import InputError
from extradeep.modeling import (
    PMNFModeler,
    fit_models,
    read_extrap_text,
    write_extrap_text,
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NUMBER = st.one_of(
    st.integers(-5, 70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e400", "-0", "0x10", "nan", "", "(", ")", "( 1 2 )", "(1)"]),
)
LINE = st.one_of(
    st.builds(lambda n: f"PARAMETER {n}", st.sampled_from(["p", "n", "p n", "", "p p"])),
    st.builds(lambda xs: "POINTS " + " ".join(f"( {x} )" for x in xs), st.lists(NUMBER, max_size=6)),
    st.builds(lambda xs: "POINTS " + " ".join(xs), st.lists(NUMBER, max_size=6)),
    st.builds(lambda r: f"REGION {r}", st.text(max_size=8)),
    st.builds(lambda m: f"METRIC {m}", st.sampled_from(["time", "", "bytes x"])),
    st.builds(lambda xs: "DATA " + " ".join(xs), st.lists(NUMBER, max_size=6)),
    st.text(max_size=20),
)


def _valid_file(tmp_path) -> str:
    """A well-formed file to mutate: 5 points of 2 + p/2, two repetitions each."""
    p = np.repeat([2.0, 4, 8, 16, 32], 2)
    path = tmp_path / "valid.txt"
    write_extrap_text(path, pd.DataFrame({"p": p, "value": 2 + p / 2, "region": "r", "metric": "time"}), ["p"])
    return path.read_text()


@FAST
@given(st.lists(LINE, max_size=12))
def test_any_text_is_a_table_or_one_input_error(tmp_path, lines):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines))
    _table_or_input_error(path)


@FAST
@given(st.integers(0, 400), st.integers(0, 400), st.text(max_size=12))
def test_an_edited_valid_file_is_a_table_or_one_input_error(tmp_path, start, length, insert):
    text = _valid_file(tmp_path)
    path = tmp_path / "edited.txt"
    path.write_text(text[:start] + insert + text[start + length :])
    _table_or_input_error(path)


def _table_or_input_error(path) -> None:
    try:
        table = read_extrap_text(path)
    except InputError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    assert {"region", "metric", "value"} <= set(table.columns)


FINITE = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@FAST
@given(st.lists(st.tuples(st.floats(-4, 128, allow_nan=False), FINITE), min_size=1, max_size=14), st.booleans())
# found by CI: a subnormal value, whose relative-weighting floor squared underflowed to a zero variance
@example([(1.0, 2.225073858507203e-309), (2.0, 0.0), (3.0, 0.0)], False)
@example([(1.0, 1e-200), (2.0, 2e-200), (3.0, 3e-200), (4.0, 4e-200)], True)
def test_any_finite_data_gives_a_model_or_a_reason(xy, nonnegative):
    frame = pd.DataFrame(xy, columns=["p", "value"]).assign(region="r", metric="time")
    table = fit_models(frame, ["p"], options={"nonnegative": nonnegative, "min_points": 3})
    row = table.iloc[0]
    if row["model"] is None:
        assert row["reason"]
        return
    kept = frame[frame["p"] > 0]
    predicted = np.asarray(row["model"].predict(kept["p"].to_numpy(float)), dtype=float)
    assert np.isfinite(predicted).all()


@FAST
@given(
    st.lists(
        st.tuples(st.sampled_from([1.0, 2, 3, 4, 8]), st.sampled_from([1.0, 2, 4, 8, 16]), FINITE),
        min_size=5,
        max_size=30,
    )
)
def test_two_parameters_with_ones_never_crash(rows):
    X = np.array([[a, b] for a, b, _ in rows])
    y = np.array([v for _, _, v in rows])
    try:
        model = PMNFModeler(min_points=3).fit(X, y).model_
    except InputError as exc:
        assert "no model" in str(exc)
        return
    assert np.isfinite(np.asarray(model.predict(X), dtype=float)).all()
