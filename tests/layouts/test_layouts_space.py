"""The layout space's helpers: divisors (the GPU counts' factorisations) against a brute-force count."""

from __future__ import annotations

import pytest

from extradeep.layouts.space import divisors


@pytest.mark.parametrize("n", [1, 2, 7, 12, 36, 64, 97, 360, 512, 1000, 1536, 2 * 3 * 5 * 7 * 11, 99991])
def test_divisors_match_a_brute_force_count(n):
    assert divisors(n) == [k for k in range(1, n + 1) if n % k == 0]


def test_divisors_of_the_largest_count_are_found_by_its_square_root():
    """2^31 - 1 (the largest GPU count a search takes) is a Mersenne prime; 2^30 has 31 divisors."""
    assert divisors(2**31 - 1) == [1, 2**31 - 1]
    assert divisors(2**30) == [2**k for k in range(31)]
