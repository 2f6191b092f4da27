"""Layout tables as input: the published CSVs read as they are, every row checked against the raw
file, inputs untouched, and one line naming the file and row for each kind of bad table."""

from __future__ import annotations

import csv
import hashlib

import numpy as np
import pandas as pd
import pytest

from extradeep.columns import METRIC, PART, STEP_TIME, VALUE
from extradeep.errors import InputError
from extradeep.layouts.tables import check_part_observations, read_layout_table


def _raw_rows(path) -> list[list[str]]:
    """Data rows of a published CSV by the standard library: lines that do not start with '#'."""
    with open(path, newline="") as handle:
        return [r for r in csv.reader(handle) if r and not r[0].startswith("#")]


def test_vtrain_tables_read_row_for_row(published):
    for name, first_time in (("vtrain_single_node.csv", 10), ("vtrain_multi_node.csv", 11)):
        path = published(name)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        table = read_layout_table(path)
        raw = _raw_rows(path)
        if name == "vtrain_multi_node.csv":
            raw = raw[1:]  # its header does not start with '#'
        assert len(table) == len(raw)
        assert np.allclose(table[STEP_TIME] * 1e3, [float(r[first_time]) for r in raw])
        assert (table["gpus"] == table["tp"] * table["pp"] * table["dp"]).all()
        assert (table["global_batch"] == table["dp"] * table["micro_batch"] * table["micro_batches"]).all()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # read-only


def test_megatron_table_turns_teraflops_into_step_times(published):
    """Step times from the achieved teraFLOP/s give back the table's own percentage of the A100's peak."""
    path = published("megatron_sc21_table1.csv")
    table = read_layout_table(path, defaults={"micro_batch": 1, "seq_len": 2048})
    raw = pd.read_csv(path, comment="#")
    b, s, layers, h, v = (
        raw["batch"].astype(float),
        2048.0,
        raw["layers"].astype(float),
        raw["hidden"].astype(float),
        51200.0,
    )
    flops = 96 * b * s * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h))
    achieved = flops / (table[STEP_TIME].to_numpy() * raw["gpus"]) / 1e12
    assert np.allclose(achieved, raw["tflops_per_gpu"])
    assert np.allclose(100 * achieved / 312, raw["pct_peak"], atol=0.6)  # the table rounds to whole percent


HEADER = (
    "gpus,global batch,micro batch,hidden size,attention heads,# layers,sequence length,tp,dp,pp,iteration time (ms)\n"
)


@pytest.mark.parametrize(
    "body,problem",
    [
        ("8,32,4,1024,16,24,1024,2,2,2,219.7\n8,32,4,1024,16,24,1024,2,2\n", "row 2 has 9 fields, the header 11"),
        ("8,32,4,1024,16,24,1024,2,2,2,fast\n", "row 1: time_ms must be a number > 0"),
        ("8,32,4,1024,16,24,1024,2,2,2,-3\n", "row 1: time_ms must be a number > 0"),
        ("16,32,4,1024,16,24,1024,2,2,2,219.7\n", "row 1: gpus is not tp x pp x dp"),
        ("8,30,4,1024,16,24,1024,2,2,2,219.7\n", "micro_batches must be a whole number"),
        ("8,32,4,1024,16,24,1024,3,1,2,219.7\n", "gpus is not tp x pp x dp|tp does not divide"),
        ("", "no rows under the header"),
    ],
)
def test_bad_tables_get_one_line(tmp_path, body, problem):
    path = tmp_path / "runs.csv"
    path.write_text(HEADER + body)
    with pytest.raises(InputError, match=problem) as info:
        read_layout_table(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_tables_without_header_or_value_are_refused(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match="no header naming the layout's columns"):
        read_layout_table(path)
    path.write_text(HEADER.replace(",iteration time (ms)", "") + "8,32,4,1024,16,24,1024,2,2,2\n")
    with pytest.raises(InputError, match="no measured value"):
        read_layout_table(path)
    with pytest.raises(InputError, match="cannot read the layout table"):
        read_layout_table(tmp_path / "absent.csv")


def test_part_observations_are_checked(vtrain):
    layouts = vtrain[1].head(2).drop(columns=[STEP_TIME])
    rows = pd.concat(
        [
            layouts.assign(**{PART: "compute", METRIC: "time", VALUE: 1.0}),
            layouts.assign(**{PART: "memory", METRIC: "bytes", VALUE: 3e10}),
        ]
    )
    assert len(check_part_observations(rows)) == 4
    with pytest.raises(InputError, match="unknown part"):
        check_part_observations(rows.assign(**{PART: "kernels"}))
    with pytest.raises(InputError, match="memory is in bytes"):
        check_part_observations(rows.assign(**{METRIC: "time"}))
    with pytest.raises(InputError, match="finite and >= 0"):
        check_part_observations(rows.assign(**{VALUE: -1.0}))


def _edited_copy(published, tmp_path, edit):
    """A copy of vTrain's published multi-node table with ``edit(header, rows) -> (header, rows)`` applied."""
    with open(published("vtrain_multi_node.csv"), newline="") as handle:
        header, *rows = list(csv.reader(handle))
    header, rows = edit(header, rows)
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    return path


def test_a_field_given_by_two_columns_is_one_line(published, tmp_path):
    """A second tensor-parallel column ('tp' beside 'tensor parallelism') once reached pandas as a
    frame where a column was expected, and the command ended in a traceback."""

    def add_tp(header, rows):
        column = header.index("tensor parallelism")
        return [*header, "tp"], [[*row, row[column]] for row in rows]

    path = _edited_copy(published, tmp_path, add_tp)
    with pytest.raises(InputError, match="columns 'tensor parallelism' and 'tp' both give tp") as info:
        read_layout_table(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("value,shown", [("1e30", "got 1e+30"), ("1.5", "got 1.5")])
def test_a_gpu_count_beyond_any_cluster_or_fractional_is_named_as_written(published, tmp_path, value, shown):
    """1e30 GPUs once wrapped around in a 64-bit cast (and was reported as 'gpus is not tp x pp x dp');
    a fractional count was shown as np.float64(1.5)."""

    def set_gpus(header, rows):
        column = header.index("# GPUs")
        return header, [[value if i == column else cell for i, cell in enumerate(rows[0])], *rows[1:]]

    with pytest.raises(InputError) as info:
        read_layout_table(_edited_copy(published, tmp_path, set_gpus))
    message = str(info.value)
    assert "row 1: gpus must be a whole number from 1 to 2147483647" in message and shown in message
    assert "np." not in message


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_table_saved_as_utf16_says_so(published, tmp_path, encoding):
    """A table saved as UTF-16 (as some Windows tools do) was refused as '(UnicodeDecodeError)'."""
    path = tmp_path / "vtrain.csv"
    text = published("vtrain_multi_node.csv").read_text()
    path.write_bytes(("\ufeff" if encoding == "utf-16-be" else "").encode(encoding) + text.encode(encoding))
    with pytest.raises(InputError) as info:
        read_layout_table(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "not UTF-8 text" in message and "it looks like UTF-16" in message
