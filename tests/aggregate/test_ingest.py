"""Ingest end to end on simulator output: truth within the noise, read-only inputs, bad files in a
batch, the per-file cache, parallel reading, and the shared CLI reading options."""

import argparse
import io
import os
import shutil

import pandas as pd
import pytest

from extradeep import load_experiment
from extradeep.aggregate.experiment import Dataset
from extradeep.cli.common import add_reading_arguments, experiment_from_args
from extradeep.errors import InputError
from extradeep.io.discover import file_sha256
from extradeep.io.execute import Progress
from extradeep.simulate import simulate

VARIANTS = {  # (simulator options, ranks, repetitions): small, but every convention and layout
    "ranges-2026-strong": (
        dict(marks="ranges", layout="2026", scaling="strong", nvtx_strings="text"),
        [1, 2, 3, 4, 5],
        2,
    ),
    "marks-2022-weak": (dict(marks="marks", layout="2022", scaling="weak", nvtx_strings="textId"), [1, 2, 4], 1),
    "profiler-2026-weak-noisefree": (
        dict(marks="profiler", layout="2026", scaling="weak", noise=(0.0, 0.0, 0.0)),
        [1, 2, 3],
        2,
    ),
}
# Default noise: lognormal 2 % per instance, 1 % per rank and per repetition; medians over 3 steps,
# ranks and 2 repetitions stay well inside 10 %. Without noise only integer-ns rounding remains.
NOISY_RTOL, EXACT_RTOL = 0.10, 1e-4
# A collective ends when the slowest rank arrives, so with noise a measured NCCL kernel also holds
# waiting (truth.json: "measured NCCL times sit above the pure-transfer formula"), bounded by the
# jitter of the compute before it: at most this share of the step time.
NCCL_WAIT_SHARE = 0.1


def _hashes(directory):
    return {p.name: file_sha256(p) for p in sorted(directory.glob("*.sqlite"))}


@pytest.fixture(scope="session", params=list(VARIANTS))
def simulated(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    options, ranks, reps = VARIANTS[request.param]
    sim = simulate(
        out,
        app="toy",
        params={"ranks": ranks},
        repetitions=reps,
        epochs=2,
        train_steps=3,
        val_steps=2,
        seed=11,
        **options,
    )
    before = _hashes(out)
    experiment = load_experiment(
        out, ["ranks"], jobs=1, use_cache=False, progress=False, dataset=Dataset(**sim.truth["dataset"])
    )
    rtol = EXACT_RTOL if "noisefree" in request.param else NOISY_RTOL
    return out, sim.truth, experiment, before, rtol


def _assert_close(got, want, rtol, what, wait_allowance=0.0):
    """Within rtol; NCCL kernels may exceed the truth by the waiting allowance."""
    if wait_allowance:
        assert want * (1 - rtol) <= got <= want * (1 + rtol) + wait_allowance, what
    else:
        assert got == pytest.approx(want, rel=rtol, abs=1e-12), what


def test_per_step_medians_match_truth(simulated):
    _, truth, experiment, _, rtol = simulated
    assert not experiment.problems
    points = experiment.points.set_index(["region", "kind", "phase", "metric", "ranks"])["value"]
    for point in truth["points"]:
        ranks = point["params"]["ranks"]
        allowance = NCCL_WAIT_SHARE * point["step_time"]["train"] if rtol == NOISY_RTOL else 0.0
        for row in point["per_step"]:
            key = (row["region"], row["kind"], row["phase"], row["metric"], ranks)
            # The reader emits no row for a sum that is 0 (e.g. zero-length kernels); aggregation treats absence as 0.
            assert key in points.index or row["value"] == 0, f"missing {key}"
            wait = allowance if row["region"].startswith("nccl") and row["metric"] == "time" else 0.0
            tol = rtol if row["metric"] == "time" else 1e-9
            _assert_close(points.get(key, 0.0), row["value"], tol, key, wait)
        for row in point["between_per_epoch"]:
            key = (row["region"], row["kind"], "between", row["metric"], ranks)
            _assert_close(points[key], row["value"], rtol if row["metric"] == "time" else 1e-9, key)


def test_epoch_values_match_truth(simulated):
    _, truth, experiment, _, rtol = simulated
    table = experiment.epoch_table()
    for point in truth["points"]:
        at = table[table["ranks"] == point["params"]["ranks"]]
        by_region = at[at["metric"] == "time"].set_index("region")
        assert (at["n_t"] == point["n_t"]).all() and (at["n_v"] == point["n_v"]).all()
        _assert_close(by_region.loc["step", "value"], point["epoch_time"], rtol, "epoch time")
        # Eq. 8-10 from the truth's own per-step rows: n_t * sum(train) + n_v * sum(val) per category.
        steps = {"train": point["n_t"], "val": point["n_v"]}
        for category in ("computation", "communication", "memory"):
            rows = [r for r in point["per_step"] if r["category"] == category and r["metric"] == "time"]
            want = sum(steps[r["phase"]] * r["value"] for r in rows)
            wait = NCCL_WAIT_SHARE * point["epoch_time"] if category == "communication" and rtol == NOISY_RTOL else 0.0
            _assert_close(by_region.loc[category, "value"], want, rtol, category, wait)
        if rtol == EXACT_RTOL:
            for category, seconds in point["epoch_time_by_category"].items():
                _assert_close(by_region.loc[category, "value"], seconds, rtol, category)
    step = experiment.points[experiment.points["region"] == "step"]
    assert (step["modelable"] == (len(truth["points"]) >= 5)).all()


def test_inputs_are_byte_identical_after_loading(simulated):
    directory, _, experiment, before, _ = simulated
    assert _hashes(directory) == before
    assert (
        dict(zip(experiment.provenance["path"].map(lambda p: os.path.basename(p)), experiment.provenance["sha256"]))
        == before
    )


@pytest.fixture(scope="session")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("small")
    simulate(out, app="toy", params={"ranks": [2, 3, 4]}, repetitions=1, epochs=2, train_steps=2, val_steps=1, seed=5)
    return out


def _copy(src, tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst


def test_bad_files_are_skipped_and_reported_one_line_each(small_run, tmp_path, capsys):
    run = _copy(small_run, tmp_path)
    good = (run / "toy.p3.r1.mpi2.sqlite").read_bytes()
    (run / "toy.p3.r1.mpi2.sqlite").write_bytes(good[: len(good) // 2])  # truncated
    (run / "toy.p4.r1.mpi3.sqlite").write_bytes(b"")  # empty
    (run / "toy.p4.r1.mpi9.sqlite").write_text("rank,time\n0,1.5\n")  # text named .sqlite
    (run / "toy.p2.r1.mpi1.sqlite").unlink()  # a rank file missing
    before = _hashes(run)
    args = _parser().parse_args([str(run), "--no-cache", "--jobs", "1"])
    experiment = experiment_from_args(args, progress=False)
    err = capsys.readouterr().err.splitlines()
    if (run / "extradeep.toml").exists():  # the simulator's settings file beside the exports is read
        assert err.pop(0) == f"extradeep: using settings from {run / 'extradeep.toml'}"
    problems = experiment.problems
    assert all("\n" not in p for p in problems)
    expect = {
        "toy.p3.r1.mpi2.sqlite": "truncated",
        "toy.p4.r1.mpi3.sqlite": "empty",
        "toy.p4.r1.mpi9.sqlite": "not an SQLite",
    }
    for name, fragment in expect.items():
        assert any(name in p and fragment in p for p in problems), (name, problems)
    assert any("ranks=2" in p and "1 of 2" in p and "mpi1" in p for p in problems)
    assert len(err) == len(problems) + 1 and "problem(s)" in err[-1]
    assert sorted(experiment.points["ranks"].unique()) == [2, 3, 4]
    assert len(experiment.provenance) == 9 - 3
    assert _hashes(run) == before


def test_nothing_usable_raises_with_the_problems(tmp_path, capsys):
    (tmp_path / "a.p2.r1.mpi0.sqlite").write_bytes(b"")
    (tmp_path / "a.p2.r1.mpi1.sqlite").write_text("hello")
    with pytest.raises(InputError) as info:
        load_experiment(tmp_path, use_cache=False, progress=False, jobs=1)
    assert "no usable exports among 2 file(s)" in str(info.value) and "\n" not in str(info.value)
    assert len(info.value.problems) == 2 and any("a.p2.r1.mpi1.sqlite" in p for p in info.value.problems)
    with pytest.raises(InputError) as info:
        experiment_from_args(_parser().parse_args([str(tmp_path), "--no-cache", "--jobs", "1"]), progress=False)
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [f"extradeep: warning: {info.value.problems[1]}"]  # the first is in the error line


def test_duplicate_content_and_mixed_apps(small_run, tmp_path):
    run = _copy(small_run, tmp_path)
    shutil.copy(run / "toy.p2.r1.mpi0.sqlite", run / "toy.p2.r2.mpi0.sqlite")
    experiment = load_experiment(run, use_cache=False, progress=False, jobs=1)
    assert any("toy.p2.r2.mpi0.sqlite" in p and "same content" in p for p in experiment.problems)
    assert (experiment.provenance["path"].str.endswith("toy.p2.r2.mpi0.sqlite")).sum() == 0
    shutil.copy(run / "toy.p3.r1.mpi0.sqlite", run / "other.p3.r1.mpi0.sqlite")
    with pytest.raises(InputError, match="mix applications"):
        load_experiment(run, use_cache=False, progress=False, jobs=1)


def test_cache_hit_does_not_reread_and_changes_invalidate(small_run, tmp_path, monkeypatch):
    from extradeep.io.nsys import read as nsys_read

    run = _copy(small_run, tmp_path)
    listing = sorted(os.listdir(run))
    calls = []
    real = nsys_read.read_export_once
    monkeypatch.setattr(
        nsys_read, "read_export_once", lambda path, settings, **kw: calls.append(path) or real(path, settings, **kw)
    )
    cache = tmp_path / "cache"
    first = load_experiment(run, cache_dir=cache, jobs=1, progress=False)
    assert len(calls) == 9
    second = load_experiment(run, cache_dir=cache, jobs=1, progress=False)
    assert len(calls) == 9
    pd.testing.assert_frame_equal(first.points, second.points)
    assert second.provenance["sha256"].tolist() == first.provenance["sha256"].tolist()
    target = run / "toy.p3.r1.mpi0.sqlite"
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
    load_experiment(run, cache_dir=cache, jobs=1, progress=False)
    assert calls[9:] == [str(target)]
    load_experiment(run, ["ranks"], {"warmup_epochs": 0}, cache_dir=cache, jobs=1, progress=False)
    assert len(calls) == 10 + 9  # other reader settings: other cache entries
    assert sorted(os.listdir(run)) == listing  # nothing written beside the inputs


def test_cache_is_capped_and_evicts_the_least_recently_used(small_run, tmp_path, monkeypatch):
    from extradeep.io.cache import prune_cache

    cache = tmp_path / "cache"
    load_experiment(small_run, cache_dir=cache, jobs=1, progress=False, replay=False)  # one entry per file
    entries = sorted((cache / "steps").glob("??/*.pkl"))
    sizes = {p: p.stat().st_size for p in entries}
    assert len(entries) == 9
    for age, path in enumerate(entries):  # entries[0] used longest ago
        os.utime(path, ns=(10**18 + age * 10**9,) * 2)
    keep = sum(sizes[p] for p in entries[-3:])
    assert prune_cache(cache, keep) == 6
    assert sorted((cache / "steps").glob("??/*.pkl")) == entries[-3:]
    monkeypatch.setenv("EXTRADEEP_CACHE_MAX_MB", str(2 * max(sizes.values()) / 2**20))
    load_experiment(small_run, cache_dir=cache, jobs=1, progress=False, replay=False)  # a batch prunes after reading
    left = list((cache / "steps").glob("??/*.pkl"))
    assert 1 <= len(left) <= 2 and sum(p.stat().st_size for p in left) <= 2 * max(sizes.values())
    monkeypatch.setenv("EXTRADEEP_CACHE_MAX_MB", "lots")
    with pytest.raises(InputError, match="EXTRADEEP_CACHE_MAX_MB: must be a number"):
        load_experiment(small_run, cache_dir=cache, jobs=1, progress=False)


def test_parallel_reading_equals_serial(small_run):
    serial = load_experiment(small_run, jobs=1, use_cache=False, progress=False)
    parallel = load_experiment(small_run, jobs=2, use_cache=False, progress=False)
    pd.testing.assert_frame_equal(serial.values, parallel.values)
    pd.testing.assert_frame_equal(serial.points, parallel.points)


def test_progress_callback_and_plain_lines():
    seen = []
    bar = Progress(3, lambda done, total, path: seen.append((done, total, path)))
    for name in "abc":
        bar.update(name)
    assert seen == [(1, 3, "a"), (2, 3, "b"), (3, 3, "c")]
    stream = io.StringIO()
    bar = Progress(2, None, stream=stream, every_s=0)
    bar.update("a", cached=True)
    bar.update("b")
    bar.close()
    assert stream.getvalue().splitlines() == [
        "reading exports: 1/2 files (1 from cache)",
        "reading exports: 2/2 files (1 from cache)",
    ]


def _parser():
    parser = argparse.ArgumentParser()
    add_reading_arguments(parser)
    return parser


def test_config_file_dataset_and_saved_experiment(small_run, tmp_path, capsys):
    config = tmp_path / "extradeep.toml"
    config.write_text(
        'param = "p"\ntrain-samples = 1000\nval_samples = 100\nbatch-size = 10\nno-cache = true\njobs = 1\n'
    )
    args = _parser().parse_args([str(small_run), "--config", str(config), "--val-samples", "200"])
    experiment = experiment_from_args(args, progress=False)
    assert experiment.params == ["ranks"]
    assert experiment.dataset == Dataset(1000, 200, 10.0)
    table = experiment.epoch_table()
    assert table.loc[table["ranks"] == 4, "n_t"].unique().tolist() == [1000 // 4 // 10]
    saved = tmp_path / "exp.sqlite"
    experiment.save(saved)
    again = experiment_from_args(_parser().parse_args([str(saved), "--train-samples", "2000", "--batch-size", "10"]))
    pd.testing.assert_frame_equal(again.points, experiment.points, check_dtype=False)
    assert again.dataset.train_samples == 2000


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--train-samples", "10"], "--batch-size"),
        (["--val-samples", "10"], "--train-samples"),
        ([], "PROFILES"),
        (["--train-samples", "-5", "--batch-size", "8"], "--train-samples: must be a number > 0"),
        (["--train-samples", "0", "--batch-size", "8"], "--train-samples: must be a number > 0"),
    ],
)
def test_incomplete_options_are_user_errors(argv, fragment):
    with pytest.raises(InputError, match=fragment):
        experiment_from_args(_parser().parse_args(argv))


def test_unknown_config_key_is_refused(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("train_sample = 5\n")
    with pytest.raises(InputError, match="unknown key"):
        experiment_from_args(_parser().parse_args(["x", "--config", str(config)]))


def test_unmodeled_varying_parameter_is_refused(tmp_path_factory):
    out = tmp_path_factory.mktemp("two_params")
    simulate(
        out, app="toy", params={"ranks": [1, 2], "batch": [32, 64]}, repetitions=1, epochs=2, train_steps=1, val_steps=1
    )
    with pytest.raises(InputError, match="not modeled"):
        load_experiment(out, ["ranks"], use_cache=False, progress=False, jobs=1)
    both = load_experiment(out, ["ranks", "b"], aliases=["b=batch"], use_cache=False, progress=False, jobs=1)
    assert both.params == ["ranks", "batch"] and len(both.points[["ranks", "batch"]].drop_duplicates()) == 4


def test_single_epoch_note_reaches_the_user_once(tmp_path, capsys):
    simulate(tmp_path, app="toy", params={"ranks": [1, 2]}, repetitions=1, epochs=1, train_steps=3, val_steps=2, seed=2)
    args = _parser().parse_args([str(tmp_path), "--no-cache", "--jobs", "1"])
    experiment = experiment_from_args(args, progress=False)
    notes = experiment.settings["notes"]
    names = sorted(p.name for p in tmp_path.glob("*.sqlite"))
    assert len(notes) == 1 and "only one epoch" in notes[0]
    assert notes[0].endswith(f"(in 3 files: {', '.join(names)})")  # the note names the files
    assert capsys.readouterr().err.count("only one epoch") == 1
    steps = experiment.values.query("region == 'step' and metric == 'time'").set_index("phase")["n_steps"]
    assert steps.loc["train"].eq(2).all() and steps.loc["val"].eq(1).all()  # first step of each phase dropped


def test_a_note_of_one_file_names_that_file(tmp_path):
    from extradeep.aggregate.ingest import reader_notes

    frames = {}
    for i in range(5):
        frames[str(tmp_path / f"f{i}.sqlite")] = pd.DataFrame().assign()
        frames[str(tmp_path / f"f{i}.sqlite")].attrs["notes"] = ["2 NVTX ranges have no end"] if i else ["odd names"]
    notes = reader_notes(frames)
    assert f"odd names (in {tmp_path / 'f0.sqlite'})" in notes
    assert "2 NVTX ranges have no end (in 4 files: f1.sqlite, f2.sqlite, f3.sqlite, ...)" in notes


def test_manifest_with_any_names_gives_the_same_experiment(small_run, tmp_path):
    from extradeep.io.discover import parse_name

    lines = ["path,nodes,rank,rep"]
    for i, src in enumerate(sorted(small_run.glob("*.sqlite"))):
        parsed = parse_name(src.name)
        shutil.copy(src, tmp_path / f"capture_{i}.sqlite")
        lines.append(f"capture_{i}.sqlite,{parsed['ranks']},{parsed['rank']},{parsed['rep']}")
    (tmp_path / "runs.csv").write_text("\n".join(lines) + "\n")
    by_name = load_experiment(small_run, use_cache=False, progress=False, jobs=1)
    by_manifest = load_experiment(
        manifest=tmp_path / "runs.csv", aliases=["nodes=ranks"], use_cache=False, progress=False, jobs=1
    )
    assert by_manifest.params == ["ranks"] and not by_manifest.problems
    pd.testing.assert_frame_equal(by_name.points, by_manifest.points)
