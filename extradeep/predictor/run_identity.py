"""Which exports belong to one run: decided from the exports themselves, not only from file names.

Files of one run (one per rank, or one holding every process) come from one job: the same Nsight
Systems version, the same GPU model, and capture sessions that started within minutes of each other.
Unrelated exports in one folder (three applications profiled on different days) differ in at least
one of these; replaying them as one run would invent collectives and ranks, so they are refused.
PyTorch profiler (Kineto) traces record their rank and the job's world size (distributedInfo), their
GPUs (deviceProperties) and often the trace's start (baseTimeNanoseconds): traces of one job agree on
the world size and never repeat a rank.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from extradeep.columns import NAME, RANK, START
from extradeep.errors import InputError

# ranks of one job start their capture together; separate sessions of one job (one nsys per rank)
# start within seconds, far less than this
SESSION_WINDOW_S = 600.0


def run_identity(path) -> dict:
    """Format, nsys version, GPU models, session start (UTC ns, or None), and for a Kineto trace its
    rank and world size, of one profile; {} when the file cannot be read (the reader reports that
    later, one line)."""
    from extradeep.io.formats import KINETO, profile_format

    try:
        if profile_format(path) == KINETO:
            return _kineto_identity(path)
    except InputError:
        return {}
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
                "format": "Nsight Systems export",
                "nsys": nsys_version(conn),
                "gpus": ", ".join(sorted({g[NAME] for g in gpus(conn)})),
                "start": start,
            }
    except InputError:
        return {}


HEAD_BYTES = 1 << 20  # PyTorch writes the trace's metadata before its events


def _kineto_identity(path) -> dict:
    """What a Kineto trace's metadata (before its traceEvents) says about its job."""
    import gzip
    import re

    try:
        with open(path, "rb") as raw:
            magic = raw.read(2)
        with gzip.open(path) if magic == b"\x1f\x8b" else open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES).decode("utf-8", "replace")
    except (OSError, EOFError, ValueError):
        return {}
    head = head.split('"traceEvents"', 1)[0]

    def number(key: str, text: str):
        found = re.search(rf'"{key}"\s*:\s*(\d+)', text)
        return int(found.group(1)) if found else None

    info = re.search(r'"distributedInfo"\s*:\s*\{([^{}]*)', head)
    devices = re.search(r'"deviceProperties"\s*:\s*\[(.*?)\]', head, re.S)
    names = re.findall(r'"name"\s*:\s*"([^"]*)"', devices.group(1)) if devices else []
    return {
        "format": "PyTorch profiler trace",
        "nsys": None,
        "gpus": ", ".join(sorted(set(names))),
        "start": number("baseTimeNanoseconds", head),
        "rank": number("rank", info.group(1)) if info else None,
        "world": number("world_size", info.group(1)) if info else None,
    }


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
        for key, label in (("format", "format"), ("nsys", "Nsight Systems version"), ("gpus", "GPU model")):
            if other[key] != ref[key]:
                _refuse(where, first, path, f"{label} {ref[key] or 'not recorded'} vs {other[key] or 'not recorded'}")
    _check_ranks(ids, where)
    starts = {p: i[START] for p, i in ids.items() if i[START] is not None}
    if len(starts) > 1:
        early, late = min(starts, key=starts.get), max(starts, key=starts.get)
        gap = (starts[late] - starts[early]) / 1e9
        if gap > SESSION_WINDOW_S:
            _refuse(where, early, late, f"their captures started {_duration(gap)} apart")


def _check_ranks(ids: dict, where) -> None:
    """Recorded ranks (Kineto traces): one world size, and no rank twice."""
    known = {p: i for p, i in ids.items() if i.get("rank") is not None}
    worlds = {p: i["world"] for p, i in known.items() if i.get("world") is not None}
    if len(set(worlds.values())) > 1:
        a, b = sorted(worlds, key=worlds.get)[0], sorted(worlds, key=worlds.get)[-1]
        _refuse(where, a, b, f"rank {known[a][RANK]} of {worlds[a]} vs rank {known[b][RANK]} of {worlds[b]}")
    seen: dict[int, Path] = {}
    for path, info in known.items():
        if info[RANK] in seen:
            _refuse(where, seen[info[RANK]], path, f"both record rank {info[RANK]}")
        seen[info[RANK]] = path


def _refuse(where, a: Path, b: Path, why: str) -> None:
    raise InputError(
        where,
        f"these profiles are not one run ({a.name} and {b.name}: {why}); give the profiles of "
        "one run (a folder per run, or --run PARAM=VALUE with file names like app.p4.r1.mpi0.sqlite)",
    )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
