"""Which exports belong to one run: decided from the exports themselves, not only from file names.

Files of one run (one per rank, or one holding every process) come from one job: the same Nsight
Systems version, the same GPU model, and capture sessions that started within minutes of each other.
Unrelated exports in one folder (three applications profiled on different days) differ in at least
one of these; replaying them as one run would invent collectives and ranks, so they are refused.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from extradeep.errors import InputError

# ranks of one job start their capture together; separate sessions of one job (one nsys per rank)
# start within seconds, far less than this
SESSION_WINDOW_S = 600.0


def run_identity(path) -> dict:
    """nsys version, GPU models and session start (UTC ns, or None) of one export; {} when the
    file cannot be read (the reader reports that later, one line)."""
    from extradeep.io.nsys.inspect import gpus
    from extradeep.io.nsys.schema import nsys_version, schema_of
    from extradeep.io.sqlite import fetch_all, open_readonly

    try:
        with closing(open_readonly(path)) as conn:
            start = None
            if schema_of(conn).has("TARGET_INFO_SESSION_START_TIME"):
                rows = fetch_all(conn, 'SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME"')
                start = int(rows[0][0]) if rows and rows[0][0] is not None else None
            return {
                "nsys": nsys_version(conn),
                "gpus": ", ".join(sorted({g["name"] for g in gpus(conn)})),
                "start": start,
            }
    except InputError:
        return {}


def check_one_run(paths: list[Path], where) -> None:
    """Refuse, in one line naming two files that disagree, exports that cannot be one run."""
    if len(paths) < 2:
        return
    ids = {Path(p): run_identity(p) for p in paths}
    ids = {p: i for p, i in ids.items() if i}
    if len(ids) < 2:
        return
    first, ref = next(iter(ids.items()))
    for path, other in ids.items():
        for key, label in (("nsys", "Nsight Systems version"), ("gpus", "GPU model")):
            if other[key] != ref[key]:
                _refuse(where, first, path, f"{label} {ref[key] or 'not recorded'} vs {other[key] or 'not recorded'}")
    starts = {p: i["start"] for p, i in ids.items() if i["start"] is not None}
    if len(starts) > 1:
        early, late = min(starts, key=starts.get), max(starts, key=starts.get)
        gap = (starts[late] - starts[early]) / 1e9
        if gap > SESSION_WINDOW_S:
            _refuse(where, early, late, f"their captures started {_duration(gap)} apart")


def _refuse(where, a: Path, b: Path, why: str) -> None:
    raise InputError(
        where,
        f"these exports are not one run ({a.name} and {b.name}: {why}); give the exports of "
        "one run (a folder per run, or --run PARAM=VALUE with file names like app.p4.r1.mpi0.sqlite)",
    )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
