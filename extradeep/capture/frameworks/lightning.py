"""A PyTorch Lightning callback that marks epochs and steps and applies the sampling strategy.

    from extradeep.capture.frameworks.lightning import ExtraDeepCallback

    trainer = Trainer(max_epochs=100, callbacks=[ExtraDeepCallback()])

At `setup` the callback caps the trainer at the sample (`limit_train_batches` = N,
`limit_val_batches` = M, `max_epochs` = E), which is how Lightning ends an epoch early, then marks
`epoch e`, `train_step i` and `val_step i`. Sanity-check validation is not marked. After the last
sampled epoch it sets `trainer.should_stop` (and in `stop` mode exits the process).

`ExtraDeepCallback` subclasses `lightning.pytorch.Callback` (or `pytorch_lightning.Callback` when
only that is installed), imported on first use; `callback_class("pytorch_lightning")` builds it for
the other package. The logic is in `LightningSampling`, which needs no Lightning.
"""

from __future__ import annotations

import importlib

from extradeep.capture.frameworks.sampling import SampledLoop, lazy_class

PACKAGES = ("lightning.pytorch", "pytorch_lightning")


class LightningSampling(SampledLoop):
    """Lightning callback hooks over `SampledTraining`; mixed into the real Callback by the adapter."""

    def setup(self, trainer, pl_module, stage=None):
        if stage not in (None, "fit"):
            return
        sample = self.sampling
        trainer.limit_train_batches = _cap(trainer.limit_train_batches, sample.train_steps)
        trainer.limit_val_batches = _cap(trainer.limit_val_batches, sample.val_steps)
        max_epochs = trainer.fit_loop.max_epochs
        trainer.fit_loop.max_epochs = sample.epochs if max_epochs in (None, -1) else min(max_epochs, sample.epochs)

    def on_train_epoch_start(self, trainer, pl_module):
        self.training.begin_epoch()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.training.begin_step("train")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.training.end_step("train")

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        if not trainer.sanity_checking:
            self.training.begin_step("val")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not trainer.sanity_checking:
            self.training.end_step("val")

    def on_train_epoch_end(self, trainer, pl_module):
        if self.training.end_epoch():
            trainer.should_stop = True

    def on_fit_end(self, trainer, pl_module):
        self.training.close()

    def on_exception(self, trainer, pl_module, exception):
        self.training.close()


def _cap(limit, steps: int):
    """A batch limit no larger than `steps` (Lightning limits are fractions (float) or counts (int))."""
    if isinstance(limit, int) and not isinstance(limit, bool):
        return min(limit, steps)
    return steps


def callback_class(package: str | None = None) -> type:
    """The callback class for `package` ("lightning.pytorch" or "pytorch_lightning"; default: first found)."""
    for name in [package] if package else PACKAGES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            if package:
                raise
            continue
        return type(
            "ExtraDeepCallback",
            (LightningSampling, module.Callback),
            {"__doc__": "Lightning callback: NVTX epoch/step marks and the sampling strategy.", "__module__": __name__},
        )
    raise ImportError("extradeep's Lightning callback needs `lightning` or `pytorch_lightning` installed")


__getattr__ = lazy_class(globals(), "ExtraDeepCallback", callback_class)
