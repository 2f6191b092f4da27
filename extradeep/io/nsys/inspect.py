"""What is inside one export: version, tables, GPUs, NVTX domains and names, step marks, event counts.

`inspect_export(path, settings)` returns a plain dict (JSON-ready) that `extradeep inspect` prints
(`extradeep.report.inspect_text`).
Every count is a count of rows in the export, classified as `read_export` classifies them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd

from extradeep.columns import CATEGORY
from extradeep.errors import InputError
from extradeep.io import categories as cat
from extradeep.io.frames import NVTX_MARK, NVTX_RANGE_TYPES, per_category
from extradeep.io.inspect import kernels_by_device, step_summary, top_ranges
from extradeep.io.nsys import events
from extradeep.io.nsys.layout import read_placement
from extradeep.io.nsys.schema import metadata, require_nsys_export, row_count, schema_of
from extradeep.io.settings import ReaderSettings
from extradeep.io.sqlite import fetch_all, open_readonly


def inspect_export(path, settings=None, top: int = 10) -> dict:
    """Summary of one export as a dict; InputError (naming the file) when it cannot be read at all.

    Keys: path, size, nsys_version, schema_version, tables (name -> rows), gpus, nvtx_domains
    (name -> events), top_ranges ([name, count]), steps (convention, epochs, train/val/warm-up
    steps, warnings; or problem), counts_by_category, kernels_by_device, notes.
    """
    settings = ReaderSettings.from_any(settings)
    conn = open_readonly(path)
    try:
        require_nsys_export(conn)
        meta = metadata(conn)
        tables = {t: row_count(conn, t) for t in sorted(schema_of(conn).tables)}
        nvtx = events.nvtx(conn)
        kernels = events.kernels(conn, settings.kernel_names, columns=["deviceId"])
        info = {
            "path": str(path),
            "size": Path(path).stat().st_size,
            "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
            "schema_version": meta.get("EXPORT_SCHEMA_VERSION"),
            "tables": tables,
            "gpus": gpus(conn),
            "nvtx_domains": _domain_counts(nvtx),
            "top_ranges": top_ranges(nvtx, top),
            "steps": step_summary(nvtx, settings, path),
            "counts_by_category": _category_counts(conn, nvtx, kernels),
            "kernels_by_device": kernels_by_device(kernels),
            "placement": read_placement(conn),
        }
        info["notes"] = list(dict.fromkeys(conn.warnings))
        return info
    except InputError as exc:
        raise InputError(path, exc.problem) if exc.source is None else exc from None
    except (sqlite3.Error, UnicodeError) as exc:  # damage that the per-query checks did not see
        raise InputError(path, f"cannot read the export ({exc}); is the file truncated or damaged?") from None
    finally:
        conn.close()


def gpus(conn) -> list[dict]:
    """GPUs listed in TARGET_INFO_GPU (id or, before 2021.2, deviceId) or TARGET_INFO_CUDA_GPU."""
    sch = schema_of(conn)
    table = sch.first_table("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU")
    if table is None:
        return []
    id_col = "id" if sch.has_column(table, "id") else "deviceId"
    rows = fetch_all(conn, f'SELECT "{id_col}", name FROM "{table}" ORDER BY "{id_col}"')
    return [{"id": int(i) if i is not None else None, "name": str(n)} for i, n in rows]


def _domain_counts(nvtx: pd.DataFrame) -> dict[str, int]:
    counts = nvtx["domain"].astype(str).replace("", "(default)").value_counts()
    return {str(k): int(v) for k, v in counts.items()}


def _category_counts(conn, nvtx: pd.DataFrame, kernels: pd.DataFrame) -> dict[str, int]:
    """Events per category, classified as read_export classifies them (MPI ranges are communication)."""
    nccl = kernels[CATEGORY].astype(str).to_numpy() == cat.COMMUNICATION
    mpi = events.mpi(conn, nvtx)
    user_nvtx = nvtx["eventType"].isin((*NVTX_RANGE_TYPES, NVTX_MARK)).to_numpy().copy()
    user_nvtx &= ~per_category(nvtx["domain"], cat.is_mpi_domain)
    counts = {
        cat.COMPUTATION: int((~nccl).sum()),
        cat.COMMUNICATION: int(nccl.sum()) + len(mpi),
        cat.MEMORY: row_count(conn, events.MEMCPY_TABLE) + row_count(conn, events.MEMSET_TABLE),
        cat.CUDA_API: row_count(conn, events.RUNTIME_TABLE),
        cat.NVTX: int(user_nvtx.sum()),
        cat.OS: row_count(conn, events.OSRT_TABLE),
        cat.LIBRARY: sum(row_count(conn, t) for t in events.LIBRARY_TABLES.values()),
    }
    return counts
