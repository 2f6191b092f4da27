"""The workflows' options values (issue 22 item 2): built once, checked once, each error naming the
option by its field, every output checked before any reading and never an input."""

from __future__ import annotations

import pytest

from extradeep.errors import InputError
from extradeep.simulate import simulate
from extradeep.workflows.inspection import InspectOptions
from extradeep.workflows.layouts import LayoutPlanOptions, LayoutsOptions, whole_numbers
from extradeep.workflows.outputs import check_outputs
from extradeep.workflows.tools import InstrumentOptions, ProfileCmdOptions, SimulateOptions, profile_jobs
from extradeep.workflows.trace_analyses import OptimizeOptions, TraceAnalysisOptions
from extradeep.workflows.traces import PredictOptions


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    simulate(out, params={"ranks": [2]}, repetitions=1, epochs=2, train_steps=2, val_steps=1, seed=3)
    return out


def _field(build) -> str:
    with pytest.raises(InputError) as caught:
        build()
    assert caught.value.source is None  # named by its field, which front ends show as a flag or widget
    return caught.value.field


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda run: PredictOptions(str(run), ranks=0), "ranks"),
        (lambda run: PredictOptions(str(run), top=0), "top"),
        (lambda run: PredictOptions(str(run), run=("ranks",)), "run"),
        (lambda run: PredictOptions(str(run), what_if=("cpu=2",), combine=True), "combine"),
        (lambda run: PredictOptions(str(run), step_marks={"warmup_epochs": -1}), "warmup_epochs"),
        (lambda run: InspectOptions((str(run),), top=-1), "top"),
        (lambda run: InspectOptions((str(run),), model_shape="1"), "model_shape"),
        (lambda run: TraceAnalysisOptions(analysis=("nope",)), "analysis"),
        (lambda run: OptimizeOptions(min_gain=100), "min_gain"),
        (lambda run: OptimizeOptions(gpu_memory=0), "gpu_memory"),
        (lambda run: LayoutsOptions(model="m.toml", gpus="4", global_batch=8, max_time="3 parsecs"), "max_time"),
        (lambda run: LayoutsOptions(table=("t.csv",), report=str(run.parent / "r.html")), "report"),
        (lambda run: LayoutPlanOptions("m.toml", target="64", max_ranks=8), "global_batch"),
        (lambda run: SimulateOptions(str(run.parent / "new"), noise="1"), "noise"),
        (lambda run: SimulateOptions(str(run.parent / "new"), param=("ranks=2", "ranks=4")), "param"),
        (lambda run: SimulateOptions(str(run.parent / "new"), gpt_truth=("tp2.pp1.dp1",)), "gpt_truth"),
        (lambda run: ProfileCmdOptions(("python",)), "ranks"),
        (lambda run: ProfileCmdOptions(("python",), plan="p.csv", ranks="2"), "plan"),
    ],
)
def test_a_bad_option_is_named_by_its_field(run, build, field):
    assert _field(lambda: build(run)) == field


def test_profile_ranks_must_be_whole_numbers_and_not_empty():
    assert _field(lambda: profile_jobs(ProfileCmdOptions(("python",), ranks="2,,4"))) == "ranks"
    assert _field(lambda: profile_jobs(ProfileCmdOptions(("python",), ranks="2,x"))) == "ranks"


def test_whole_numbers_take_ranges_and_lists():
    assert whole_numbers("64:256:64", "gpus") == [64, 128, 192, 256]
    assert whole_numbers("0,1", "zero", low=0) == [0, 1]
    assert whole_numbers([2, 4], "gpus") == [2, 4]
    assert _field(lambda: whole_numbers("1.5", "gpus")) == "gpus"
    assert _field(lambda: whole_numbers([0], "gpus")) == "gpus"


@pytest.mark.parametrize("text, low", [("0", 1), ("0:8", 1), ("-1", 0), ("4,-1:2", 0)])
def test_a_value_below_the_least_quotes_what_the_user_wrote(text, low):
    with pytest.raises(InputError, match=rf"'{text.split(',')[-1].split(':')[0]}' must be at least {low}"):
        whole_numbers(text, "zero" if low == 0 else "gpus", low=low)


def test_an_output_is_never_an_input_nor_a_database(run):
    export = next(run.glob("*.sqlite"))
    for name in ("json", "timeline", "plot"):  # a profile found under the run's folder is an input
        assert _field(lambda n=name: PredictOptions(str(run), **{n: str(export)})) == name
    with pytest.raises(InputError, match="existing SQLite database"):
        check_outputs({"output": export}, set())
    with pytest.raises(InputError, match="same file"):
        check_outputs({"json": run / "a.json", "timeline": run / "a.json"}, set())


def test_outputs_are_checked_before_anything_is_written(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        LayoutPlanOptions("m.toml", target="64", max_ranks=8, global_batch=8, output=str(tmp_path / "no" / "x.csv"))
    (tmp_path / "file.txt").write_text("a file, not a folder\n")
    assert _field(lambda: InstrumentOptions("x.py", str(tmp_path / "file.txt" / "out"))) == "out"


def test_a_folder_of_foreign_exports_is_not_simulated_into(run):
    (run / "truth.json").rename(run / "truth.moved")
    try:
        with pytest.raises(InputError, match="did not simulate"):
            SimulateOptions(str(run))
    finally:
        (run / "truth.moved").rename(run / "truth.json")
