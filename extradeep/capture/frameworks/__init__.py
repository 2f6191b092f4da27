"""Training-loop helpers that mark epochs and steps with NVTX and apply the sampling strategy.

The logic lives in `extradeep.capture.frameworks.sampling` (no framework needed); `torch`, `keras` and
`lightning` are thin adapters that import their framework only when used. See docs/profiling.md.
"""

from extradeep.capture.frameworks.sampling import SampledLoop, SampledTraining, Sampling

__all__ = ["SampledLoop", "SampledTraining", "Sampling"]
