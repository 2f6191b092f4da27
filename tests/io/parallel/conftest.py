"""Parsed profiles of the simulated GPT studies, read once per session."""

from __future__ import annotations

import pytest

from extradeep.io.parallel.layout import profile_facts


@pytest.fixture(scope="session")
def facts_of():
    """facts_of(path) -> ProfileFacts, cached (the readers are pure functions of the file)."""
    cache = {}

    def read(path):
        key = str(path)
        if key not in cache:
            cache[key] = profile_facts(key)
        return cache[key]

    read.cache = cache
    return read
