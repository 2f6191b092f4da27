import gzip

import pandas as pd
import pytest

from extradeep.errors import InputError
from extradeep.io.discover import (
    discover,
    drop_conflicts,
    missing_ranks,
    parse_aliases,
    parse_name,
    read_manifest,
    runs_from_names,
)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("app.p4.b32.r2.mpi3.sqlite", {"app": "app", "ranks": 4, "b": 32, "rep": 2, "rank": 3}),
        ("cifar10.p4.r1.mpi0.sqlite", {"app": "cifar10", "ranks": 4, "rep": 1, "rank": 0}),
        ("m.lr0.5.p8.r1.mpi7.sqlite", {"app": "m", "lr": 0.5, "ranks": 8, "rep": 1, "rank": 7}),
        ("m.rate0.1.res32.r3.mpi1.sqlite", {"app": "m", "rate": 0.1, "res": 32, "rep": 3, "rank": 1}),
        ("m.batch_size64.p2.sqlite", {"app": "m", "batch_size": 64, "ranks": 2, "rep": 1, "rank": 0}),
        ("m.lr1e-3.p2.r1.mpi0.sqlite", {"app": "m", "lr": 0.001, "ranks": 2, "rep": 1, "rank": 0}),
        ("report1.sqlite", {"app": "report1", "rep": 1, "rank": 0}),
    ],
)
def test_parse_name_reads_parameters_repetition_and_rank(name, expected):
    assert parse_name(name) == expected


def test_parameter_starting_with_r_is_not_the_repetition():
    parsed = parse_name("m.r2.rate0.25.rr7.mpi1.sqlite")
    assert parsed["rep"] == 2 and parsed["rate"] == 0.25 and parsed["rr"] == 7


@pytest.mark.parametrize("name", ["a.p4.extra.r1.mpi0.sqlite", "a.p4.r1.5.mpi0.sqlite", "a.p4.p8.sqlite", ".p4.sqlite"])
def test_bad_names_give_one_line_naming_the_file(name):
    with pytest.raises(InputError) as info:
        parse_name(name)
    text = str(info.value)
    assert "\n" not in text and text.startswith(name)


def test_user_aliases_rename_tokens_and_keep_defaults():
    aliases = parse_aliases(["b=batch", "n=nodes"])
    assert parse_name("a.p4.b16.n2.r1.mpi0.sqlite", aliases) == {
        "app": "a",
        "ranks": 4,
        "batch": 16,
        "nodes": 2,
        "rep": 1,
        "rank": 0,
    }
    with pytest.raises(InputError):
        parse_aliases(["nonsense"])


def _touch(path, content=b""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content or path.name.encode())
    return path


def test_directory_search_is_recursive_and_reports_unparsable_names(tmp_path):
    for ranks in (2, 4):
        for rank in range(ranks):
            _touch(tmp_path / f"p{ranks}" / f"app.p{ranks}.r1.mpi{rank}.sqlite")
    _touch(tmp_path / "deep" / "er" / "app.p2.r2.mpi0.sqlite")
    _touch(tmp_path / "notes.txt")
    _touch(tmp_path / "app.p2.oops.sqlite")
    _touch(tmp_path / "orphan.nsys-rep")
    runs, problems = runs_from_names(tmp_path)
    assert len(runs) == 7
    assert sorted(runs["ranks"].unique()) == [2, 4]
    assert (runs["size"] > 0).all()
    assert any("app.p2.oops.sqlite" in p and "convention" in p for p in problems)
    assert any(".nsys-rep" in p and "nsys export" in p for p in problems)


def test_missing_rank_file_is_reported_per_point(tmp_path):
    for rank in (0, 1, 3):
        _touch(tmp_path / f"app.p4.r1.mpi{rank}.sqlite")
    for rank in (0, 1):
        _touch(tmp_path / f"app.p2.r1.mpi{rank}.sqlite")
    runs, _ = runs_from_names(tmp_path)
    problems = missing_ranks(runs)
    assert len(problems) == 1
    assert "ranks=4" in problems[0] and "3 of 4" in problems[0] and "mpi2" in problems[0]


def test_duplicate_content_is_detected_and_dropped(tmp_path):
    _touch(tmp_path / "app.p2.r1.mpi0.sqlite", b"same bytes")
    _touch(tmp_path / "app.p2.r1.mpi1.sqlite", b"other bytes")
    _touch(tmp_path / "copy" / "app.p2.r2.mpi0.sqlite", b"same bytes")
    runs, problems = discover(tmp_path)
    assert len(runs) == 2
    dup = [p for p in problems if "same content" in p]
    assert len(dup) == 1 and "app.p2.r1.mpi0.sqlite" in dup[0]
    assert runs["sha256"].str.len().eq(64).all()


def _sqlite(path):
    """A real (empty) SQLite database: it passes the header check, so only its name tells its app."""
    import sqlite3

    with sqlite3.connect(path) as db:  # distinct content per file, so none is a duplicate
        db.execute("CREATE TABLE t (name)")
        db.execute("INSERT INTO t VALUES (?)", (path.name,))
    db.close()
    return path


def test_mixed_apps_are_refused_with_both_names(tmp_path):
    _sqlite(tmp_path / "alpha.p2.r1.mpi0.sqlite")
    _sqlite(tmp_path / "beta.p2.r1.mpi0.sqlite")
    with pytest.raises(InputError, match="mix applications") as info:
        discover(tmp_path)
    assert "alpha" in str(info.value) and "beta" in str(info.value)
    assert "--" not in str(info.value)  # core messages name no command-line flags


def test_a_stray_bad_file_is_skipped_not_taken_for_another_application(tmp_path):
    good = [_sqlite(tmp_path / f"alpha.b{b}.r1.mpi0.sqlite") for b in (2, 4)]
    _touch(tmp_path / "broken.sqlite", b"not sqlite at all")
    runs, problems = discover(tmp_path)
    assert sorted(runs["path"]) == sorted(str(p) for p in good)
    assert len(problems) == 1 and "broken.sqlite: not an SQLite database" in problems[0]


def test_two_files_claiming_one_rank_keep_the_first_and_report(tmp_path):
    runs = pd.DataFrame({"path": ["a", "b"], "app": ["x", "x"], "ranks": [2, 2], "rank": [0, 0], "rep": [1, 1]})
    kept, problems = drop_conflicts(runs)
    assert kept["path"].tolist() == ["a"] and len(problems) == 1 and problems[0].startswith("b:")


def test_csv_manifest_with_relative_paths_and_aliases(tmp_path):
    for name in ("one.sqlite", "two.sqlite"):
        _touch(tmp_path / "data" / name)
    (tmp_path / "runs.csv").write_text("path,p,lr,rank,rep\ndata/one.sqlite,4,0.5,0,1\ndata/two.sqlite,4,0.5,1,1\n")
    runs = read_manifest(tmp_path / "runs.csv")
    assert runs["path"].tolist() == [str(tmp_path / "data" / n) for n in ("one.sqlite", "two.sqlite")]
    assert runs["ranks"].tolist() == [4, 4] and runs["lr"].tolist() == [0.5, 0.5]
    assert runs["rank"].tolist() == [0, 1] and (runs["size"] > 0).all()


def test_toml_manifest_with_params_table(tmp_path):
    _touch(tmp_path / "x.sqlite")
    (tmp_path / "m.toml").write_text(
        '[[run]]\npath = "x.sqlite"\nrank = 2\nrep = 3\nparams = {ranks = 8, batch = 64}\n'
    )
    runs = read_manifest(tmp_path / "m.toml")
    row = runs.iloc[0]
    assert (row["ranks"], row["batch"], row["rank"], row["rep"]) == (8, 64, 2, 3)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("path,p\n,4\n", "needs a path"),
        ("path,p\nx.sqlite,four\n", "not a number"),
        ("path,rank\nx.sqlite,1.5\n", "whole number"),
    ],
)
def test_bad_manifest_rows_name_the_manifest_and_row(tmp_path, text, fragment):
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(InputError) as info:
        read_manifest(tmp_path / "m.csv")
    assert fragment in str(info.value) and "m.csv" in str(info.value)


def test_invalid_toml_manifest_is_one_line(tmp_path):
    (tmp_path / "m.toml").write_text("[[run]\npath=")
    with pytest.raises(InputError) as info:
        read_manifest(tmp_path / "m.toml")
    assert "not valid TOML" in str(info.value)


def test_nothing_usable_raises(tmp_path):
    with pytest.raises(InputError) as info:
        discover(tmp_path / "absent")
    assert "no usable exports" in str(info.value)


def test_parameter_names_that_clash_with_table_columns_are_refused(tmp_path):
    _touch(tmp_path / "app.p2.step100.r1.mpi0.sqlite")
    with pytest.raises(InputError, match="reserved.*--alias step=n_step"):
        discover(tmp_path)
    runs, _ = discover(tmp_path, aliases=["step=steps"])
    assert runs["steps"].tolist() == [100]


def test_bad_manifest_rows_are_skipped_with_their_line_and_the_rest_is_used(tmp_path):
    from extradeep.io.discover import manifest_runs

    for name in ("a.sqlite", "b.sqlite", "c.sqlite", "d.sqlite"):
        _touch(tmp_path / name)
    (tmp_path / "m.csv").write_text("path,ranks,rank\na.sqlite,2,0\nb.sqlite,abc,0\nc.sqlite,2\nd.sqlite,2,1\n")
    runs, problems = manifest_runs(tmp_path / "m.csv")
    assert runs["path"].tolist() == [str(tmp_path / "a.sqlite"), str(tmp_path / "d.sqlite")]
    assert problems == [
        f"{tmp_path / 'm.csv'} (line 3): value of 'ranks' is not a number: 'abc'; skipped",
        f"{tmp_path / 'm.csv'} (line 4): no value for 'rank'; skipped",
    ]
    found, listed = discover(manifest=tmp_path / "m.csv")
    assert len(found) == 2 and listed[:2] == problems


def test_toml_manifest_rows_are_numbered_by_run(tmp_path):
    from extradeep.io.discover import manifest_runs

    _touch(tmp_path / "x.sqlite")
    (tmp_path / "m.toml").write_text(
        '[[run]]\npath = "x.sqlite"\nranks = 2\n[[run]]\npath = "y.sqlite"\nranks = "abc"\n'
    )
    runs, problems = manifest_runs(tmp_path / "m.toml")
    assert len(runs) == 1 and problems[0].startswith(f"{tmp_path / 'm.toml'} (run 2): value of 'ranks'")


def test_point_label_without_an_app_has_no_blank(tmp_path):
    runs = pd.DataFrame({"path": ["a"], "app": [""], "ranks": [4], "rank": [0], "rep": [1]})
    assert missing_ranks(runs) == [
        "ranks=4 rep=1: 1 of 4 rank files (missing mpi1, mpi2, mpi3); using the ranks present"
    ]


def _shipped_trace():
    from shared_data import REPO

    return sorted((REPO / "sample_profiles" / "layouts" / "profiles").glob("*.pt.trace.json.gz"))[0]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",  # a copy interrupted before its first byte
        lambda data: data[10:],  # its gzip header lost: neither gzip nor JSON
        lambda data: gzip.compress(b"<html>proxy error</html>"),  # a download that fetched an error page
    ],
)
def test_a_damaged_file_named_like_a_pytorch_trace_is_read_and_named_not_passed_over(tmp_path, damage):
    """Such files were once left out of a folder without a word (their first bytes hold no trace key),
    so a study read one run fewer, or 'found no profiles' among fifteen damaged traces."""
    from extradeep.io.discover import find_exports
    from extradeep.io.parallel import profile_facts

    source = _shipped_trace()
    good, bad = tmp_path / source.name, tmp_path / source.name.replace(".r1.", ".r2.")
    good.write_bytes(source.read_bytes())
    bad.write_bytes(damage(source.read_bytes()))
    found, problems = find_exports([tmp_path])
    assert found == sorted([good.resolve(), bad.resolve()]) and problems == []
    with pytest.raises(InputError) as info:
        profile_facts(str(bad))
    assert str(bad) in str(info.value) and "\n" not in str(info.value)


def test_a_binary_or_nul_holding_csv_manifest_is_one_line(tmp_path):
    """A binary file given as the manifest once ended in a UnicodeDecodeError traceback, and a path
    with a NUL byte in a ValueError one."""
    binary = tmp_path / "runs.csv"
    binary.write_bytes(_shipped_trace().read_bytes())
    with pytest.raises(InputError, match="not UTF-8 text") as info:
        read_manifest(binary)
    assert str(binary) in str(info.value)
    nul = tmp_path / "nul.csv"
    nul.write_text("path,rank\nruns/a\0b.sqlite,0\n")
    with pytest.raises(InputError, match="holds a NUL byte") as info:
        read_manifest(nul)
    assert str(nul) in str(info.value) and "line 2" in str(info.value)
