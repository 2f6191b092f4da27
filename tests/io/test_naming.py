"""The file-naming rules are one module: what profile-cmd and the simulator write, discovery reads back."""

from __future__ import annotations

import pytest

from extradeep.capture.profile_cmd import ProfileRun
from extradeep.errors import InputError
from extradeep.io.naming import check_name_parts, parse_name, rank_name, run_stem
from extradeep.simulate import simulate


@pytest.mark.parametrize(
    "params",
    [{}, {"lr": 0.5}, {"batch": 64, "rate": 0.125}, {"b": 1e-05}],
    ids=["ranks only", "float", "two", "exponent"],
)
def test_names_written_parse_back(params):
    for ranks, rep, rank in ((1, 1, 0), (16, 3, 15)):
        name = rank_name(run_stem("app-1_x", {"p": ranks, **params}, rep), rank)
        assert parse_name(name) == {"app": "app-1_x", "ranks": ranks, **params, "rep": rep, "rank": rank}


def test_profile_cmd_and_simulator_name_files_alike(tmp_path):
    sim = simulate(tmp_path, app="toy", params={"ranks": [2]}, repetitions=1, epochs=2, train_steps=2, val_steps=1)
    written = sorted(p.name for p in tmp_path.glob("*.sqlite"))
    planned = ProfileRun(2, 1, {}).stem("toy")
    assert written == [rank_name(planned, rank) for rank in (0, 1)]
    assert len(sim.files) == 2


@pytest.mark.parametrize(
    "app, params, prefixes, match",
    [
        ("a.b", ["ranks"], {"ranks": "p"}, "no dots"),
        ("app", ["rank"], {"rank": "x"}, "parameter 'rank'"),
        ("app", ["lr"], {"lr": "r"}, "repetition and rank"),
        ("app", ["lr", "lx"], {"lr": "l", "lx": "l"}, "share a file-name prefix"),
    ],
)
def test_names_that_would_not_parse_back_are_refused(app, params, prefixes, match):
    with pytest.raises(InputError, match=match):
        check_name_parts(app, params, prefixes)
