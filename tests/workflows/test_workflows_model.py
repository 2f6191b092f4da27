"""`model_study` through the API (extradeep/workflows/model.py) on simulated exports: the same answer
as the command line, outputs checked before anything is read."""

import json

import pytest
from shared_data import simulate_small_runs

from extradeep import ModelOptions, Options, model_study
from extradeep.cli import main
from extradeep.errors import InputError


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("workflow-model")
    simulate_small_runs(root / "runs")
    return root


def reading(runs):
    return Options.resolve(
        {"profiles": [str(runs / "runs")], "cache_dir": str(runs / "cache"), "no_replay": True, "jobs": 1},
        folder=runs / "runs",
    )


def test_the_api_gives_what_the_command_line_writes(runs, tmp_path, capsys):
    result = model_study(ModelOptions(reading=reading(runs), predict=[8, 16]))
    path = tmp_path / "m.json"
    assert (
        main(["model", str(runs / "runs"), "--no-replay", "--jobs", "1", "--predict", "8,16", "--json", str(path)]) == 0
    )
    capsys.readouterr()
    doc = json.loads(path.read_text())
    written = {(p["quantity"], p["point"]["ranks"]): p["value"] for p in doc["predictions"]}
    assert len(written) == len(result.predictions) > 0
    for _, row in result.predictions.iterrows():
        assert written[(row["quantity"], row["ranks"])] == pytest.approx(row["T"])
    assert set(result.predictions["ranks"]) == {8, 16} and result.target["ranks"] == 16
    assert result.written == []  # nothing asked for, nothing written


def test_an_output_onto_an_input_is_refused_before_reading(runs):
    export = next((runs / "runs").glob("*.sqlite"))
    before = export.read_bytes()
    seen = []
    with pytest.raises(InputError, match="is one of the inputs"):
        model_study(ModelOptions(reading=reading(runs), json=str(export)), on_read=seen.append)
    assert seen == [] and export.read_bytes() == before
