"""Opening exports: strictly read-only, and one clear InputError per kind of bad file."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from extradeep.errors import InputError
from extradeep.io.nsys import events, fetch
from extradeep.io.nsys.read import read_export
from extradeep.io.sqlite import open_readonly


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def one_line_error(excinfo, path) -> str:
    text = str(excinfo.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    return text


def test_connection_refuses_writes_and_leaves_file_identical(sim_ranges):
    path = sorted(sim_ranges.glob("*.sqlite"))[0]
    before = sha256(path)
    conn = open_readonly(path)
    with pytest.raises(sqlite3.Error):
        conn.execute("CREATE TABLE extradeep_probe (x)")
    with pytest.raises(sqlite3.Error):
        conn.execute("CREATE INDEX probe ON CUPTI_ACTIVITY_KIND_KERNEL(start)")
    with pytest.raises(sqlite3.Error):
        conn.execute("DELETE FROM StringIds")
    conn.close()
    read_export(path)
    assert sha256(path) == before
    assert not list(path.parent.glob(path.name + "-*")), "no journal or WAL files beside the export"


def test_empty_file(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    with pytest.raises(InputError) as excinfo:
        open_readonly(path)
    assert "empty" in one_line_error(excinfo, path)


def test_text_file_named_sqlite(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("epoch 1: loss 0.3\n" * 50)
    with pytest.raises(InputError) as excinfo:
        read_export(path)
    assert "not an SQLite database" in one_line_error(excinfo, path)


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_file(tmp_path, sim_ranges, keep):
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    data = src.read_bytes()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(InputError) as excinfo:
        read_export(path)
    assert "truncated" in one_line_error(excinfo, path)


def test_damaged_pages_become_input_error(tmp_path, sim_ranges):
    """A file whose header is intact but whose pages are garbage: reading fails with one line."""
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    data = bytearray(src.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)  # every page after the first overwritten
    path = tmp_path / "garbled.sqlite"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as excinfo:
        read_export(path)
    one_line_error(excinfo, path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="not found"):
        open_readonly(tmp_path / "nope.sqlite")
    with pytest.raises(InputError, match="not a file"):
        open_readonly(tmp_path)


def test_missing_string_ids(tmp_path, sim_ranges, altered_copy):
    path = altered_copy(sorted(sim_ranges.glob("*.sqlite"))[0], tmp_path, "DROP TABLE StringIds")
    with pytest.raises(InputError) as excinfo:
        read_export(path)
    assert "StringIds" in one_line_error(excinfo, path)


def test_negative_durations_name_table_and_count(tmp_path, sim_ranges, altered_copy):
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    path = altered_copy(
        src,
        tmp_path,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1000 WHERE rowid IN "
        "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 3)",
    )
    with pytest.raises(InputError) as excinfo:
        read_export(path)
    text = one_line_error(excinfo, path)
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in text and "3 events" in text and "negative" in text


def test_non_utf8_names_are_escaped_and_reported(tmp_path, sim_ranges, altered_copy):
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    conn = open_readonly(src)
    kernels = events.kernels(conn)
    conn.close()
    target = kernels["name"].value_counts().index[0]
    path = altered_copy(
        src,
        tmp_path,
        f"UPDATE StringIds SET value = CAST(X'6b65726e656cff' AS TEXT) WHERE value = '{target}'",
    )
    clean = read_export(src)
    dirty = read_export(path)
    assert any("not valid UTF-8" in note for note in dirty.attrs["notes"])
    assert "kernel\\xff" in set(dirty["region"])
    assert target not in set(dirty["region"])
    # Only the name changed: the values behind it are the same.
    renamed = clean.assign(region=clean["region"].replace({target: "kernel\\xff"}))
    key = ["region", "kind", "metric", "epoch", "phase", "step"]
    a = renamed.sort_values(key).reset_index(drop=True)
    b = dirty.sort_values(key).reset_index(drop=True)
    assert a[key].equals(b[key])
    assert (a["value"] - b["value"]).abs().max() == 0


def test_names_missing_from_string_ids_are_named_and_reported(tmp_path, sim_ranges, altered_copy, sql):
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    name_id, name, n = sql(
        src,
        "SELECT k.shortName, s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName GROUP BY k.shortName ORDER BY 3 DESC LIMIT 1",
    )[0]
    path = altered_copy(src, tmp_path, f"DELETE FROM StringIds WHERE id = {name_id}")
    clean, dirty = read_export(src), read_export(path)
    placeholder = f"<unknown name id {name_id}>"
    assert placeholder in set(dirty["region"]) and name not in set(dirty["region"])
    assert any(f"{n} events name string ids missing" in note for note in dirty.attrs["notes"])
    moved = clean.loc[clean["region"] == name, "value"].sum()
    assert dirty.loc[dirty["region"] == placeholder, "value"].sum() == pytest.approx(moved)


def test_odd_characters_in_the_path(tmp_path, sim_ranges):
    src = sorted(sim_ranges.glob("*.sqlite"))[0]
    odd = tmp_path / "run #1 50% done?" / "rank 0 [a].sqlite"
    odd.parent.mkdir()
    odd.write_bytes(src.read_bytes())
    assert read_export(odd).equals(read_export(src))


def test_chunked_reads_stay_aligned(sim_ranges, monkeypatch):
    """Tables read in many rowid chunks give exactly the single-chunk result."""
    path = sorted(sim_ranges.glob("*.sqlite"))[0]
    whole = read_export(path)
    monkeypatch.setattr(fetch, "CHUNK_ROWS", 7)
    assert read_export(path).equals(whole)
