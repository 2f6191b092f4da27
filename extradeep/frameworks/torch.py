"""Mark and sample a plain PyTorch training loop.

    from extradeep.frameworks.torch import StepSampler

    sampler = StepSampler()                      # 5 train, 2 val steps of 2 epochs (or EXTRADEEP_*)
    for epoch in sampler.epochs(num_epochs):
        for batch in sampler.train(train_loader):
            ...                                  # forward, backward, optimizer step
        for batch in sampler.val(val_loader):
            ...

Each loop body is one NVTX step range (`train_step i`, `val_step i`) inside `epoch e`; fetching
the next batch lies between steps, as in Lightning. The loaders stop after the sampled steps and
`epochs` after the sampled epochs (see `extradeep.frameworks.sampling`). Nothing here imports
torch; the CUDA profiler calls use it when it is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from extradeep.frameworks.sampling import SampledTraining, Sampling


class StepSampler:
    """Wraps the epoch loop and the batch iterables of a hand-written training loop."""

    def __init__(self, train_steps=None, val_steps=None, epochs=None, mode=None, cuda_profiler=None):
        self.sampling = Sampling.from_env(
            train_steps=train_steps, val_steps=val_steps, epochs=epochs, mode=mode, cuda_profiler=cuda_profiler
        )
        self.training = SampledTraining(self.sampling)

    def epochs(self, epochs: int | Iterable) -> Iterator:
        """Yield from `epochs` (a count or an iterable) until the sampled epochs are done."""
        for item in range(epochs) if isinstance(epochs, int) else epochs:
            if not self.training.begin_epoch():
                return
            try:
                yield item
            except GeneratorExit:
                self.training.close()
                raise
            if self.training.end_epoch():
                return

    def train(self, batches: Iterable) -> Iterator:
        """Yield training batches, marking each; ends after the sampled training steps."""
        return self._steps(batches, self.training.begin_train_step, self.training.end_train_step)

    def val(self, batches: Iterable) -> Iterator:
        """Yield validation batches, marking each; ends after the sampled validation steps."""
        return self._steps(batches, self.training.begin_val_step, self.training.end_val_step)

    def close(self) -> None:
        """Close open ranges and stop the profiler, e.g. after an interrupted loop."""
        self.training.close()

    @staticmethod
    def _steps(batches: Iterable, begin, end) -> Iterator:
        for batch in batches:
            begin()
            try:
                yield batch
            except GeneratorExit:
                end()
                raise
            if end():
                return
