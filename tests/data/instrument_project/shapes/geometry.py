"""Geometry: a small class hierarchy with static, class and property methods."""

import math


class Shape:
    """Base class."""

    def area(self) -> float:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{type(self).__name__}(area={self.area():.3f})"

    def __repr__(self):
        return self.describe()


class Circle(Shape):
    def __init__(self, radius: float):
        self.radius = radius

    def area(self) -> float:
        return math.pi * self.radius**2

    @property
    def diameter(self) -> float:
        return 2 * self.radius


class Square(Shape):
    def __init__(self, side: float):
        self.side = side

    def area(self) -> float:
        def squared(x):  # nested: not instrumented
            return x * x

        return squared(self.side)

    @staticmethod
    def from_side(side: float) -> "Square":
        return Square(side)

    class Corner:
        def count(self) -> int:
            return 4
