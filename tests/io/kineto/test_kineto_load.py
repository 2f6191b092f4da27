"""Loading Kineto traces: damaged files give one line, timestamps stay exact, folders find traces."""

from __future__ import annotations

import gzip
import json
import shutil
from decimal import Decimal

import numpy as np
import pytest

from extradeep.errors import InputError
from extradeep.io.discover import find_exports
from extradeep.io.formats import KINETO, NSYS, profile_format
from extradeep.io.kineto.load import load
from extradeep.io.read import read_profile

SMALL = "HTA__amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def _one_line(exc: InputError, path) -> str:
    text = str(exc)
    assert "\n" not in text and text.startswith(str(path))
    return text


@pytest.mark.parametrize("cut", [0.5, 0.97])
def test_truncated_json_is_one_line(real_kineto, tmp_path, cut):
    data = gzip.decompress(real_kineto(SMALL).read_bytes())
    path = tmp_path / "cut.pt.trace.json"
    path.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(InputError) as info:
        read_profile(path)
    assert "not valid JSON" in _one_line(info.value, path)


def test_truncated_gzip_is_one_line(real_kineto, tmp_path):
    raw = real_kineto(SMALL).read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError) as info:
        read_profile(path)
    assert "gzip" in _one_line(info.value, path)


def test_json_that_is_no_trace(real_kineto, tmp_path):
    doc = json.loads(gzip.decompress(real_kineto(SMALL).read_bytes()))
    path = tmp_path / "props.json"
    path.write_text(json.dumps({"deviceProperties": doc["deviceProperties"]}))
    with pytest.raises(InputError) as info:
        read_profile(path)
    assert "traceEvents" in _one_line(info.value, path)


def test_format_by_content_not_name(real_kineto, real_nsys_dir, tmp_path):
    renamed = tmp_path / "trace.sqlite"  # a Kineto trace under an nsys name is still read as Kineto
    shutil.copy(real_kineto(SMALL), renamed)
    assert profile_format(renamed) == KINETO
    export = next(real_nsys_dir.glob("*.sqlite"))
    assert profile_format(export) == NSYS


def test_fractional_epoch_timestamps_keep_nanoseconds(real_kineto, plain_json):
    """Unix-epoch microseconds with three decimals exceed float64's ns resolution; the loader reads
    them from the text: every kernel start equals the exact decimal value x 1000."""
    path = real_kineto("HTA__ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    exact = sorted(
        int(Decimal(e["ts"]) * 1000)
        for e in plain_json(path)["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "kernel"
    )
    starts = np.sort(load(path).gpu.query("kind == 'kernel'")["start"].to_numpy())
    assert exact[0] % 1000 != 0  # the trace really has sub-microsecond digits
    np.testing.assert_array_equal(starts, exact)


def test_integers_beyond_64_bits(real_kineto, tmp_path):
    """An argument value beyond 64 bits (a hash, an id) must not stop the read."""
    doc = json.loads(gzip.decompress(real_kineto(SMALL).read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e.setdefault("args", {})["External id"] = 2**70 + 1
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    assert len(load(path).gpu) == len(load(real_kineto(SMALL)).gpu)


def test_folder_finds_traces_but_not_other_json(real_kineto, tmp_path):
    shutil.copy(real_kineto(SMALL), tmp_path / "app.p1.r1.mpi0.pt.trace.json.gz")
    (tmp_path / "truth.json").write_text(json.dumps({"format": "extradeep-simulator-truth/1"}))
    found, problems = find_exports(tmp_path)
    assert [p.name for p in found] == ["app.p1.r1.mpi0.pt.trace.json.gz"] and not problems


def test_parsing_in_pieces_gives_the_whole_parse(real_kineto, monkeypatch, tmp_path):
    """Large files are parsed piece by piece (bounded memory); the result is the whole-document one,
    and a truncated large file still gives one line."""
    from extradeep.io.kineto import load as loader

    path = real_kineto("HTA__ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    whole = load(path)
    monkeypatch.setattr(loader, "CHUNK_BYTES", 1 << 20)
    assert len(loader._pieces(loader.read_bytes(path))) > 5
    pieces = load(path)
    for frame in ("gpu", "runtime", "cpu", "syncs", "gpu_annotations"):
        assert getattr(pieces, frame).equals(getattr(whole, frame))
    assert pieces.counts == whole.counts and pieces.meta == whole.meta
    cut = tmp_path / "cut.json"
    data = loader.read_bytes(path)
    cut.write_bytes(data[: len(data) - 5000])
    with pytest.raises(InputError) as info:
        load(cut)
    assert "not valid JSON" in _one_line(info.value, cut)
