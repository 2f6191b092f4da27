"""Statistics over shapes; imports the generated table lazily inside a function."""

import json
from pathlib import Path
from statistics import mean

UNITS = json.loads((Path(__file__).parent / "units.json").read_text())  # package data


def summarize(shapes) -> dict:
    from . import _table

    areas = [shape.area() for shape in shapes]
    return {
        "count": len(areas),
        "mean_area": mean(areas),
        "total_area": sum(areas),
        "weight": _table.weight(len(areas)),
        "unit_" + UNITS["area_unit"]: 1.0,
    }


async def not_instrumented():
    return None
