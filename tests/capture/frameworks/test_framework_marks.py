"""extradeep.capture.marks: range names, domain, nesting, decorators, and the no-op paths."""

import sys

import pytest

from extradeep.capture import marks


def test_step_marks_emit_named_ranges_in_the_extradeep_domain(fake_nvtx):
    with marks.epoch(0):
        with marks.train_step(0):
            pass
        with marks.val_step(1):
            pass
    assert [c[0] for c in fake_nvtx.CALLS] == ["push", "push", "pop", "push", "pop", "pop"]
    assert {c[2] for c in fake_nvtx.CALLS} == {"extradeep"}
    assert fake_nvtx.nested_names() == ["epoch 0", "epoch 0/train_step 0", "epoch 0/val_step 1"]


def test_range_decorator_wraps_calls_and_pops_on_exceptions(fake_nvtx):
    @marks.range("pkg.mod.Model.fit")
    def fit(x):
        if x < 0:
            raise ValueError("negative")
        return 2 * x

    assert fit(3) == 6
    assert fit.__name__ == "fit" and fit.__extradeep_range__ == "pkg.mod.Model.fit"
    with pytest.raises(ValueError):
        fit(-1)
    assert [r[0] for r in fake_nvtx.ranges()] == ["pkg.mod.Model.fit"] * 2


def test_step_marks_work_as_decorators(fake_nvtx):
    @marks.train_step(4)
    def step():
        return "done"

    assert step() == "done"
    assert fake_nvtx.nested_names() == ["train_step 4"]


def test_generators_and_coroutines_are_left_unwrapped(fake_nvtx):
    def numbers():
        yield 1

    async def later():
        return 1

    assert marks.range("g")(numbers) is numbers
    assert marks.range("c")(later) is later


def test_without_nvtx_installed_marks_are_noops(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvtx", None)  # import nvtx -> ImportError
    monkeypatch.setenv("EXTRADEEP_NVTX", "1")
    assert marks.refresh() is False

    def work():
        return 7

    assert marks.range("x")(work) is work
    with marks.epoch(0), marks.train_step(0):
        pass
    monkeypatch.undo()
    marks.refresh()


def test_without_profiler_marks_are_noops_even_with_nvtx(fake_nvtx, monkeypatch):
    monkeypatch.setenv("EXTRADEEP_NVTX", "auto")
    for var in ("NVTX_INJECTION64_PATH", "NVTX_INJECTION32_PATH"):
        monkeypatch.delenv(var, raising=False)
    assert marks.refresh() is False
    with marks.epoch(0):
        pass
    assert fake_nvtx.CALLS == []

    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so")
    assert marks.refresh() is True
    with marks.epoch(0):
        pass
    assert fake_nvtx.nested_names() == ["epoch 0"]


def test_extradeep_nvtx_zero_turns_marks_off(fake_nvtx, monkeypatch):
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so")
    monkeypatch.setenv("EXTRADEEP_NVTX", "0")
    assert marks.refresh() is False
    with marks.val_step(0):
        pass
    assert fake_nvtx.CALLS == []
