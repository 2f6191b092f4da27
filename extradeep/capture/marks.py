"""NVTX marks for epochs, training steps, validation steps and user functions.

`epoch(i)`, `train_step(i)` and `val_step(i)` give push/pop ranges in the NVTX domain `extradeep`
named `epoch i`, `train_step i` and `val_step i`, the plain names the reader
(`extradeep.io.steps`) recognises without options. `range(name)` marks any code, and is what
`extradeep instrument` puts on user functions. Each works as a context manager and as a decorator:

    with marks.train_step(i):
        loss = train_on(batch)

    @marks.range("mypkg.model.Net.forward")
    def forward(...): ...

The `nvtx` package (`pip install extradeep[nvtx]`) is optional. Marks are emitted only when it is
importable and a profiler is attached (Nsight Systems sets `NVTX_INJECTION64_PATH` in the processes
it launches); otherwise every mark is a no-op costing one function call and a flag test, and a
`range` decorator returns the function unchanged. `EXTRADEEP_NVTX=1` forces marks on whenever
`nvtx` is importable (for tools that inject NVTX differently), `EXTRADEEP_NVTX=0` turns them off.
The environment is read once, on first use; `refresh()` reads it again.
"""

from __future__ import annotations

import functools
import inspect
import os

DOMAIN = "extradeep"
EPOCH = "epoch"
TRAIN_STEP = "train_step"
VAL_STEP = "val_step"

_OFF = ("0", "off", "false", "no")
_ON = ("1", "on", "true", "yes")
_INJECTION_VARS = ("NVTX_INJECTION64_PATH", "NVTX_INJECTION32_PATH")

# The nvtx module when marks are live, None when they are no-ops, _UNSET before the first use.
_UNSET = object()
_nvtx = _UNSET


def profiler_attached(environ=None) -> bool:
    """Whether an NVTX tool is injected into this process (what Nsight Systems does at launch)."""
    environ = os.environ if environ is None else environ
    return any(environ.get(var) for var in _INJECTION_VARS)


def _resolve():
    setting = os.environ.get("EXTRADEEP_NVTX", "auto").strip().lower()
    if setting in _OFF or (setting not in _ON and not profiler_attached()):
        return None
    try:
        import nvtx
    except ImportError:
        return None
    return nvtx


def refresh() -> bool:
    """Read the environment again (EXTRADEEP_NVTX, injection variables, `nvtx` importable)."""
    global _nvtx
    _nvtx = _resolve()
    return _nvtx is not None


def enabled() -> bool:
    """Whether marks are emitted in this process."""
    if _nvtx is _UNSET:
        refresh()
    return _nvtx is not None


class Range:
    """One named NVTX push/pop range in the `extradeep` domain: a context manager and a decorator."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = str(name)

    def push(self) -> None:
        if _nvtx is _UNSET:
            refresh()
        if _nvtx is not None:
            _nvtx.push_range(self.name, domain=DOMAIN)

    def pop(self) -> None:
        if _nvtx is not None and _nvtx is not _UNSET:
            _nvtx.pop_range(domain=DOMAIN)

    def __enter__(self) -> Range:
        self.push()
        return self

    def __exit__(self, *exc) -> bool:
        self.pop()
        return False

    def __call__(self, function):
        # Generators and coroutines run after the call returns (and interleave on one thread), so a
        # push/pop around the call would measure nothing and could cross other ranges: leave them.
        if not enabled() or _suspends(function):
            return function
        name = self.name

        @functools.wraps(function)
        def marked(*args, **kwargs):
            _nvtx.push_range(name, domain=DOMAIN)
            try:
                return function(*args, **kwargs)
            finally:
                _nvtx.pop_range(domain=DOMAIN)

        marked.__extradeep_range__ = name
        return marked

    def __repr__(self) -> str:
        return f"Range({self.name!r})"


def _suspends(function) -> bool:
    return (
        inspect.isgeneratorfunction(function)
        or inspect.iscoroutinefunction(function)
        or inspect.isasyncgenfunction(function)
    )


def range(name: str) -> Range:  # noqa: A001 - reads as marks.range("pkg.mod.fn")
    """A range named `name` (instrumented functions use `module.Class.function`)."""
    return Range(name)


def epoch(i: int) -> Range:
    """The range of epoch `i` (0-based, as the framework counts)."""
    return Range(f"{EPOCH} {int(i)}")


def train_step(i: int) -> Range:
    """The range of training step `i` of the current epoch (0-based)."""
    return Range(f"{TRAIN_STEP} {int(i)}")


def val_step(i: int) -> Range:
    """The range of validation step `i` of the current epoch (0-based)."""
    return Range(f"{VAL_STEP} {int(i)}")
