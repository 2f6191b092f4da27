"""`extradeep predict --optimize`, `--analysis`, `--diff` and `inspect --analysis` end to end."""

from __future__ import annotations

import pytest

from extradeep.cli import main
from extradeep.predictor.analyses import idle_time


@pytest.fixture(scope="module")
def exposed_run(tmp_path_factory):
    from extradeep.simulate import simulate

    out = tmp_path_factory.mktemp("exposed_cli")
    simulate(
        out,
        params={"ranks": [4]},
        repetitions=1,
        epochs=2,
        train_steps=3,
        val_steps=1,
        ddp=True,
        seed=5,
        gradients=8,
        gradient_profile="uniform",
        nccl_bandwidth_scale=0.3,
    )
    return out


def test_predict_optimize_prints_strategies_settings_and_a_page(exposed_run, tmp_path, capsys, sha256):
    before = {p: sha256(p) for p in exposed_run.glob("*.sqlite")}
    page = tmp_path / "opt.html"
    assert main(["predict", str(exposed_run), "--optimize", "--optimize-report", str(page)]) == 0
    out = capsys.readouterr().out
    assert "Strategies" in out and "Settings:" in out and "bucket_cap_mb=" in out
    assert out.strip().splitlines()[-1].startswith("best: ")
    html = page.read_text()
    assert "Optimisation: what to change" in html and "data:image/png;base64" in html and "bucket_cap_mb" in html
    assert before == {p: sha256(p) for p in exposed_run.glob("*.sqlite")}


def test_predict_analyses_and_diff(exposed_run, ddp_run, capsys):
    assert main(["predict", str(exposed_run), "--analysis", "all", "--diff", str(ddp_run)]) == 0
    out = capsys.readouterr().out
    for needle in (
        "Idle time per GPU stream",
        "host_wait",
        "Kernel launches",
        "Frequent kernel sequences",
        "overlap per rank",
        "Changes against",
    ):
        assert needle in out
    # the idle times printed are the library's
    first = idle_time(exposed_run).iloc[0]
    assert f"{first['idle_time_s']:.4g}" in out


def test_inspect_offers_the_analyses_on_a_real_trace(capsys):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("extradeep_tests_root", Path(__file__).parents[1] / "conftest.py")
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    trace = root.require_real_kineto("HTA__trace_filter_sampled_rank-0.json.gz")
    other = root.require_real_kineto("HTA__trace_filter_sampled_rank-1.json.gz")
    assert main(["inspect", str(trace), "--analysis", "idle", "--analysis", "overlap", "--diff", str(other)]) == 0
    out = capsys.readouterr().out
    assert "Idle time per GPU stream" in out and "overlap per rank" in out and "Changes against" in out
    assert "Kernel launches" not in out  # only what was asked for


def test_option_errors_are_one_line(exposed_run, tmp_path, capsys):
    assert main(["predict", str(exposed_run), "--optimize-report", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "--optimize-report: needs --optimize" in err and "Traceback" not in err
    bad = tmp_path / "m.toml"
    bad.write_text("parameters = 1e6\nwidth = 3\n")
    assert main(["predict", str(exposed_run), "--optimize", "--memory-model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "unknown key" in err and "m.toml" in err and "Traceback" not in err
    assert main(["predict", str(exposed_run), "--optimize", "--min-gain", "150"]) == 2
    assert "--min-gain" in capsys.readouterr().err
    # the page may not overwrite an input
    export = sorted(exposed_run.glob("*.sqlite"))[0]
    assert main(["predict", str(exposed_run), "--optimize", "--optimize-report", str(export)]) == 2
