#!/usr/bin/env python3
"""Entry point of the sample project: builds shapes, summarises them, prints the results."""

from __future__ import annotations

import sys

import helpers
from shapes import Circle, Square
from shapes.stats import summarize


def build(sizes):
    # one circle and one square per size
    return [shape for size in sizes for shape in (Circle(size), Square.from_side(size))]


def main(argv=None):
    sizes = [float(a) for a in (argv or [1, 2.5, 4])]
    shapes = build(sizes)
    report = summarize(shapes)
    for line in helpers.format_report(report):
        print(line)
    print("largest:", max(shapes, key=lambda s: s.area()).describe())
    print("scaled:", [round(a, 3) for a in helpers.running_total(s.area() for s in shapes)])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
