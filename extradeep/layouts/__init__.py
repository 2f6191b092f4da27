"""Which parallel layout? A step model composed per layout from calibrated parts, memory
feasibility, energy and cost, and the search over tensor, pipeline and data parallelism, micro-batches,
ZeRO stages and recomputation (issue 23). docs/analysis.md, "Parallel layouts", explains the model."""
