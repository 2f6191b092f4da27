"""PyTorch profiler (Kineto) Chrome-trace JSON: load one trace, per-step sums, inspect, predictor frames."""
