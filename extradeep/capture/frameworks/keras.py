"""A Keras 3 callback that marks epochs and steps and applies the sampling strategy.

    from extradeep.capture.frameworks.keras import ExtraDeepCallback

    model.fit(train_ds, validation_data=val_ds, epochs=100, callbacks=[ExtraDeepCallback()])

Training steps of the first E epochs are marked `train_step i` and validation batches run by
`fit` `val_step i`, inside `epoch e`. After N training steps the callback sets
`model.stop_training`, which ends the epoch's training loop; Keras then validates (ended after M
steps through `model.stop_evaluating`) and calls `on_epoch_end`, where the callback clears the flag
again unless the sample is complete. Put it first in `callbacks` so a later callback's own
`stop_training` (EarlyStopping) is not cleared. With `steps_per_execution` > 1 one marked step
covers that many batches. Keras 2 (tf.keras before TF 2.16) has no `stop_evaluating`: pass
`validation_steps=M` to `fit` there, or the unmarked validation batches count as time between steps.

`ExtraDeepCallback` subclasses `keras.callbacks.Callback`, imported on first use; the logic is in
`KerasSampling`, which needs no Keras.
"""

from __future__ import annotations

from extradeep.capture.frameworks.sampling import SampledLoop, lazy_class


class KerasSampling(SampledLoop):
    """Keras callback hooks over `SampledTraining`; mixed into the real Callback by the adapter."""

    _cut_epoch = False  # this callback ended the epoch's batch loop through stop_training

    def on_epoch_begin(self, epoch, logs=None):
        self.training.begin_epoch()

    def on_train_batch_begin(self, batch, logs=None):
        self.training.begin_step("train")

    def on_train_batch_end(self, batch, logs=None):
        if self.training.end_step("train"):
            self.model.stop_training = True
            self._cut_epoch = True

    def on_test_batch_begin(self, batch, logs=None):
        self.training.begin_step("val")

    def on_test_batch_end(self, batch, logs=None):
        if self.training.end_step("val"):
            self.model.stop_evaluating = True

    def on_epoch_end(self, epoch, logs=None):
        if self.training.end_epoch():
            self.model.stop_training = True
        elif self._cut_epoch:
            self.model.stop_training = False
        self._cut_epoch = False

    def on_train_end(self, logs=None):
        self.training.close()


def _adapter():
    import keras

    return type(
        "ExtraDeepCallback",
        (KerasSampling, keras.callbacks.Callback),
        {"__doc__": "Keras callback: NVTX epoch/step marks and the sampling strategy.", "__module__": __name__},
    )


__getattr__ = lazy_class(globals(), "ExtraDeepCallback", _adapter)
