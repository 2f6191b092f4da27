"""How big a simulation will be, before it runs: disk for its files and memory for its largest run.

Every rank of every run becomes one file, and the engine holds all ranks of one run in memory, so
both grow with the rank counts asked for (`--param ranks=1000000` would write 160 GB and need
45 GB of memory). A pilot of 2 ranks with the same settings (steps, DDP, formats) is written to a
temporary folder and measured; the sizes scale linearly with ranks (measured: 64 to 1,024 ranks,
disk within 2%, memory 45 KB per rank at 14 steps, up to half the file size with DDP). The pilot
runs only for simulations large enough to matter (more than PILOT_FROM rank files).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from extradeep.columns import RANKS
from extradeep.errors import InputError

PILOT_FROM = 2_000  # rank files: below this a simulation is small (the sample has 116)
PILOT_RANKS = 2
MEMORY_PER_FILE_BYTE = 0.5  # memory per rank of a run, per byte of its file (0.28 plain, 0.5 DDP)
BASE_MEMORY = 150e6  # Python, NumPy, pandas, SQLite and the writer's buffers (measured: 117 MB at 12 ranks)


@dataclass(frozen=True)
class SimulationSize:
    files: int  # rank files written
    disk_bytes: float
    memory_bytes: float  # peak, for the run with the most ranks

    def text(self) -> str:
        return (
            f"{self.files:,} files, about {_bytes(self.disk_bytes)} on disk and {_bytes(self.memory_bytes)} of "
            "memory for its largest run"
        )


def rank_files(params: dict, repetitions: int, formats=("nsys",)) -> tuple[int, int]:
    """(files, largest rank count) of a simulation grid."""
    import itertools

    grid = list(itertools.product(*params.values()))
    names = list(params)
    ranks = [int(dict(zip(names, values)).get("ranks", 1)) for values in grid]
    return sum(ranks) * repetitions * len(formats), max(ranks, default=0)


def estimate(
    params: dict, repetitions: int, formats=("nsys",), pilot_from: int = PILOT_FROM, **settings
) -> SimulationSize | None:
    """The size of `simulate(params=..., repetitions=..., formats=..., **settings)`, from a pilot of
    2 ranks; None for a small simulation (at most `pilot_from` files)."""
    from extradeep.simulate import simulate

    files, largest = rank_files(params, repetitions, formats)
    if files <= pilot_from:
        return None
    pilot_params = {name: [values[0]] for name, values in params.items()}
    pilot_params[RANKS] = [PILOT_RANKS]
    with tempfile.TemporaryDirectory(prefix="extradeep-pilot-") as tmp:
        simulate(
            tmp,
            params=pilot_params,
            repetitions=1,
            formats=formats,
            truth_replicates=0,
            progress=False,
            **{k: v for k, v in settings.items() if k not in ("truth_replicates", "progress", "truth_ranks")},
        )
        written = [p for p in Path(tmp).iterdir() if p.name not in ("truth.json", "extradeep.toml")]
        per_rank = sum(p.stat().st_size for p in written) / (PILOT_RANKS * len(formats))
    return SimulationSize(
        files=files,
        disk_bytes=per_rank * files,
        memory_bytes=max(BASE_MEMORY, _peak_rss()) + MEMORY_PER_FILE_BYTE * per_rank * largest * len(formats),
    )


def check_room(size: SimulationSize | None, outdir) -> None:
    """Refuse, in one line, a simulation that needs more disk than `outdir` has free or more memory
    than is available (the caller lets --force skip this)."""
    if size is None:
        return
    free_disk = shutil.disk_usage(_existing(Path(outdir))).free
    free_memory = available_memory()
    short = []
    if size.disk_bytes > free_disk:
        short.append(f"{_bytes(free_disk)} free on disk")
    if free_memory is not None and size.memory_bytes > free_memory:
        short.append(f"{_bytes(free_memory)} of memory available")
    if short:
        raise InputError(
            outdir,
            f"this simulation needs {size.text()}; this machine has {' and '.join(short)}: simulate fewer or "
            "smaller configurations, or give --force",
        )


def _peak_rss() -> float:
    """This process's peak memory so far (it has just run the pilot): the simulation starts from
    it, and it grows with every module extradeep imports; 0 where the platform does not say."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


def available_memory() -> float | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), or None when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _existing(path: Path) -> Path:
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return path


def _bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} bytes"
