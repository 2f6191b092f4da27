"""The PyTorch loop helper and the sampling core it drives (no torch needed)."""

import pytest

from extradeep.capture.frameworks import profiler
from extradeep.capture.frameworks.sampling import Sampling
from extradeep.capture.frameworks.torch import StepSampler
from extradeep.errors import InputError


class CountingLoader:
    """An iterable of batches that counts how many were fetched."""

    def __init__(self, n):
        self.n, self.fetched = n, 0

    def __iter__(self):
        for i in range(self.n):
            self.fetched += 1
            yield i


def run_loop(sampler, epochs=10, train=10, val=4):
    seen = []
    for epoch in sampler.epochs(epochs):
        train_loader, val_loader = CountingLoader(train), CountingLoader(val)
        trained = list(sampler.train(train_loader))
        validated = list(sampler.val(val_loader))
        seen.append((epoch, trained, validated, train_loader.fetched, val_loader.fetched))
    return seen


def test_default_sample_is_5_train_2_val_steps_of_2_epochs(fake_nvtx):
    seen = run_loop(StepSampler())
    assert seen == [
        (0, [0, 1, 2, 3, 4], [0, 1], 5, 2),
        (1, [0, 1, 2, 3, 4], [0, 1], 5, 2),
    ]  # loaders are not read past the sample
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 5, 2)


def test_environment_sets_the_sample_and_arguments_win(fake_nvtx, monkeypatch):
    monkeypatch.setenv("EXTRADEEP_TRAIN_STEPS", "3")
    monkeypatch.setenv("EXTRADEEP_VAL_STEPS", "1")
    monkeypatch.setenv("EXTRADEEP_EPOCHS", "3")
    run_loop(StepSampler())
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(3, 3, 1)

    fake_nvtx.CALLS.clear()
    run_loop(StepSampler(train_steps=2, epochs=1))
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(1, 2, 1)


def test_short_loaders_end_the_phase_early_and_every_step_is_marked(fake_nvtx):
    seen = run_loop(StepSampler(), train=3, val=1)
    assert [s[1] for s in seen] == [[0, 1, 2], [0, 1, 2]]
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 3, 1)


def test_stop_mode_exits_after_the_sample_with_ranges_closed(fake_nvtx, monkeypatch):
    monkeypatch.setenv("EXTRADEEP_SAMPLING", "stop")
    sampler = StepSampler(train_steps=2, val_steps=1)
    with pytest.raises(SystemExit) as stopped:
        run_loop(sampler)
    assert stopped.value.code == 0
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 2, 1)


def test_breaking_out_of_the_loops_closes_the_ranges(fake_nvtx):
    sampler = StepSampler()
    for _epoch in sampler.epochs(5):
        for i in sampler.train(range(10)):
            if i == 1:
                break
        break
    assert fake_nvtx.nested_names() == ["epoch 0", "epoch 0/train_step 0", "epoch 0/train_step 1"]
    assert sampler.training.finished


def test_cuda_profiler_brackets_exactly_the_sampled_marks(fake_nvtx, monkeypatch):
    events = []
    monkeypatch.setattr(profiler, "start", lambda: events.append(("start", len(fake_nvtx.CALLS))) or "fake")
    monkeypatch.setattr(profiler, "stop", lambda: events.append(("stop", len(fake_nvtx.CALLS))) or "fake")
    sampler = StepSampler(cuda_profiler=True)
    run_loop(sampler)
    assert events == [("start", 0), ("stop", len(fake_nvtx.CALLS))]
    assert sampler.training.profiler_backend == "fake"  # what start() reported, for users to check

    events.clear()
    run_loop(StepSampler())  # off by default
    assert events == []


class FakeCudart:
    def __init__(self, status):
        self.status, self.calls = status, []

    def cudaProfilerStart(self):
        self.calls.append("start")
        return self.status

    def cudaProfilerStop(self):
        self.calls.append("stop")
        return self.status


def test_profiler_uses_cudart_and_is_a_silent_noop_without_a_gpu(monkeypatch, recwarn):
    monkeypatch.setattr(profiler, "_torch_profiler", lambda: None)
    monkeypatch.setattr(profiler, "_cudart", lambda: None)
    assert profiler.start() is None and profiler.stop() is None

    no_driver = FakeCudart(35)
    monkeypatch.setattr(profiler, "_cudart", lambda: no_driver)
    assert profiler.start() is None and no_driver.calls == ["start"]

    gpu = FakeCudart(0)
    monkeypatch.setattr(profiler, "_cudart", lambda: gpu)
    assert (profiler.start(), profiler.stop()) == ("cudart", "cudart")
    assert gpu.calls == ["start", "stop"] and not recwarn.list

    broken = FakeCudart(719)
    monkeypatch.setattr(profiler, "_cudart", lambda: broken)
    with pytest.warns(RuntimeWarning, match="cudaProfilerStart returned CUDA error 719"):
        profiler.start()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EXTRADEEP_TRAIN_STEPS", "five"),
        ("EXTRADEEP_EPOCHS", "0"),
        ("EXTRADEEP_SAMPLING", "sometimes"),
        ("EXTRADEEP_VAL_STEPS", "-1"),
    ],
)
def test_bad_settings_are_one_line_input_errors(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(InputError, match=variable):
        Sampling.from_env()


def test_real_pytorch_loop_is_sampled(fake_nvtx):
    torch = pytest.importorskip("torch")
    x = torch.randn(80, 3)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    sampler, updates = StepSampler(), 0
    for _epoch in sampler.epochs(10):
        for inputs, targets in sampler.train(loader):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
            updates += 1
        with torch.no_grad():
            for inputs, targets in sampler.val(loader):
                torch.nn.functional.mse_loss(model(inputs), targets).item()
    assert updates == 10
    assert fake_nvtx.nested_names() == fake_nvtx.sampled_names(2, 5, 2)
