"""Mark and sample a plain PyTorch training loop.

    from extradeep.capture.frameworks.torch import StepSampler

    sampler = StepSampler()                      # 5 train, 2 val steps of 2 epochs (or EXTRADEEP_*)
    for epoch in sampler.epochs(num_epochs):
        for batch in sampler.train(train_loader):
            ...                                  # forward, backward, optimizer step
        for batch in sampler.val(val_loader):
            ...

Each loop body is one NVTX step range (`train_step i`, `val_step i`) inside `epoch e`; fetching
the next batch lies between steps, as in Lightning. The loaders stop after the sampled steps and
`epochs` after the sampled epochs (see `extradeep.capture.frameworks.sampling`). Nothing here imports
torch; the CUDA profiler calls use it when it is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from extradeep.capture.frameworks.sampling import SampledLoop


class StepSampler(SampledLoop):
    """Wraps the epoch loop and the batch iterables of a hand-written training loop."""

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
        return self._steps(batches, "train")

    def val(self, batches: Iterable) -> Iterator:
        """Yield validation batches, marking each; ends after the sampled validation steps."""
        return self._steps(batches, "val")

    def close(self) -> None:
        """Close open ranges and stop the profiler, e.g. after an interrupted loop."""
        self.training.close()

    def _steps(self, batches: Iterable, phase: str) -> Iterator:
        for batch in batches:
            self.training.begin_step(phase)
            try:
                yield batch
            except GeneratorExit:
                self.training.end_step(phase)
                raise
            if self.training.end_step(phase):
                return
