"""Extra-P text inputs: reading, writing, errors with line numbers, and modeling a whole file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from extradeep.errors import InputError
from extradeep.modeling import model_extrap_text, read_extrap_text, write_extrap_text

ONE_PARAM = """# comment
PARAMETER p
POINTS 4 8 16
POINTS 32 64

REGION main
METRIC time
DATA 3.1 3.0 2.9
DATA 5 5.1
DATA 9
DATA 17 17
DATA 33
METRIC bytes
DATA 1
DATA 1
DATA 1
DATA 1
DATA 1
"""


def test_reads_points_repetitions_and_metrics(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(ONE_PARAM)
    df = read_extrap_text(path)
    assert df.attrs["params"] == ["p"]
    time = df[df.metric == "time"]
    assert time.groupby("p").size().to_dict() == {4.0: 3, 8.0: 2, 16.0: 1, 32.0: 2, 64.0: 1}
    assert time[time.p == 4].value.tolist() == [3.1, 3.0, 2.9]
    assert (df[df.metric == "bytes"].value == 1).all() and set(df.region) == {"main"}


def test_models_a_file_end_to_end(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(ONE_PARAM)
    table = model_extrap_text(path).set_index("metric")
    assert table.loc["time", "growth"] == "O(p)"
    assert table.loc["bytes", "formula"] == "1"


def test_round_trip_two_parameters(tmp_path):
    rng = np.random.default_rng(0)
    X = np.array([[p, n] for p in (4.0, 8, 16, 32, 64) for n in (10.0, 20, 40, 80, 160)])
    frames = [
        pd.DataFrame(np.repeat(X, 2, axis=0), columns=["p", "n"]).assign(
            region=f"kernel {r}", metric="time", value=rng.uniform(1, 2, 50)
        )
        for r in range(3)
    ]
    df = pd.concat(frames, ignore_index=True)
    path = tmp_path / "two.txt"
    write_extrap_text(path, df, ["p", "n"])
    back = read_extrap_text(path)
    assert back.attrs["params"] == ["p", "n"]
    key = ["region", "p", "n"]
    a = df.sort_values(key + ["value"]).value.to_numpy()
    b = back.sort_values(key + ["value"]).value.to_numpy()
    assert np.array_equal(a, b) and sorted(back.region.unique()) == ["kernel 0", "kernel 1", "kernel 2"]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("PARAMETER p\nPOINTS 4 8\nREGION r\nDATA 1\nDATA 2\nDATA 3\n", "line 6: more DATA lines than the 2 POINTS"),
        ("PARAMETER p\nPOINTS 4 8\nDATA 1 x\n", "line 3: not a number"),
        ("PARAMETER p\nPOINTS 4 8\nFOO 1\n", "line 3: unknown field 'FOO'"),
        ("PARAMETER p q\nPOINTS 4 8\n", "line 2: 2 parameters need points written as (a b ...)"),
        ("PARAMETER p q\nPOINTS (4 8) (1)\n", "line 2: point (1.0,) does not have 2 coordinates"),
        ("", "no PARAMETER or no DATA lines"),
    ],
)
def test_bad_files_name_the_line(tmp_path, text, problem):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_extrap_text(path)
    assert str(err.value).startswith(str(path)) and problem in str(err.value)


def test_binary_file_is_an_input_error(tmp_path):
    path = tmp_path / "bin.txt"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="cannot read"):
        read_extrap_text(path)


def test_user_names_never_meet_internal_columns(tmp_path):
    """Parameters named like the frame's own columns (value, rep) or a modeler's (x, y), a region
    named value and a metric named p: read, modeled and predicted like any other names."""
    grid = [(v, r, x) for v in (1.0, 2, 4, 8, 16) for r in (1.0, 2, 4, 8, 16) for x in (1.0, 2, 4, 8, 16)]
    X = np.array(grid)
    truth = 5 + 2 * X[:, 0] + 3 * np.log2(X[:, 1]) + 0.5 * X[:, 2] ** 2
    points = " ".join(f"({v:g} {r:g} {x:g})" for v, r, x in grid)
    lines = ["PARAMETER value rep", "PARAMETER\tx", f"POINTS {points}", "REGION value", "METRIC p"]
    path = tmp_path / "names.txt"
    path.write_text("\n".join(lines + [f"DATA {float(y)!r}" for y in truth]) + "\n")
    df = read_extrap_text(path)
    assert df.attrs["params"] == ["parameter value", "parameter rep", "x"]
    assert df.attrs["names"] == {"parameter value": "value", "parameter rep": "rep"}
    assert (df["region"] == "value").all() and (df["metric"] == "p").all() and df["rep"].eq(0).all()
    row = model_extrap_text(path).iloc[0]
    assert "value" in row["formula"] and "rep" in row["formula"] and "parameter" not in row["formula"]
    np.testing.assert_allclose(row["model"].predict(np.array([[32.0, 32.0, 32.0]])), 5 + 64 + 15 + 512, rtol=1e-6)
    again = tmp_path / "again.txt"
    write_extrap_text(again, df, df.attrs["params"])
    assert read_extrap_text(again).equals(df)


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            "PARAMETER p\nPOINTS 1 2 4\nPOINTS 2\nREGION r\nDATA 1\nDATA 2\nDATA 3\nDATA 4\n",
            "line 3: point (2) is listed twice (first on line 2)",
        ),
        (
            "PARAMETER p\nPOINTS 1 2 4 8 16\nREGION r\nDATA 1\nDATA 2\n",
            "region 'r' metric '' (DATA from line 4): 2 DATA line(s) for 5 POINTS",
        ),
        (
            "PARAMETER a b c\nPARAMETER d e\nPOINTS (1 1 1 1 1)\n",
            "line 2: 5 parameters; Extra-P's text format has 1 to 4",
        ),
    ],
)
def test_ambiguous_files_are_refused_with_the_line(tmp_path, text, problem):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_extrap_text(path)
    assert str(err.value).startswith(str(path)) and problem in str(err.value)


def test_values_beyond_the_float_range_get_a_reason_not_a_warning(tmp_path, recwarn):
    p = np.array([1.0, 2, 4, 8, 16])
    frames = [
        pd.DataFrame({"p": p, "value": 1e307 * p / 2, "region": "huge", "metric": "time"}),
        pd.DataFrame({"p": p, "value": 1 + p, "region": "fine", "metric": "time"}),
    ]
    path = tmp_path / "huge.txt"
    write_extrap_text(path, pd.concat(frames), ["p"])
    table = model_extrap_text(path).set_index("region")
    assert table.loc["huge", "model"] is None and "overflow" in table.loc["huge", "reason"]
    np.testing.assert_allclose(table.loc["fine", "model"].predict(np.array([32.0])), 33.0, rtol=1e-9)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
