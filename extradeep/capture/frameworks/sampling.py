"""The sampling strategy of the paper (section 2.2), independent of any framework.

Only N training and M validation steps of each of the first E epochs are marked (default 5, 2, 2;
epoch 0 is the warm-up the analysis leaves out). After them the run either ends each epoch early
and stops training after E epochs (`truncate`, default), or does the same and then exits the
process right after the last sampled step (`stop`), so nothing after training (test set, saving)
runs in a profiling job. Settings come from arguments, else from the environment:

    EXTRADEEP_TRAIN_STEPS   training steps marked per epoch        (5)
    EXTRADEEP_VAL_STEPS     validation steps marked per epoch      (2)
    EXTRADEEP_EPOCHS        epochs marked                          (2)
    EXTRADEEP_SAMPLING      truncate | stop                        (truncate)
    EXTRADEEP_CUDA_PROFILER 1: cudaProfilerStart at the first sampled epoch,
                            cudaProfilerStop after the last        (0)

`SampledTraining` is the state machine the framework adapters drive; it emits the NVTX ranges of
`extradeep.capture.marks` and answers when a phase or the training should end. `SampledLoop` is the base of
the adapters: it builds both from arguments and environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from extradeep.capture import marks
from extradeep.capture.frameworks import profiler
from extradeep.errors import InputError

MODES = ("truncate", "stop")
ENV = {
    "train_steps": "EXTRADEEP_TRAIN_STEPS",
    "val_steps": "EXTRADEEP_VAL_STEPS",
    "epochs": "EXTRADEEP_EPOCHS",
    "mode": "EXTRADEEP_SAMPLING",
    "cuda_profiler": "EXTRADEEP_CUDA_PROFILER",
}


@dataclass(frozen=True)
class Sampling:
    """How many steps of how many epochs to mark and profile, and what happens after them."""

    train_steps: int = 5
    val_steps: int = 2
    epochs: int = 2
    mode: str = "truncate"
    cuda_profiler: bool = False

    def __post_init__(self):
        for name in ("train_steps", "val_steps", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(ENV[name], f"{name} must be a whole number >= 0, got {value!r}")
        if self.epochs < 1:
            raise InputError(ENV["epochs"], "at least one epoch must be sampled")
        if self.mode not in MODES:
            raise InputError(ENV["mode"], f"sampling mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    @classmethod
    def from_env(cls, environ=None, **given) -> Sampling:
        """Arguments that are not None win; the rest come from EXTRADEEP_* variables or defaults."""
        environ = os.environ if environ is None else environ
        values = {}
        for field in fields(cls):
            if given.get(field.name) is not None:
                values[field.name] = given[field.name]
            elif environ.get(ENV[field.name], "").strip():
                values[field.name] = _parse(field.name, environ[ENV[field.name]].strip())
        unknown = set(given) - {field.name for field in fields(cls)}
        if unknown:
            raise TypeError(f"unknown sampling settings: {', '.join(sorted(unknown))}")
        return cls(**values)


def _parse(name: str, text: str):
    if name == "mode":
        return text.lower()
    if name == "cuda_profiler":
        return text.lower() in ("1", "on", "true", "yes")
    try:
        return int(text)
    except ValueError:
        raise InputError(ENV[name], f"expected a whole number, got {text!r}") from None


class SampledTraining:
    """Counts epochs and steps, marks the sampled ones and says when to end a phase or training.

    Adapters call `begin_epoch`/`end_epoch` and `begin_step(phase)`/`end_step(phase)` (phase
    "train" or "val") around the framework's own loop; `end_step` returns True when the caller
    should end that phase of the epoch, `end_epoch` when training should stop. Epoch and step
    numbers in the marks are this run's own 0-based counts, so a resumed run still starts at
    `epoch 0`. Steps outside an open sampled epoch (sanity checks, a later `evaluate`) are not marked.
    """

    def __init__(self, sampling: Sampling | None = None):
        self.sampling = sampling if sampling is not None else Sampling.from_env()
        self.limits = {"train": self.sampling.train_steps, "val": self.sampling.val_steps}
        self.done = {"train": 0, "val": 0}  # steps of the current epoch
        self.epochs_done = 0
        self.finished = False
        self.profiler_backend = None  # what profiler.start() used: "torch", "cudart" or None (no GPU)
        self._profiling = False
        self._epoch = None
        self._step = None  # (phase, Range) while a step is open

    @property
    def in_epoch(self) -> bool:
        return self._epoch is not None

    def begin_epoch(self) -> bool:
        """Open the next epoch; returns whether it is sampled (marked)."""
        if self.finished or self.in_epoch:
            return False
        if self.epochs_done == 0 and self.sampling.cuda_profiler:
            self.profiler_backend = profiler.start()
            self._profiling = True
        self.done = {"train": 0, "val": 0}
        self._epoch = marks.epoch(self.epochs_done)
        self._epoch.push()
        return True

    def end_epoch(self) -> bool:
        """Close the epoch; returns True when training should stop (all sampled epochs done)."""
        if not self.in_epoch:
            return self.finished
        self._close_step()
        self._epoch.pop()
        self._epoch = None
        self.epochs_done += 1
        if self.epochs_done >= self.sampling.epochs:
            self.finish()
        return self.finished

    def begin_step(self, phase: str) -> bool:
        """Open a step of `phase` ("train" or "val"); returns whether it is marked."""
        if not self.in_epoch or self.done[phase] >= self.limits[phase] or self._step is not None:
            return False
        make_range = marks.train_step if phase == "train" else marks.val_step
        self._step = (phase, make_range(self.done[phase]))
        self._step[1].push()
        return True

    def end_step(self, phase: str) -> bool:
        """Close a step of `phase`; True when that phase of the epoch should end now."""
        if self._close_step() == phase:
            self.done[phase] += 1
        return self.in_epoch and self.done[phase] >= self.limits[phase]

    def close(self) -> None:
        """Close open ranges and stop the CUDA profiler (training ended or was interrupted)."""
        self._close_step()
        if self._epoch is not None:
            self._epoch.pop()
            self._epoch = None
        self.finished = True
        if self._profiling:
            profiler.stop()
            self._profiling = False

    def finish(self) -> None:
        """The sample is complete: `close()`, and in `stop` mode exit the process."""
        if self.finished:
            return
        self.close()
        if self.sampling.mode == "stop":
            raise SystemExit(0)

    def _close_step(self) -> str | None:
        if self._step is None:
            return None
        phase, step_range = self._step
        step_range.pop()
        self._step = None
        return phase


class SampledLoop:
    """Base of the framework adapters: `sampling` from arguments (else environment) and `training`."""

    def __init__(self, train_steps=None, val_steps=None, epochs=None, mode=None, cuda_profiler=None):
        super().__init__()  # the framework's Callback, when mixed in
        self.sampling = Sampling.from_env(
            train_steps=train_steps, val_steps=val_steps, epochs=epochs, mode=mode, cuda_profiler=cuda_profiler
        )
        self.training = SampledTraining(self.sampling)


def lazy_class(namespace: dict, name: str, build):
    """A module `__getattr__` that builds class `name` with `build()` on first access, then caches it
    in `namespace` (the module's globals), so importing the module never imports the framework."""

    def __getattr__(attribute):
        if attribute != name:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {attribute!r}")
        namespace[name] = build()
        return namespace[name]

    return __getattr__
