"""The Keras callback: its logic against a fake fit loop shaped like Keras 3's, and real Keras when installed."""

import sys
import types

import pytest

from extradeep.capture.frameworks import keras as keras_helper


class FakeCallback:
    """keras.callbacks.Callback's surface: set_model / model / no-op hooks."""

    def __init__(self):
        self._model = None

    def set_model(self, model):
        self._model = model

    @property
    def model(self):
        return self._model


class FakeModel:
    """Keras 3 `fit` control flow (backend trainers): stop_training ends the batch loop, validation
    still runs, stop_evaluating ends it, and stop_training after on_epoch_end ends training."""

    def fit(self, callbacks, epochs, steps, val_steps):
        self.trained, self.evaluated = [], []
        for cb in callbacks:
            cb.set_model(self)
        self.stop_training = False
        for epoch in range(epochs):
            _hook(callbacks, "on_epoch_begin", epoch)
            for step in range(steps):
                _hook(callbacks, "on_train_batch_begin", step)
                self.trained.append((epoch, step))
                _hook(callbacks, "on_train_batch_end", step)
                if self.stop_training:
                    break
            self.stop_evaluating = False
            for step in range(val_steps):
                _hook(callbacks, "on_test_batch_begin", step)
                self.evaluated.append((epoch, step))
                _hook(callbacks, "on_test_batch_end", step)
                if self.stop_evaluating:
                    break
            _hook(callbacks, "on_epoch_end", epoch)
            if self.stop_training:
                break
        _hook(callbacks, "on_train_end")


def _hook(callbacks, name, *args):
    for cb in callbacks:
        getattr(cb, name, lambda *a: None)(*args)


@pytest.fixture
def fake_keras(monkeypatch):
    module = types.ModuleType("keras")
    module.callbacks = types.SimpleNamespace(Callback=FakeCallback)
    monkeypatch.setitem(sys.modules, "keras", module)
    monkeypatch.delitem(keras_helper.__dict__, "ExtraDeepCallback", raising=False)
    return module


def test_adapter_subclasses_the_keras_callback_lazily(fake_keras, fake_nvtx):
    callback = keras_helper.ExtraDeepCallback()
    assert isinstance(callback, FakeCallback) and isinstance(callback, keras_helper.KerasSampling)


def test_fit_runs_only_the_sample_and_marks_it(fake_keras, fake_nvtx):
    model = FakeModel()
    model.fit([keras_helper.ExtraDeepCallback()], epochs=50, steps=100, val_steps=20)
    assert model.trained == [(e, s) for e in range(2) for s in range(5)]
    assert model.evaluated == [(e, s) for e in range(2) for s in range(2)]
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 5, 2)


def test_sample_from_environment_and_stop_mode(fake_keras, fake_nvtx, monkeypatch):
    monkeypatch.setenv("EXTRADEEP_TRAIN_STEPS", "2")
    monkeypatch.setenv("EXTRADEEP_VAL_STEPS", "1")
    monkeypatch.setenv("EXTRADEEP_EPOCHS", "3")
    monkeypatch.setenv("EXTRADEEP_SAMPLING", "stop")
    model = FakeModel()
    with pytest.raises(SystemExit):
        model.fit([keras_helper.ExtraDeepCallback()], epochs=50, steps=100, val_steps=20)
    assert len(model.trained) == 6 and len(model.evaluated) == 3
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(3, 2, 1)


def test_fewer_epochs_than_sampled_closes_everything_at_train_end(fake_keras, fake_nvtx):
    model = FakeModel()
    model.fit([keras_helper.ExtraDeepCallback(epochs=4)], epochs=1, steps=3, val_steps=0)
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(1, 3, 0)


def test_real_keras_fit_is_sampled(fake_nvtx, monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    np = pytest.importorskip("numpy")
    monkeypatch.delitem(keras_helper.__dict__, "ExtraDeepCallback", raising=False)
    x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(
        x, y, batch_size=4, epochs=10, validation_data=(x, y), verbose=0, callbacks=[keras_helper.ExtraDeepCallback()]
    )
    assert len(history.history["loss"]) == 2
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 5, 2)
