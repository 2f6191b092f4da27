"""One simulated study written as nsys exports and as Kineto traces gives the same measurements and
models, and a folder holding both counts each run once."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.modeling.modeler import fit_models
from extradeep.pipeline import load_experiment
from extradeep.simulate import simulate

GPU_KINDS = ["kernel", "memcpy", "memset", "step"]


@pytest.fixture(scope="session")
def both_formats(tmp_path_factory):
    return simulate(
        tmp_path_factory.mktemp("sim_both"),
        params={"ranks": [2, 3, 4, 5, 6]},
        repetitions=1,
        train_steps=3,
        val_steps=1,
        truth_replicates=0,
        formats=("nsys", "kineto"),
        seed=3,
    )


def _experiment(sim, suffix):
    paths = [p for p in sim.files["path"] if p.endswith(suffix)]
    return load_experiment(paths, settings=None, min_points=5, use_cache=False, progress=False, replay=False, jobs=1)


def test_same_measurements_and_models(both_formats):
    nsys, kineto = _experiment(both_formats, ".sqlite"), _experiment(both_formats, ".json.gz")
    key = ["region", "kind", "metric", "phase", "ranks"]
    a = nsys.points[nsys.points["kind"].isin(GPU_KINDS)].set_index(key)["value"].sort_index()
    b = kineto.points[kineto.points["kind"].isin(GPU_KINDS)].set_index(key)["value"].sort_index()
    assert a.index.equals(b.index) and len(a) > 50
    # the simulator's times carry fractions of a ns that each format rounds on its own: <= 1 ns per event
    np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-3, atol=2e-9)
    picked = ["step", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "[CUDA memcpy HtoD]"]
    models = []
    for exp in (nsys, kineto):
        pts = exp.points[
            exp.points["region"].isin(picked) & (exp.points["phase"] == "train") & (exp.points["metric"] == "time")
        ]
        models.append(fit_models(pts, ["ranks"]).set_index(["region", "metric"])["formula"].sort_index())
    assert len(models[0]) == 3 and models[0].equals(models[1])


def test_a_run_in_both_formats_counts_once(both_formats):
    exp = load_experiment([both_formats.outdir], min_points=5, use_cache=False, progress=False, replay=False, jobs=1)
    assert set(exp.provenance["path"].str.endswith(".sqlite")) == {True}
    assert len(exp.provenance) == 2 + 3 + 4 + 5 + 6
    twice = [p for p in exp.problems if "profiled as nsys exports and as Kineto traces" in p]
    assert len(twice) == 5


@pytest.mark.slow
def test_cli_models_a_folder_of_kineto_traces(both_formats, tmp_path, capsys):
    """model (with the replay of the largest runs), then evaluate/report on the saved experiment."""
    import shutil

    from extradeep.cli import main

    folder = tmp_path / "traces"
    folder.mkdir()
    for path in both_formats.files["path"]:
        if path.endswith(".json.gz"):
            shutil.copy(path, folder)
    saved = tmp_path / "exp.sqlite"
    assert (
        main(
            [
                "model",
                str(folder),
                "--param",
                "ranks",
                "--train-samples",
                "50000",
                "--batch-size",
                "64",
                "--save",
                str(saved),
                "--no-cache",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "could not be replayed" not in err
    assert main(["report", str(saved), "-o", str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").stat().st_size > 0
