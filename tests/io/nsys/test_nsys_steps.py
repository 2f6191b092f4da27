"""Step recognition: every default convention, user patterns, warm-up, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.errors import InputError
from extradeep.io import step_conventions
from extradeep.io.frames import NVTX_PUSHPOP, Names, Table
from extradeep.io.nsys import events
from extradeep.io.sqlite import open_readonly
from extradeep.io.step_conventions import Nvtx
from extradeep.io.steps import find_steps
from extradeep.simulate import write_nvtx_export

MS = 1_000_000


def steps_of(path, settings=None):
    return find_steps(events.nvtx(open_readonly(path)), settings, path)


def nested_loop(epochs=2, train=3, val=1, names=("epoch {}", "train_step {}", "val_step {}"), domain="extradeep"):
    """NVTX ranges of a training loop as `extradeep.capture.marks` emits them, 10 ms per step."""
    ranges, t = [], 1 * MS
    for e in range(epochs):
        epoch_start = t
        for s in range(train):
            ranges.append((names[1].format(s), domain, t, t + 9 * MS, 1000))
            t += 10 * MS
        for s in range(val):
            ranges.append((names[2].format(s), domain, t, t + 4 * MS, 1000))
            t += 5 * MS
        ranges.append((names[0].format(e), domain, epoch_start, t, 1000))
        t += 2 * MS
    return ranges


@pytest.mark.parametrize(
    "fixture, train_how, val_how",
    [
        ("sim_ranges", "Extra-Deep ranges", "Extra-Deep ranges"),
        ("sim_marks_old", "Extra-Deep marks", "Extra-Deep marks"),
        ("sim_profiler", "ProfilerStep#N", "ProfilerStep#N inside eval ranges"),
    ],
)
def test_default_conventions_on_simulator_output(request, truth_of, fixture, train_how, val_how):
    outdir = request.getfixturevalue(fixture)
    truth = truth_of(outdir)
    for path in sorted(outdir.glob("*.sqlite")):
        table = steps_of(path)
        assert train_how in table.convention["train"]
        assert val_how in table.convention["val"]
        kept = table.steps
        assert (kept["phase"] == "train").sum() == truth["train_steps"] * (truth["epochs"] - 1)
        assert (kept["phase"] == "val").sum() == truth["val_steps"] * (truth["epochs"] - 1)
        assert len(table.warmup) == truth["train_steps"] + truth["val_steps"]
        assert table.warmup["start"].max() < kept["start"].min()
        assert not kept.duplicated(["epoch", "phase", "step"]).any()
        if fixture != "sim_profiler":  # ProfilerStep#N counts on across epochs and phases
            assert sorted(kept.query("phase == 'train'")["step"]) == list(range(truth["train_steps"]))
        assert (kept["end"] > kept["start"]).all() and kept["start"].is_monotonic_increasing


def test_plain_names_from_extradeep_marks(tmp_path):
    path = write_nvtx_export(tmp_path / "plain.sqlite", nested_loop(epochs=3, train=4, val=2))
    table = steps_of(path)
    assert table.convention["epoch"].startswith("plain range names")
    assert table.steps.groupby(["epoch", "phase"]).size().to_dict() == {
        (1, "train"): 4,
        (1, "val"): 2,
        (2, "train"): 4,
        (2, "val"): 2,
    }
    assert list(table.windows["epoch"]) == [1, 2]
    assert len(table.mark_rows) == 3 + 3 * 6


@pytest.mark.parametrize(
    "train, val",
    [("train step {}", "validation_step"), ("training_step_{}", "eval step {}"), ("step {}", "test_step {}")],
)
def test_common_plain_spellings(tmp_path, train, val):
    path = write_nvtx_export(tmp_path / "p.sqlite", nested_loop(names=("Epoch {}", train, val), domain=None))
    table = steps_of(path)
    assert (table.steps["phase"] == "train").sum() == 3 and (table.steps["phase"] == "val").sum() == 1


def test_user_patterns_restricted_to_a_domain(tmp_path):
    loop = nested_loop(names=("pass {}", "iteration {}", "check {}"), domain="myapp")
    decoys = [(f"iteration {i}", "other", MS * (40 + 10 * i), MS * (43 + 10 * i), 1001) for i in range(3)]
    path = write_nvtx_export(tmp_path / "u.sqlite", loop + decoys)
    with pytest.raises(InputError, match="iteration"):
        steps_of(path)  # nothing recognised by default: the error lists the names
    settings = {
        "epoch_pattern": r"myapp:pass (\d+)",
        "train_step_pattern": r"myapp:iteration (\d+)",
        "val_step_pattern": r"check (\d+)",
    }
    table = steps_of(path, settings)
    assert "in domain 'myapp'" in table.convention["train"]
    assert (table.steps["phase"] == "train").sum() == 3  # epoch 0 is warm-up; decoys ignored
    with pytest.raises(InputError, match="overlap"):  # without the domain the decoys overlap real steps
        steps_of(path, {**settings, "train_step_pattern": r"iteration (\d+)"})


def test_no_marks_lists_most_frequent_names(tmp_path):
    ranges = [("forward", None, MS * i, MS * i + 10, 1000) for i in range(1, 6)] + [
        ("backward", None, 9 * MS, 9 * MS + 5, 1000)
    ]
    path = write_nvtx_export(tmp_path / "n.sqlite", ranges)
    with pytest.raises(InputError) as excinfo:
        steps_of(path)
    text = str(excinfo.value)
    assert text.startswith(str(path)) and "'forward' x5" in text and "'backward' x1" in text
    assert text.index("forward") < text.index("backward")


def test_unbalanced_extra_deep_marks(tmp_path, sim_marks_old, altered_copy):
    src = sorted(sim_marks_old.glob("*.sqlite"))[0]
    path = altered_copy(
        src,
        tmp_path,
        "DELETE FROM NVTX_EVENTS WHERE rowid = (SELECT n.rowid FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType = 34 AND s.value = 'step:1,type:ended' ORDER BY n.start LIMIT 1)",
    )
    with pytest.raises(InputError, match="unbalanced Extra-Deep marks .* step 1"):
        steps_of(path)


def test_single_epoch_drops_first_steps_and_says_so(tmp_path):
    path = write_nvtx_export(tmp_path / "one.sqlite", nested_loop(epochs=1, train=5, val=2))
    table = steps_of(path)
    assert (table.steps["phase"] == "train").sum() == 4 and (table.steps["phase"] == "val").sum() == 1
    assert sorted(table.warmup["step"]) == [0, 0]
    assert any("only one epoch" in w for w in table.warnings)
    keep_all = steps_of(path, {"warmup_epochs": 0})
    assert len(keep_all.steps) == 7 and keep_all.warmup.empty and not keep_all.warnings
    two = steps_of(path, {"warmup_steps": 2})
    assert (two.steps["phase"] == "train").sum() == 3


def test_all_epochs_warmup_is_an_error(tmp_path):
    path = write_nvtx_export(tmp_path / "w.sqlite", nested_loop(epochs=2))
    with pytest.raises(InputError, match="all 2 epochs are warm-up"):
        steps_of(path, {"warmup_epochs": 2})


def test_invalid_pattern_and_setting():
    with pytest.raises(InputError, match="warmup-epochs"):
        find_steps(None, {"warmup_epochs": -1})
    with pytest.raises(InputError, match="unknown reader setting"):
        find_steps(None, {"warmup": 1})


def test_ranges_open_at_capture_end(tmp_path, altered_copy):
    """nsys --duration can stop inside a step: that step is left out (with a warning), the epoch runs on."""
    src = write_nvtx_export(tmp_path / "src.sqlite", nested_loop(epochs=2, train=3, val=1))
    path = altered_copy(
        src,
        tmp_path,
        "UPDATE NVTX_EVENTS SET end = NULL WHERE text IN ('val_step 0', 'epoch 1') "
        "AND start = (SELECT max(start) FROM NVTX_EVENTS WHERE text = 'val_step 0')"
        " OR text = 'epoch 1'",
        name="open.sqlite",
    )
    table = steps_of(path)
    assert table.steps.groupby("phase").size().to_dict() == {"train": 3}
    assert any("never ended" in w for w in table.warnings)
    assert table.windows["end"].iloc[0] > table.steps["end"].max()


def _names_of(path) -> list[str]:
    return [str(n) for n in events.nvtx_table(open_readonly(path), full=False)["name"].categories]


# names a scan of joined names could get wrong: a separator-like text across two names, the gap
# character itself (then the names are read one by one), newlines, digits at the edges; the scan
# runs from 64 names on
EDGE_NAMES = ["train step", "3", "epoch\n4", "7train_step 9", "eval", "ProfilerStep#12x", "a12b3", ""] * 8
NUMBERED = [f"{name}{i}" for name in ("train step ", "epoch_", "ProfilerStep#", "x", "val step") for i in range(20)]


def test_names_scanned_at_once_as_one_by_one(real_export, sim_ranges, sim_profiler):
    """The step finder's scans of all names joined (built-in kind, last number) find what matching
    each name on its own finds, on a real export's NVTX names and the simulator's."""
    paths = [real_export, *sorted(sim_ranges.glob("*.sqlite"))[:1], *sorted(sim_profiler.glob("*.sqlite"))[:1]]
    for texts in [*(_names_of(p) for p in paths), EDGE_NAMES, EDGE_NAMES + ["step\x00"], NUMBERED]:
        table = Table({"eventType": np.full(len(texts), NVTX_PUSHPOP), "start": np.zeros(len(texts), np.int64)})
        names = Names(np.arange(len(texts)), np.array(texts, dtype=object))
        nv = Nvtx(table.with_columns(end=np.ones(len(texts), np.int64), name=names, domain=names, category=names))
        assert list(step_conventions.default_kinds(nv)) == [step_conventions._kind(t) for t in texts]
        assert list(step_conventions._numbers(names, None)) == [step_conventions._number_of(t, None) for t in texts]
