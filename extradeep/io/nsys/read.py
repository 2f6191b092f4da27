"""The per-file stage for Nsight Systems exports: one export in, per-step sums out, on one connection.

`read_export(path, settings)` is a pure function of the file and the settings, so it can run in worker
processes or on a cluster and be cached. `read_export_once` is the same pass returning everything later
steps need from the file (the sums, the rank's placement and, when asked, the replay's frames), so no
later step opens the export again. The tables are read here (nsys-specific); the step finding and the
sums are the shared base's (`extradeep.io.steps`, `extradeep.io.sums`).
"""

from __future__ import annotations

import sqlite3

import pandas as pd

from extradeep.errors import InputError
from extradeep.io.frames import ProfileRead
from extradeep.io.nsys import events
from extradeep.io.nsys.batched import sum_tables
from extradeep.io.nsys.layout import read_placement
from extradeep.io.nsys.schema import require_nsys_export
from extradeep.io.settings import ReaderSettings
from extradeep.io.sqlite import open_readonly
from extradeep.io.steps import find_steps
from extradeep.io.sums import step_sums

__all__ = ["read_export", "read_export_once", "read_tables"]

LAUNCH_COLUMNS = ["launchKey"]  # besides start, end and name: what the launch join needs
# with the replay's frames wanted, the tables are read once with the columns both need
REPLAY_GPU_COLUMNS = ["deviceId", "streamId", "correlationId", "globalPid", "pid", *LAUNCH_COLUMNS]
REPLAY_CPU_COLUMNS = ["globalTid", "pid", "tid"]


def read_export(path, settings=None) -> pd.DataFrame:
    """Per-step sums of one export: columns region, kind, category, metric, epoch, phase, step, value.

    Metrics: time (seconds), visits (count), bytes (memcpy, memset, MPI where known). Region "step"
    (kind and category "step") carries the NVTX step durations, region "gpu busy" (kind "busy",
    category "step") the time in each step covered by any GPU activity. Only non-zero sums are listed (a
    region absent from a step is 0 there). `attrs` holds `notes` (one-line warnings), `convention`
    (which step marks matched), `n_steps` per phase and `not_counted` (events outside the measured
    epochs). Raises InputError naming the file for unusable input.
    """
    return read_export_once(path, settings).frame


def read_export_once(path, settings=None, *, replay: bool = False) -> ProfileRead:
    """One pass over one export on one read-only connection: its per-step sums (`read_export`'s frame),
    its placement and, with `replay`, the frames the exposure replay needs
    (`extradeep.io.nsys.replay.replay_frames`)."""
    settings = ReaderSettings.from_any(settings)
    conn = open_readonly(path)
    try:
        require_nsys_export(conn)
        tables = read_tables(conn, settings, replay=replay)
        frame = step_sums(tables)
        placement = read_placement(conn)
        frames = None
        if replay:
            from extradeep.io.nsys.replay import replay_frames

            frames = replay_frames(conn, path, settings, tables)
        return ProfileRead(frame, placement, frames)
    except InputError as exc:
        raise InputError(path, exc.problem) if exc.source is None else exc from None
    except (sqlite3.Error, UnicodeError) as exc:  # damage that the per-query checks did not see
        raise InputError(path, f"cannot read the export ({exc}); is the file truncated or damaged?") from None
    finally:
        conn.close()


def read_tables(conn, settings: ReaderSettings, *, replay: bool = False) -> dict:
    """Every table the per-step sums need, as the dict `extradeep.io.sums.step_sums` takes
    (`extradeep.io.frames.Table`s). Only the columns the sums use are read (millions of rows), unless
    `replay` asks for the replay's columns too."""
    gpu = REPLAY_GPU_COLUMNS if replay else LAUNCH_COLUMNS
    cpu = REPLAY_CPU_COLUMNS if replay else []
    nvtx = events.nvtx_table(conn, full=replay)
    steps = find_steps(nvtx, settings, conn.path)
    small = None if replay else sum_tables(conn, settings.kernel_names)
    if small is not None:  # a small export: its event tables in two statements
        mpi = events.mpi_table(conn, nvtx, columns=["bytes"], tables=small.pop("mpi_tables"))
        return {"nvtx": nvtx, "steps": steps, **small, "mpi": mpi, "warnings": conn.warnings}
    return {
        "nvtx": nvtx,
        "steps": steps,
        "runtime": events.runtime_table(
            conn, columns=[*cpu, "correlationId", *LAUNCH_COLUMNS] if replay else LAUNCH_COLUMNS
        ),
        "kernels": events.kernel_table(conn, settings.kernel_names, columns=gpu),
        "memcpy": events.memcpy_table(conn, columns=[*gpu, "bytes"]),
        "memset": events.memset_table(conn, columns=[*gpu, "bytes"]),
        "osrt": events.osrt_table(conn, columns=cpu),
        "library": events.library_tables(conn, columns=[]),
        "mpi": events.mpi_table(conn, nvtx, columns=[*cpu, "bytes"]),
        "warnings": conn.warnings,
    }
