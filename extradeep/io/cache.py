"""The per-file result cache: small step-sum tables keyed by file identity, reader version and settings.

Entries are pickles under `<cache>/steps/xx/<sha256>.pkl`, written atomically (a temporary file named
after the host, process and thread, then rename), so the many workers of a cluster sharing one cache
directory never see half an entry nor write into each other's temporary file; a damaged entry
(truncated, garbage, not a result) is a miss and is simply recomputed. Their mtime is their last use, so pruning drops the least recently used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pickle
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import extradeep
from extradeep.errors import InputError
from extradeep.io.settings import READER_VERSION

if TYPE_CHECKING:
    from extradeep.io.settings import ReaderSettings

CACHE_FORMAT = 2  # 2: results carry the file's placement (one pass per file)
CACHE_MAX_MB = 2048  # default cap of the cache; env EXTRADEEP_CACHE_MAX_MB overrides it


# the readers' sources (folders and files under extradeep/): any change there invalidates cached results
READER_SOURCES = (
    "io/nsys",
    "io/kineto",
    *(f"io/{name}.py" for name in ("categories", "formats", "frames", "read", "replay", "settings", "sqlite", "steps")),
    "io/sums.py",
    "columns.py",
)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "extradeep"


@functools.lru_cache(maxsize=1)
def reader_version() -> str:
    """extradeep's version plus a digest of the reader's sources, so any reader change invalidates
    cached results (developers edit the reader without bumping versions)."""
    return f"{extradeep.__version__}+{sources_digest(f'{extradeep.__version__} {READER_VERSION}', *READER_SOURCES)}"


def sources_digest(seed: str, *packages: str) -> str:
    """A digest of `seed` and the sources of `packages` (folders or .py files under extradeep/)."""
    digest = hashlib.sha256(seed.encode())
    root = Path(extradeep.__file__).parent
    sources = [
        s
        for package in packages
        for s in ([root / package] if package.endswith(".py") else sorted((root / package).glob("*.py")))
    ]
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def cache_key(path: str, size: int, mtime_ns: int, settings: ReaderSettings) -> str:
    blob = json.dumps(
        [CACHE_FORMAT, str(Path(path).resolve()), int(size), int(mtime_ns), reader_version(), settings.key()]
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _cache_file(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "steps" / key[:2] / f"{key}.pkl"


def read_cache(cache_dir: Path, key: str) -> dict | None:
    """A cached per-file result, or None (missing or unreadable entries are simply re-read)."""
    path = _cache_file(cache_dir, key)
    try:
        with open(path, "rb") as fh:
            result = pickle.load(fh)
    except Exception:  # garbage unpickles into any error: a damaged entry is a miss
        return None
    if not isinstance(result, dict) or "problem" not in result:
        return None
    try:
        os.utime(path)  # mtime = last use: eviction drops the least recently used entries
    except OSError:
        pass
    return result


def cache_limit_bytes() -> int:
    """The cache's cap: EXTRADEEP_CACHE_MAX_MB (MiB) or CACHE_MAX_MB; a bad value is refused."""
    text = os.environ.get("EXTRADEEP_CACHE_MAX_MB", str(CACHE_MAX_MB))
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = float("nan")
    if not megabytes >= 0:
        raise InputError("EXTRADEEP_CACHE_MAX_MB", f"must be a number of MiB >= 0, got {text!r}")
    return int(megabytes * 2**20)


def prune_cache(cache_dir, max_bytes: int | None = None) -> int:
    """Delete the least recently used cache entries until the cache holds at most `max_bytes`
    (default `cache_limit_bytes()`); returns how many were deleted. Only extradeep's own entry files
    (steps/xx/<sha256>.pkl) are touched."""
    limit = cache_limit_bytes() if max_bytes is None else max_bytes
    entries = []
    for path in (Path(cache_dir) / "steps").glob("??/*.pkl"):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((stat.st_mtime_ns, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    removed = 0
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed += 1
    return removed


def cache_problem(cache_dir) -> str | None:
    """Why results cannot be stored in `cache_dir` (a read-only folder, a file in the way), or None."""
    import tempfile

    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".write-check-", dir=cache_dir)
    except OSError as exc:
        return f"the cache folder {cache_dir} cannot be written ({exc.strerror or type(exc).__name__})"
    os.close(handle)
    os.unlink(name)
    return None


def store_cache(cache_dir, key: str, result: dict) -> None:
    # Failures are not cached: the user may fix the file or the reader may learn to read it. The
    # replay's frames are not kept: they are large, and a cached exposure curve makes them unneeded.
    if cache_dir is None or result["problem"] is not None:
        return
    result = {k: v for k, v in result.items() if k != "replay"}
    target = _cache_file(cache_dir, key)
    tmp = target.with_suffix(f".{socket.gethostname()}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
    except OSError:  # a read-only or full cache only costs speed
        with contextlib.suppress(OSError):
            tmp.unlink()
