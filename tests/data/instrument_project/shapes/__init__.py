"""Shapes package: re-exports the geometry classes (relative import)."""

from .geometry import Circle, Shape, Square

__all__ = ["Circle", "Shape", "Square"]
