"""A subfolder with its own extradeep.toml is a separate study: reading its parent leaves it out and
says so in a note, not as a problem."""

from __future__ import annotations

import shutil
from pathlib import Path

from extradeep.aggregate.ingest import discover_runs
from extradeep.io.discover import find_exports, runs_from_names

REPO = Path(__file__).resolve().parents[2]


def test_nested_study_is_left_out_of_its_parent(tmp_path):
    samples = sorted((REPO / "sample_profiles").glob("cifar10.p2.r1.*.sqlite"))
    nested = sorted((REPO / "sample_profiles" / "layouts" / "profiles").glob("*.p2.*.json.gz"))
    assert samples and nested
    for path in samples:
        shutil.copy(path, tmp_path / path.name)
    study = tmp_path / "layouts"
    study.mkdir()
    for path in nested:
        shutil.copy(path, study / path.name)
    # without its own settings file the nested traces are part of the parent ...
    found, problems = find_exports(tmp_path)
    assert len(found) == len(samples) + len(nested) and not problems
    # ... with one, they are a study of their own, read only when given on their own
    (study / "extradeep.toml").write_text("# another study\n")
    line = f"{study}: left out, a separate study (it has its own extradeep.toml); give that folder on its own"
    notes = []
    found, problems = find_exports(tmp_path, notes)
    assert sorted(found) == sorted(p.resolve() for p in tmp_path.glob("*.sqlite"))
    assert not problems and notes == [line]
    assert find_exports(tmp_path)[1] == [line]  # a caller that keeps no notes still hears of it
    runs, _ = runs_from_names(study)
    assert set(runs["app"]) == {"gpt"} and len(runs) == len(nested)


def test_shipped_sample_reads_as_one_application_with_a_note_and_no_problem():
    notes = []
    runs, problems = runs_from_names(REPO / "sample_profiles", notes=notes)
    assert set(runs["app"]) == {"cifar10"} and len(runs) == 116
    assert not problems
    assert notes == [
        f"{REPO / 'sample_profiles' / 'layouts' / 'profiles'}: left out, a separate study (it has its own "
        "extradeep.toml); give that folder on its own"
    ]
    found = discover_runs(REPO / "sample_profiles", ["ranks"])
    assert not found.problems and found.notes == notes
