"""Parallel layouts read from profiles (issue 23): each run's tensor-, pipeline- and data-parallel degrees,
micro-batching, ZeRO stage and recomputation where its profiles tell them (Kineto process groups and
collective metadata, NCCL's NVTX payloads, framework markers), else from file-name tokens or a
manifest; and the per-part times of its steps (`layout_parts`). See docs/architecture.md, "Parallel
layouts"."""

from extradeep.io.parallel.infer import Field, infer_layout
from extradeep.io.parallel.layout import profile_facts, read_layout, run_layouts
from extradeep.io.parallel.parts import PARTS_COLUMNS, file_parts, layout_parts

__all__ = [
    "PARTS_COLUMNS",
    "Field",
    "file_parts",
    "infer_layout",
    "layout_parts",
    "profile_facts",
    "read_layout",
    "run_layouts",
]
