"""Statistics over shapes; imports the generated table lazily inside a function."""

from statistics import mean


def summarize(shapes) -> dict:
    from . import _table

    areas = [shape.area() for shape in shapes]
    return {"count": len(areas), "mean_area": mean(areas), "total_area": sum(areas),
            "weight": _table.weight(len(areas))}


async def not_instrumented():
    return None
