"""Trace-based predictor: replay one run's per-rank Nsight traces, find the critical path, answer what-ifs.

`predict(run_dir, what_if=[...])` returns a `Prediction` of DataFrames; `replay_timeline` gives
the replayed timeline for plotting. See docs/predictor.md.
"""

from extradeep.predictor.api import BASELINE, Prediction, predict, replay_timeline, resolve_run
from extradeep.predictor.whatif import WhatIf, parse_what_if

__all__ = ["BASELINE", "Prediction", "WhatIf", "parse_what_if", "predict", "replay_timeline", "resolve_run"]
