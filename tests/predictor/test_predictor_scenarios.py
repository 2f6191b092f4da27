"""The what-if scenarios' checks and notes (`predictor.scenarios`): a scenario far beyond the measured
ranks is flagged, and a pattern that matches no op of the run is named once."""

from __future__ import annotations

from extradeep.predictor.scenarios import EXTRAPOLATION_FACTOR, extrapolation_warnings, unmatched_patterns
from extradeep.predictor.whatif import parse_what_if


def test_only_ranks_beyond_the_extrapolation_factor_are_flagged():
    measured = 2
    at_limit = parse_what_if(f"ranks={EXTRAPOLATION_FACTOR * measured}")
    beyond = parse_what_if(f"ranks={EXTRAPOLATION_FACTOR * measured + 1}; kernel:*gemm*=0.5")
    assert extrapolation_warnings([at_limit], measured) == []
    (line,) = extrapolation_warnings([at_limit, beyond], measured)
    assert line.startswith(f"what-if {beyond.label!r}: {EXTRAPOLATION_FACTOR * measured + 1} ranks")
    assert f"the {measured} rank(s) measured" in line


def test_a_pattern_matching_no_op_of_the_run_is_named_once(ddp_prediction):
    nodes = ddp_prediction.graph.nodes
    missing, present = "*no_such_kernel*", "*gemm*"
    scenarios = [
        parse_what_if(f"kernel:{missing}=0.5"),
        parse_what_if(f"kernel:{missing}=0.5; kernel:{present}=0.5"),
        parse_what_if(f"name:{present}=2"),
    ]
    (line,) = unmatched_patterns(scenarios, nodes)
    assert f"pattern {missing!r} matches no kernel" in line
    assert line.startswith(f"what-if {scenarios[0].label!r}")
