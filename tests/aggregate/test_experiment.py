"""Experiment: epoch extrapolation (paper Eq. 2-4, 6-10) and the SQLite round trip."""

import math
import sqlite3

import numpy as np
import pandas as pd
import pytest

from extradeep.aggregate.experiment import Dataset, Experiment
from extradeep.aggregate.medians import aggregate
from extradeep.errors import InputError
from extradeep.io.store import is_saved_experiment

REGIONS = [
    ("gemm", "kernel", "computation"),
    ("ncclAllReduce", "kernel", "communication"),
    ("[CUDA memcpy HtoD]", "memcpy", "memory"),
    ("cudaLaunchKernel", "cuda_api", "cuda_api"),
    ("step", "step", "step"),
]


@pytest.fixture(scope="module")
def experiment():
    rng = np.random.default_rng(3)
    rows, file_id = [], 0
    for ranks in (2, 4, 6, 8, 10):
        for rep in (1, 2):
            for rank in range(ranks):
                file_id += 1
                for phase, n_steps in (("train", 4), ("val", 2)):
                    for step in range(n_steps):
                        for region, kind, category in REGIONS:
                            if phase == "val" and region == "ncclAllReduce":
                                continue  # no gradient exchange in validation
                            rows.append(
                                (
                                    file_id,
                                    rank,
                                    rep,
                                    ranks,
                                    64,
                                    region,
                                    kind,
                                    category,
                                    "time",
                                    1,
                                    phase,
                                    step,
                                    rng.lognormal(np.log(1e-3 * ranks), 0.1),
                                )
                            )
    frame = pd.DataFrame(
        rows,
        columns=[
            "file",
            "rank",
            "rep",
            "ranks",
            "batch",
            "region",
            "kind",
            "category",
            "metric",
            "epoch",
            "phase",
            "step",
            "value",
        ],
    )
    values, points = aggregate(frame, ["ranks"], min_points=5)
    provenance = pd.DataFrame(
        {
            "path": ["/x/a.p2.r1.mpi0.sqlite"],
            "size": [10],
            "sha256": ["ab" * 32],
            "app": ["a"],
            "rank": [0],
            "rep": [1],
            "ranks": [2],
        }
    )
    settings = {"min_points": 5, "fixed_params": {"batch": 64}, "reader": {"warmup_epochs": 1}, "notes": []}
    return Experiment(["ranks"], values, points, provenance, settings, ["/x/bad.sqlite: truncated"])


@pytest.mark.parametrize("ranks, model, weak", [(4, 1, False), (6, 2, False), (8, 1, True)])
def test_steps_per_epoch_follow_eq_2_and_3(ranks, model, weak):
    ds = Dataset(50_000, 10_000, 64, model_parallel=model, weak_scaling=weak)
    n_t, n_v = ds.steps_per_epoch(pd.DataFrame({"ranks": [ranks]}))
    grow = ranks if weak else 1
    assert n_t[0] == math.floor((50_000 * grow / (ranks / model)) / 64)
    assert n_v[0] == math.floor((10_000 * grow / (ranks / model)) / 64)


def test_batch_and_gpus_may_be_parameters_or_fixed_values():
    ds = Dataset(1000, 0, "batch", gpus_param="ranks")
    n_t, _ = ds.steps_per_epoch(pd.DataFrame({"ranks": [2, 4]}), fixed={"batch": 10})
    assert n_t.tolist() == [50, 25]
    with pytest.raises(InputError, match="no parameter named 'nodes'"):
        Dataset(1000, 0, 10, gpus_param="nodes").steps_per_epoch(pd.DataFrame({"ranks": [2]}))
    with pytest.raises(
        InputError, match="batch_per_rank: must be a number > 0"
    ):  # the field; the CLI shows --batch-size
        Dataset(1000, 0, 0).steps_per_epoch(pd.DataFrame({"ranks": [2]}))
    with pytest.raises(InputError, match="positive"):  # a parameter that takes the value 0 somewhere
        Dataset(1000, 0, "batch").steps_per_epoch(pd.DataFrame({"ranks": [2], "batch": [0]}))


@pytest.mark.parametrize(
    "kwargs, option",
    [
        ({"train_samples": -5}, "--train-samples"),
        ({"train_samples": 0}, "--train-samples"),
        ({"train_samples": float("nan")}, "--train-samples"),
        ({"train_samples": 10, "val_samples": -1}, "--val-samples"),
        ({"train_samples": 10, "batch_per_rank": -64}, "--batch-size"),
        ({"train_samples": 10, "gpus_param": 0}, "--gpus-param"),
        ({"train_samples": 10, "model_parallel": float("inf")}, "--model-parallel"),
        ({"train_samples": 10, "last_batch": "pad"}, "--last-batch"),
    ],
)
def test_dataset_refuses_sizes_that_are_not_positive(kwargs, option):
    from extradeep.cli.flags import flag_error

    with pytest.raises(InputError) as info:
        Dataset(**kwargs)
    assert info.value.field == list(kwargs)[-1]  # the library names its own argument ...
    shown = str(flag_error(info.value))  # ... and the CLI shows the flag that sets it
    assert shown.startswith(option + ":") and "\n" not in shown


def test_last_batch_keep_rounds_up_and_drop_follows_eq_2():
    points = pd.DataFrame({"ranks": [1, 2, 4, 8]})
    drop = Dataset(1000, 100, 64)
    keep = Dataset(1000, 100, 64, last_batch="keep")
    assert drop.steps_per_epoch(points)[0].tolist() == [math.floor(1000 / r / 64) for r in (1, 2, 4, 8)]
    assert keep.steps_per_epoch(points)[0].tolist() == [math.ceil(1000 / r / 64) for r in (1, 2, 4, 8)]
    assert keep.steps_per_epoch(points)[1].tolist() == [math.ceil(100 / r / 64) for r in (1, 2, 4, 8)]


def test_samples_per_epoch_shows_what_floor_leaves_out():
    points = pd.DataFrame({"ranks": [2, 8]})
    counts = Dataset(1000, 0, 64).samples_per_epoch(points)
    assert counts["n_t"].tolist() == [7, 1]
    assert counts["samples"].tolist() == [7 * 2 * 64, 1 * 8 * 64]
    assert counts["skipped_share"].tolist() == pytest.approx([(1000 - 896) / 1000, (1000 - 512) / 1000])
    kept = Dataset(1000, 0, 64, last_batch="keep").samples_per_epoch(points)
    assert (kept["samples"] >= 1000).all() and (kept["skipped_share"] == 0).all()
    weak = Dataset(1000, 0, 64, weak_scaling=True).samples_per_epoch(points)
    assert weak["train_samples"].tolist() == [2000, 8000]


def test_epoch_table_is_n_t_train_plus_n_v_val(experiment):
    ds = Dataset(50_000, 10_000, 64)
    table = experiment.epoch_table(ds)
    points = experiment.points.set_index(["region", "phase", "ranks"])["value"]
    for row in table[table["kind"] != "total"].itertuples():
        n_t, n_v = (50_000 // row.ranks) // 64, (10_000 // row.ranks) // 64
        train = points.get((row.region, "train", row.ranks), 0.0)
        val = points.get((row.region, "val", row.ranks), 0.0)
        assert (row.n_t, row.n_v) == (n_t, n_v)
        assert row.value == pytest.approx(n_t * train + n_v * val)


def test_category_sums_cover_gpu_and_mpi_categories_only(experiment):
    table = experiment.epoch_table(Dataset(50_000, 10_000, 64))
    at4 = table[table["ranks"] == 4].set_index("region")
    assert at4.loc["computation", "value"] == pytest.approx(at4.loc["gemm", "value"])
    assert at4.loc["communication", "value"] == pytest.approx(at4.loc["ncclAllReduce", "value"])
    assert at4.loc["memory", "value"] == pytest.approx(at4.loc["[CUDA memcpy HtoD]", "value"])
    parts = at4.loc[["gemm", "ncclAllReduce", "[CUDA memcpy HtoD]"], "value"].sum()
    assert at4.loc["total", "value"] == pytest.approx(parts)  # cudaLaunchKernel and step are not in it


def test_without_dataset_epochs_are_refused_with_a_hint(experiment):
    with pytest.raises(InputError, match="train_samples"):
        experiment.epoch_table()
    steps = experiment.step_table()
    assert {"train", "val"} <= set(steps.columns) and steps["modelable"].all()


def test_per_rep_epoch_table_has_a_row_per_repetition(experiment):
    table = experiment.epoch_table(Dataset(50_000, 10_000, 64), per_rep=True)
    assert sorted(table["rep"].unique()) == [1, 2]
    assert len(table) == 2 * len(experiment.epoch_table(Dataset(50_000, 10_000, 64)))


def test_save_load_round_trip_and_plain_sql(experiment, tmp_path):
    path = tmp_path / "exp.sqlite"
    experiment.save(path)
    assert is_saved_experiment(path)
    loaded = Experiment.load(path)
    assert loaded.params == experiment.params and loaded.problems == experiment.problems
    assert loaded.settings == experiment.settings
    pd.testing.assert_frame_equal(loaded.points, experiment.points, check_dtype=False)
    pd.testing.assert_frame_equal(loaded.values, experiment.values, check_dtype=False)
    pd.testing.assert_frame_equal(loaded.provenance, experiment.provenance, check_dtype=False)
    with sqlite3.connect(path) as conn:
        n = conn.execute("SELECT count(*) FROM measurements WHERE region = 'gemm' AND metric = 'time'").fetchone()[0]
        sha = conn.execute("SELECT sha256 FROM provenance").fetchone()[0]
    assert n == len(experiment.points.query("region == 'gemm'")) and sha == "ab" * 32
    experiment.save(path)  # overwriting an earlier experiment is fine


def test_last_batch_is_saved_and_old_files_load_as_drop(experiment, tmp_path):
    from dataclasses import asdict, replace

    keep = replace(
        experiment, settings={**experiment.settings, "dataset": asdict(Dataset(1000, 100, 8, last_batch="keep"))}
    )
    keep.save(tmp_path / "keep.sqlite")
    assert Experiment.load(tmp_path / "keep.sqlite").dataset.last_batch == "keep"
    old = asdict(Dataset(1000, 100, 8))
    del old["last_batch"]  # as saved before the field existed
    replace(experiment, settings={**experiment.settings, "dataset": old}).save(tmp_path / "old.sqlite")
    assert Experiment.load(tmp_path / "old.sqlite").dataset.last_batch == "drop"


def test_save_refuses_to_overwrite_other_files(experiment, tmp_path):
    other = tmp_path / "profile.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE NVTX_EVENTS (start INTEGER)")
    before = other.read_bytes()
    with pytest.raises(InputError, match="refusing to overwrite"):
        experiment.save(other)
    assert other.read_bytes() == before and not is_saved_experiment(other)
    with pytest.raises(InputError, match="not an experiment"):
        Experiment.load(other)


def test_min_points_can_be_changed_after_loading(experiment):
    copy = Experiment(
        experiment.params, experiment.values, experiment.points.copy(), experiment.provenance, dict(experiment.settings)
    )
    copy.set_min_points(6)
    assert not copy.points["modelable"].any()


def test_settings_are_typed_and_a_key_of_another_version_survives_a_save(experiment, tmp_path):
    """Experiment.settings is an ExperimentSettings (fields, not string keys); a setting this version
    does not know (written by another version) is kept in `extra` and saved back unchanged."""
    from extradeep.aggregate.settings import ExperimentSettings

    assert isinstance(experiment.settings, ExperimentSettings)
    assert experiment.settings.fixed_params == {"batch": 64} and experiment.fixed_params == {"batch": 64}
    path = tmp_path / "exp.sqlite"
    experiment.save(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO settings (key, value) VALUES ('from_a_later_version', '[1, 2]')")
    loaded = Experiment.load(path)
    assert loaded.settings.extra == {"from_a_later_version": [1, 2]} and loaded.settings.system is None
    loaded.set_min_points(3)
    again = tmp_path / "again.sqlite"
    loaded.save(again)
    reread = Experiment.load(again).settings
    assert reread.min_points == 3 and reread["from_a_later_version"] == [1, 2]
    assert dict(reread) == {**experiment.settings.to_dict(), "min_points": 3, "from_a_later_version": [1, 2]}
