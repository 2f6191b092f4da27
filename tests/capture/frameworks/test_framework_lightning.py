"""The Lightning callback: its logic against a fake trainer loop, and real Lightning when installed."""

import sys
import types

import pytest

from extradeep.capture.frameworks import lightning as lightning_helper


class FakeCallback:
    pass


class FakeTrainer:
    """Lightning 2 fit control flow: setup hook, sanity check, epochs capped by max_epochs and
    limit_*_batches (int = count, float = fraction), validation inside the epoch, should_stop."""

    def __init__(self, max_epochs=100, limit_train_batches=1.0, limit_val_batches=1.0):
        self.limit_train_batches, self.limit_val_batches = limit_train_batches, limit_val_batches
        self.fit_loop = types.SimpleNamespace(max_epochs=max_epochs)
        self.sanity_checking = self.should_stop = False

    def fit(self, callbacks, train_len, val_len):
        self.trained, self.evaluated = [], []
        _hook(callbacks, "setup", self, None, "fit")
        self.sanity_checking = True
        self._loop(callbacks, "validation", 2, None)
        self.sanity_checking = False
        for epoch in range(self.fit_loop.max_epochs):
            _hook(callbacks, "on_train_epoch_start", self, None)
            self._loop(callbacks, "train", _limit(train_len, self.limit_train_batches), self.trained, epoch)
            self._loop(callbacks, "validation", _limit(val_len, self.limit_val_batches), self.evaluated, epoch)
            _hook(callbacks, "on_train_epoch_end", self, None)
            if self.should_stop:
                break
        _hook(callbacks, "on_fit_end", self, None)

    def _loop(self, callbacks, stage, n, record, epoch=None):
        for i in range(n):
            _hook(callbacks, f"on_{stage}_batch_start", self, None, i, i)
            if record is not None:
                record.append((epoch, i))
            _hook(callbacks, f"on_{stage}_batch_end", self, None, None, i, i)


def _limit(length, limit):
    return min(length, limit) if isinstance(limit, int) else int(length * limit)


def _hook(callbacks, name, *args):
    for cb in callbacks:
        getattr(cb, name, lambda *a: None)(*args)


@pytest.fixture
def fake_lightning(monkeypatch):
    package = types.ModuleType("lightning")
    module = types.ModuleType("lightning.pytorch")
    module.Callback = FakeCallback
    package.pytorch = module
    monkeypatch.setitem(sys.modules, "lightning", package)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", module)
    monkeypatch.delitem(lightning_helper.__dict__, "ExtraDeepCallback", raising=False)
    return module


def test_adapter_subclasses_the_lightning_callback_lazily(fake_lightning, fake_nvtx):
    callback = lightning_helper.ExtraDeepCallback()
    assert isinstance(callback, FakeCallback) and isinstance(callback, lightning_helper.LightningSampling)


def test_fit_is_capped_to_the_sample_and_sanity_checks_are_not_marked(fake_lightning, fake_nvtx):
    trainer = FakeTrainer()
    trainer.fit([lightning_helper.ExtraDeepCallback()], train_len=100, val_len=30)
    assert (trainer.limit_train_batches, trainer.limit_val_batches, trainer.fit_loop.max_epochs) == (5, 2, 2)
    assert trainer.trained == [(e, s) for e in range(2) for s in range(5)]
    assert trainer.evaluated == [(e, s) for e in range(2) for s in range(2)]
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 5, 2)


def test_smaller_user_limits_are_kept(fake_lightning, fake_nvtx):
    trainer = FakeTrainer(max_epochs=1, limit_train_batches=3, limit_val_batches=0.5)
    trainer.fit([lightning_helper.ExtraDeepCallback()], train_len=100, val_len=30)
    assert (trainer.limit_train_batches, trainer.limit_val_batches, trainer.fit_loop.max_epochs) == (3, 2, 1)
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(1, 3, 2)


def test_stop_mode_exits_after_the_last_sampled_epoch(fake_lightning, fake_nvtx, monkeypatch):
    monkeypatch.setenv("EXTRADEEP_SAMPLING", "stop")
    trainer = FakeTrainer()
    with pytest.raises(SystemExit):
        trainer.fit([lightning_helper.ExtraDeepCallback(val_steps=1)], train_len=100, val_len=30)
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 5, 1)


def test_missing_lightning_is_a_clear_import_error(monkeypatch):
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(lightning_helper.__dict__, "ExtraDeepCallback", raising=False)
    with pytest.raises(ImportError, match="needs `lightning` or `pytorch_lightning`"):
        lightning_helper.ExtraDeepCallback


def test_real_lightning_fit_is_sampled(fake_nvtx, monkeypatch, tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    torch = pytest.importorskip("torch")
    monkeypatch.delitem(lightning_helper.__dict__, "ExtraDeepCallback", raising=False)

    class Regression(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    x = torch.randn(64, 3)
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    trainer = pl.Trainer(
        max_epochs=10,
        callbacks=[lightning_helper.ExtraDeepCallback()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
    )
    trainer.fit(Regression(), loader, loader)
    assert trainer.current_epoch == 2
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 5, 2)
