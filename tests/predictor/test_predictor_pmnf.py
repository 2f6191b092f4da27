"""Substituting the empirical PMNF models: predict a larger run from a smaller one's trace."""

from __future__ import annotations

import pytest

from extradeep import load_experiment
from extradeep.modeling import fit_models
from extradeep.predictor import predict
from extradeep.simulate import simulate


@pytest.fixture(scope="module")
def scaling_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("pmnf")
    simulate(
        out, params={"ranks": [2, 3, 4, 5, 6]}, repetitions=1, epochs=2, train_steps=2, val_steps=1, ddp=True, seed=5
    )
    exp = load_experiment([out], progress=False, use_cache=False, jobs=1)
    points = exp.points[(exp.points["metric"] == "time") & (exp.points["phase"] == "train")]
    exp.save(out / "experiment.db")
    return out, fit_models(points, exp.params, by=("region",))


def test_pmnf_substitution_predicts_the_larger_run(scaling_runs):
    out, models = scaling_runs
    pred = predict(out, select={"ranks": 3}, what_if=["pmnf.ranks=6"], models=models)
    got = pred.summary.set_index(["scenario", "phase"]).loc[("pmnf.ranks=6", "train"), "predicted"]
    measured_at_6 = predict(out, select={"ranks": 6}).summary.set_index("phase").loc["train", "measured"]
    measured_at_3 = pred.summary.set_index(["scenario", "phase"]).loc[("measured durations", "train"), "measured"]
    assert got == pytest.approx(measured_at_6, rel=0.03)
    assert got != pytest.approx(measured_at_3, rel=1e-3)  # the substitution changed something


def test_pmnf_without_models_or_parameter_is_an_input_error(scaling_runs):
    from extradeep.errors import InputError

    out, models = scaling_runs
    with pytest.raises(InputError, match="PMNF models"):
        predict(out, select={"ranks": 3}, what_if=["pmnf.ranks=6"])
    with pytest.raises(InputError, match="batch"):
        predict(out, select={"ranks": 3}, what_if=["pmnf.batch=8"], models=models)


def test_cli_ranks_with_experiment_shows_the_empirical_model(scaling_runs, capsys):
    from extradeep.cli import main

    out, _ = scaling_runs
    assert (
        main(["predict", str(out), "--run", "ranks=3", "--ranks", "6", "--experiment", str(out / "experiment.db")]) == 0
    )
    text = capsys.readouterr().out
    assert "pmnf.ranks=6" in text and "Empirical PMNF step-time model at ranks=6" in text


def test_a_folder_with_several_runs_needs_or_takes_a_choice(scaling_runs):
    from extradeep.errors import InputError
    from extradeep.predictor import resolve_run

    out, _ = scaling_runs
    paths, point, notes = resolve_run(out)
    assert len(paths) == 2 and point == {"ranks": 2} and "5 runs found" in notes[0]
    paths, point, notes = resolve_run(out, {"ranks": 5})
    assert len(paths) == 5 and {p.name for p in paths} == {f"cifar10.p5.r1.mpi{r}.sqlite" for r in range(5)}
    assert notes == []
    with pytest.raises(InputError, match="no exports match"):
        resolve_run(out, {"ranks": 7})


def test_ring_model_moves_all_reduce_to_the_measured_pure_time_at_more_ranks(scaling_runs):
    import numpy as np

    out, _ = scaling_runs
    pred = predict(out, select={"ranks": 3}, what_if=["ranks=6"])
    g, res = pred.graph, pred.results["ranks=6"]
    syncs = g.nodes.index[(g.nodes["role"] == "sync") & g.nodes["name"].str.contains("AllReduce")]
    got = np.median(res.end[syncs] - res.start[syncs])
    at6 = predict(out, select={"ranks": 6}).collectives
    want = at6.loc[at6["name"].str.contains("AllReduce"), "pure"].median()
    at3 = pred.collectives.loc[pred.collectives["name"].str.contains("AllReduce"), "pure"].median()
    assert got == pytest.approx(want, rel=0.05) and abs(want - at3) > 0.1 * at3


def test_cli_pmnf_what_if_with_ranks_is_applied_once(scaling_runs, tmp_path, capsys):
    import json

    from extradeep.cli import main

    out, _ = scaling_runs
    js = tmp_path / "p.json"
    assert (
        main(
            [
                "predict",
                str(out),
                "--run",
                "ranks=3",
                "--ranks",
                "6",
                "--experiment",
                str(out / "experiment.db"),
                "--what-if",
                "pmnf.ranks=6",
                "--combine",
                "--json",
                str(js),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert text.count("Empirical PMNF step-time model") == 1
    rows = json.loads(js.read_text())["summary"]
    train = {r["scenario"]: r["predicted"] for r in rows if r["phase"] == "train"}
    # the combination equals the --ranks scenario (pmnf.ranks=6 is in both): no scenario moves
    # the kernels to 6 ranks twice
    assert set(train) == {"measured durations", "pmnf.ranks=6", "ranks=6; comm.algorithm=ring; pmnf.ranks=6"}
    measured_at_6 = predict(out, select={"ranks": 6}).summary.set_index("phase").loc["train", "measured"]
    assert max(train.values()) < 1.1 * measured_at_6


def test_an_experiment_given_as_run_dir_is_named_as_such(scaling_runs, capsys, sha256):
    from extradeep.cli import main

    out, _ = scaling_runs
    before = sha256(out / "experiment.db")
    assert main(["predict", str(out / "experiment.db")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "extradeep experiment" in err[0] and "not an Nsight Systems export" in err[0]
    assert sha256(out / "experiment.db") == before
