"""Round trip: the helpers' recorded NVTX calls, written as nsys would export them, are found by the
reader (`extradeep.io.steps`) with no options."""

import pytest

from extradeep.capture import marks
from extradeep.capture.frameworks.torch import StepSampler
from extradeep.io.nsys import events
from extradeep.io.sqlite import open_readonly
from extradeep.io.steps import find_steps
from extradeep.simulate import write_nvtx_export


def profile_loop(train_batches=9, val_batches=4, epochs=5):
    sampler = StepSampler()
    for _ in sampler.epochs(epochs):
        for _ in sampler.train(range(train_batches)):
            with marks.range("model.Net.forward"):  # an instrumented user function inside the step
                pass
        for _ in sampler.val(range(val_batches)):
            pass


@pytest.mark.parametrize(("layout", "strings"), [("2026", "text"), ("2022", "textId")])
def test_reader_finds_the_sampled_steps_of_the_helpers(fake_nvtx, tmp_path, layout, strings):
    profile_loop()
    path = write_nvtx_export(
        tmp_path / "app.p2.r1.mpi0.sqlite", fake_nvtx.ranges(), layout=layout, nvtx_strings=strings
    )
    conn = open_readonly(path)
    table = find_steps(events.nvtx(conn), source=path)

    by_phase = table.steps.groupby("phase")["step"].apply(list).to_dict()
    assert by_phase == {"train": [0, 1, 2, 3, 4], "val": [0, 1]}  # epoch 1; epoch 0 is the warm-up
    assert set(table.steps["epoch"]) == {1} and set(table.warmup["epoch"]) == {0}
    assert len(table.warmup) == 7
    recorded = {(name, start, end) for name, _, start, end, _ in fake_nvtx.ranges()}
    for row in table.steps.itertuples():
        prefix = "train_step" if row.phase == "train" else "val_step"
        assert (f"{prefix} {row.step}", row.start, row.end) in recorded
    assert not table.warnings
    assert "model.Net.forward" not in " ".join(table.convention.values())
