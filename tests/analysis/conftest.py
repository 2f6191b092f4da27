"""Fixtures for analysis tests: a runtime law with a known formula that stands in for a fitted Model."""

import numpy as np
import pytest


class LawModel:
    """A runtime law with a known formula, standing in for a fitted Model (same interface)."""

    def __init__(self, law, growth="O(1)", key=0.0, width=0.1):
        self.law, self._growth, self._key, self.width, self.smape = law, growth, key, width, 0.0

    def predict(self, X):
        return self.law(np.asarray(X, dtype=float))

    def interval(self, X, level=0.95):
        y = self.predict(X)
        return y * (1 - self.width), y * (1 + self.width)

    def formula(self):
        return self._growth

    def growth(self):
        return self._growth

    def growth_key(self):
        return self._key


@pytest.fixture
def law():
    """The LawModel class: law(lambda p: 1000 / p) behaves like a fitted runtime model."""
    return LawModel
