"""Simulated Nsight Systems exports of distributed training with known ground truth.

`simulate(outdir, ...)` writes one SQLite export per (point, repetition, rank) in the schema of a
real nsys export plus `truth.json`; `write_nvtx_export(path, ranges)` writes a minimal export from
given NVTX ranges. See docs/architecture.md, section "Simulator".
"""

from extradeep.simulate.nvtx_export import write_nvtx_export
from extradeep.simulate.run import Simulation, simulate

__all__ = ["Simulation", "simulate", "write_nvtx_export"]
