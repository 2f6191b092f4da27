"""Bucket layouts: the DP is exact (against enumerating every layout), DDP's size rule holds, and the
bucket_cap_mb named for a layout rebuilds it."""

from __future__ import annotations

import numpy as np
import pytest

from extradeep.predictor.buckets import (
    MIB,
    CollectiveCost,
    best_layout,
    cap_interval,
    cap_layout,
    chain_ends,
    check_layout,
    nice_cap_mb,
)
from extradeep.simulate.sweep import all_layouts


def _instance(seed: int, n: int):
    rng = np.random.default_rng(seed)
    ready = np.cumsum(rng.uniform(0.2e-3, 3e-3, n))
    sizes = rng.choice([0.5, 2, 8, 30], n) * MIB * rng.uniform(0.5, 1.5, n)
    cost = CollectiveCost(alpha=rng.uniform(10e-6, 2e-3), beta=rng.uniform(0.05, 1.0) * 1e-9)
    return ready, sizes, cost, float(rng.uniform(-1e-3, 2e-3))


@pytest.mark.parametrize("seed", range(12))
def test_the_dp_finds_the_earliest_end_of_all_layouts(seed):
    n = 3 + seed % 6
    ready, sizes, cost, start = _instance(seed, n)
    layout, end = best_layout(ready, sizes, cost, start)
    check_layout(layout, n)
    ends = [chain_ends(ready, sizes, lay, cost, start)[-1] for lay in all_layouts(n)]
    assert end == pytest.approx(min(ends), rel=1e-12)
    assert chain_ends(ready, sizes, layout, cost, start)[-1] == pytest.approx(end, rel=1e-12)


def test_the_chain_model_starts_a_bucket_when_its_last_gradient_is_ready():
    ready = np.array([1.0, 2.0, 10.0])
    sizes = np.full(3, 1.0)
    cost = CollectiveCost(alpha=0.5, beta=1.0)
    # one bucket: starts at 10 (its last gradient), lasts 0.5 + 3
    assert chain_ends(ready, sizes, [3], cost)[-1] == pytest.approx(13.5)
    # [2, 1]: the first starts at 2 and ends at 4.5; the second starts at 10
    assert chain_ends(ready, sizes, [2, 1], cost).tolist() == pytest.approx([4.5, 11.5])
    # pieces: the same bytes in two collectives pay one more latency
    assert chain_ends(ready, sizes, [3], cost, parts=[2])[-1] == pytest.approx(14.0)


@pytest.mark.parametrize("seed", range(8))
def test_cap_layout_follows_ddps_rule(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.uniform(0.1, 12, 25) * MIB
    cap = rng.uniform(2, 40) * MIB
    layout = cap_layout(sizes, cap)
    check_layout(layout, len(sizes))
    cuts = np.cumsum([0, *layout])
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        limit = min(MIB, cap) if k == 0 else cap
        if b < len(sizes):  # a closed bucket reached its limit, and only with its last gradient
            assert sizes[a:b].sum() >= limit
            assert sizes[a : b - 1].sum() < limit
        else:
            assert sizes[a:b].sum() < limit or b - a == 1 or sizes[a : b - 1].sum() < limit


@pytest.mark.parametrize("seed", range(8))
def test_the_cap_named_for_a_layout_rebuilds_it(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.uniform(0.1, 12, 30) * MIB
    layout = cap_layout(sizes, rng.uniform(3, 50) * MIB)
    lo, hi = cap_interval(sizes, layout)
    mb = nice_cap_mb(lo, hi)
    assert lo < mb * MIB <= hi + 1e-6
    assert cap_layout(sizes, mb * MIB) == layout
    for cap in np.linspace(lo, hi, 7)[1:]:
        assert cap_layout(sizes, cap) == layout


def test_a_layout_no_cap_can_build_has_no_cap():
    sizes = np.full(6, 4 * MIB)
    # a cap that closes the second bucket after one gradient closes every later one after one too
    assert cap_interval(sizes, [1, 1, 4]) is None
    assert cap_interval(sizes, [1, 4, 1]) is not None
    with pytest.raises(ValueError):
        check_layout([2, 0, 4], 6)
