"""Load one PyTorch profiler (Kineto) Chrome-trace JSON file into columnar frames, times in integer ns.

A Kineto trace is one process (one rank): `traceEvents` holds complete events (`ph: "X"`) whose
`cat` says what they are (kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver, cpu_op,
user_annotation, gpu_user_annotation, cuda_sync), flow events (`ph: "s"/"f"`) linking a launch to
its GPU work (their id is the correlation id that `args.correlation` also carries) and metadata.
Timestamps are microseconds, fractional in newer versions; they become integer nanoseconds here, as
in the nsys layer. The file is decompressed once and parsed once with the standard library (orjson
measured no faster here: building the Python objects dominates, see docs/performance.md); only the
fields the frames need are kept.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import BYTES, CORR, END, KIND, NAME, PID, START, STREAM
from extradeep.errors import InputError
from extradeep.io.formats import read_input

SUFFIXES = (".json", ".json.gz")
GPU_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
CPU_RANGE_CATEGORIES = ("cpu_op", "user_annotation")
FLOW_PHASES = ("s", "f", "t")
# Microsecond timestamps from ~2^43 us up (absolute Unix-epoch times) have a float64 ulp above 1 ns:
# their fractional digits are then read from the text instead of through a float.
EXACT_TS_FROM = 2.0**43
_TS_TEXT = re.compile(rb'("ts"\s*:\s*)(-?\d+)(?:\.(\d*))?')
_FRACTIONAL_TS = re.compile(rb'"ts"\s*:\s*-?\d+\.\d')
# bytes per element of NCCL's dtype names (collective metadata of newer PyTorch)
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "char": 1,
    "int8": 1,
    "uint8": 1,
    "byte": 1,
    "bool": 1,
    "short": 2,
    "int16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
SYNC_TYPES = {"event sync": 1, "stream wait event": 2, "wait event": 2, "stream sync": 3, "context sync": 4}
NO_INT = -1  # integer fields a trace leaves out
MEMORY_COLUMNS = ("start", "allocated", "reserved", "device", "device_type")


@dataclass
class KinetoTrace:
    """What one Kineto trace holds, as DataFrames with integer-ns `start`/`end`.

    `gpu`: kind (kernel/memcpy/memset), start, end, device, stream, corr, name, bytes, collective,
    msg_bytes, group_size; `runtime`: cuda_runtime and cuda_driver calls (kind, start, end, pid, tid,
    corr, name); `cpu`: cpu_op and user_annotation ranges (cat, start, end, pid, tid, name);
    `gpu_annotations`: gpu_user_annotation ranges (start, end, device, stream, name); `syncs`:
    cuda_sync rows (start, end, device, stream, corr, sync_type 1-4, event_id, record_corr,
    record_stream); `counts`: events per category (flows under "flow:<cat>"); `meta`: the top-level
    fields (distributedInfo, deviceProperties, schemaVersion, ...); `notes`: one-line warnings.
    """

    path: str
    gpu: pd.DataFrame
    runtime: pd.DataFrame
    cpu: pd.DataFrame
    gpu_annotations: pd.DataFrame
    syncs: pd.DataFrame
    counts: dict
    meta: dict
    flows: int = 0
    notes: list[str] = field(default_factory=list)
    # `[memory]` instant events (profile_memory=True): start, allocated, reserved, device, device_type
    memory: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(MEMORY_COLUMNS)))

    @property
    def distributed(self) -> dict:
        info = self.meta.get("distributedInfo")
        return info if isinstance(info, dict) else {}

    @property
    def rank(self) -> int | None:
        return _whole(self.distributed.get("rank"))

    @property
    def world_size(self) -> int | None:
        return _whole(self.distributed.get("world_size"))

    @property
    def platform(self) -> str:
        """ "rocm" (HIP runtime calls), "cuda", or "cpu" (no GPU activity at all)."""
        if self.runtime[NAME].str.startswith("hip").any():
            return "rocm"
        return "cuda" if len(self.gpu) or len(self.runtime) else "cpu"

    @property
    def devices(self) -> list[dict]:
        props = self.meta.get("deviceProperties")
        return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []

    @property
    def processes(self) -> list[int]:
        """Process ids of the CPU side (one per trace for PyTorch's profiler)."""
        pids = pd.concat([self.cpu[PID], self.runtime[PID]]).unique()
        return sorted(int(p) for p in pids)


def _whole(value) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() and number >= 0 else None


def is_kineto_name(path) -> bool:
    """Whether the file name says Chrome-trace JSON (`*.json`, `*.json.gz`, `*.pt.trace.json[.gz]`)."""
    return str(path).lower().endswith(SUFFIXES)


TRACE_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"')


def looks_like_trace(path, head_bytes: int = 4096) -> bool:
    """Whether the first bytes (decompressed) hold a key of a Kineto trace (True when unreadable)."""
    try:
        with open(path, "rb") as raw:
            magic = raw.read(2)
            raw.seek(0)
            fh = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
            head = fh.read(head_bytes)
    except (OSError, EOFError, zlib.error):
        return True  # named like a trace but damaged: the reader says what is wrong, one line
    return any(key in head for key in TRACE_KEYS) or head.lstrip().startswith(b"[")


def read_bytes(path) -> bytes:
    """The file's JSON text, decompressed once when it is gzip (by content, not by name)."""
    path = Path(path)
    data = read_input(path)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, f"damaged gzip file ({exc}); the trace was probably cut off while copying") from None
    if not data.strip():
        raise InputError(path, "empty file")
    return data


def parse(path, data: bytes) -> dict:
    """The JSON document; InputError with one line for truncated or invalid JSON."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and bad UTF-8 are ValueErrors
        raise InputError(path, f"not valid JSON ({_short(exc)}); a truncated or damaged trace?") from None
    if isinstance(doc, list):  # the bare-array form of the Chrome trace format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputError(path, "JSON without a traceEvents list: not a PyTorch profiler (Kineto) trace")
    return doc


def _needs_exact_ts(data: bytes) -> bool:
    m = re.search(rb'"ts"\s*:\s*(-?\d+)', data)
    return m is not None and abs(int(m.group(1))) >= EXACT_TS_FROM


def _ts_to_ns_text(m: re.Match) -> bytes:
    frac = (m.group(3) or b"")[:3].ljust(3, b"0")
    whole = m.group(2)
    sign, digits = (b"-", whole[1:]) if whole.startswith(b"-") else (b"", whole)
    return m.group(1) + sign + (digits + frac).lstrip(b"0").rjust(1, b"0")


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def load(path) -> KinetoTrace:
    """Read and parse one trace file; InputError (one line naming the file) when it is unusable.

    Large files are parsed in pieces of about CHUNK_BYTES (see `_pieces`), each turned into columns
    before the next is parsed, so the parsed objects of only one piece are alive at a time; any piece
    that is not valid JSON on its own sends the file through the whole-document parse instead, which
    also words the error for a damaged file."""
    data = read_bytes(path)
    exact = _FRACTIONAL_TS.search(data) is not None and _needs_exact_ts(data)
    if exact:  # timestamps as integer ns text, so no float rounds them
        data = _TS_TEXT.sub(_ts_to_ns_text, data)
    rows = _Rows()
    try:
        meta = _parse_in_pieces(data, rows)
    except _PieceError:
        rows = _Rows()
        meta = None
    if meta is None:
        doc = parse(path, data)
        rows.add_all(doc.pop("traceEvents"))
        meta = doc
    return rows.build(str(path), meta, exact)


CHUNK_BYTES = 32 << 20
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")


class _PieceError(Exception):
    """A piece was not valid JSON on its own: parse the whole document instead."""


def _loads(text: bytes):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise _PieceError from None


def _pieces(data: bytes) -> list[tuple[int, int]] | None:
    """Cut points between events of the traceEvents array, about CHUNK_BYTES apart: (end of one
    event's `}`, start of the next `{`); None when the file is small or has no such array."""
    key = _EVENTS_KEY.search(data) if len(data) > CHUNK_BYTES else None
    if key is None:
        return None
    cuts, pos = [], key.end() + CHUNK_BYTES
    while pos < len(data):
        m = _BETWEEN_EVENTS.search(data, pos)
        if m is None:
            break
        cuts.append((m.start() + 1, m.end() - 1))
        pos = m.end() + CHUNK_BYTES
    return cuts or None


def _parse_in_pieces(data: bytes, rows) -> dict | None:
    """The document's top-level fields, its events added to `rows` piece by piece; None when the
    file is not cut (small); _PieceError when a piece does not parse on its own."""
    cuts = _pieces(data)
    if cuts is None:
        return None
    head = _loads(data[: cuts[0][0]] + b"]}")
    if not isinstance(head, dict) or not isinstance(head.get("traceEvents"), list):
        raise _PieceError
    rows.add_all(head.pop("traceEvents"))
    for (_, start), (end, _) in itertools.pairwise(cuts):
        events = _loads(b"[" + data[start:end] + b"]")
        rows.add_all(events)
        del events
    tail = _loads(b'{"traceEvents":[' + data[cuts[-1][1] :])
    if not isinstance(tail, dict) or not isinstance(tail.get("traceEvents"), list):
        raise _PieceError
    rows.add_all(tail.pop("traceEvents"))
    return {**head, **tail}


class _Rows:
    """Per-category row lists filled in one pass over the events."""

    def __init__(self):
        self.gpu, self.runtime, self.cpu, self.gpu_ann, self.syncs, self.memory = [], [], [], [], [], []
        self.counts = Counter()
        self.flows = 0
        self.bad = 0

    def add_all(self, events) -> None:
        add = self.add
        for event in events if isinstance(events, list) else ():
            if type(event) is dict:
                add(event)

    def add(self, e: dict) -> None:
        ph = e.get("ph")
        cat = e.get("cat")
        if ph in FLOW_PHASES:
            self.counts[f"flow:{cat}"] += 1
            self.flows += 1
            return
        if ph != "X":
            if ph == "i" and e.get("name") == "[memory]" and isinstance(e.get("args"), dict):
                a = e["args"]
                self.memory.append(
                    (
                        e.get("ts"),
                        a.get("Total Allocated"),
                        a.get("Total Reserved"),
                        a.get("Device Id"),
                        a.get("Device Type"),
                    )
                )
            return
        self.counts[cat] += 1
        ts, dur = e.get("ts"), e.get("dur", 0)
        # numbers, and finite ones (x - x is 0 unless x is NaN or infinite; JSON allows NaN here)
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or ts - ts != 0 or dur - dur != 0:
            self.bad += 1
            return
        args = e.get("args")
        args = args if isinstance(args, dict) else {}
        name = e.get("name")
        if cat in GPU_CATEGORIES:
            self.gpu.append(
                (
                    GPU_CATEGORIES[cat],
                    ts,
                    dur,
                    args.get("device", e.get("pid")),
                    args.get("stream", e.get("tid")),
                    args.get("correlation", NO_INT),
                    name,
                    args.get("bytes", 0),
                    args.get("Collective name"),
                    args.get("In msg nelems"),
                    args.get("dtype"),
                    args.get("Group size"),
                    args.get("Process Group Ranks"),
                    args.get("Process Group Name"),
                    args.get("Process Group Description"),
                )
            )
        elif cat in RUNTIME_CATEGORIES:
            self.runtime.append((cat, ts, dur, e.get("pid"), e.get("tid"), args.get("correlation", NO_INT), name))
        elif cat in CPU_RANGE_CATEGORIES:
            self.cpu.append((cat, ts, dur, e.get("pid"), e.get("tid"), name))
        elif cat == "gpu_user_annotation":
            self.gpu_ann.append((ts, dur, args.get("device", e.get("pid")), args.get("stream", e.get("tid")), name))
        elif cat == "cuda_sync":
            self.syncs.append(
                (
                    ts,
                    dur,
                    args.get("device", e.get("pid")),
                    args.get("stream", NO_INT),
                    args.get("correlation", NO_INT),
                    args.get("cuda_sync_kind") or name,
                    args.get("wait_on_cuda_event_id", NO_INT),
                    args.get("wait_on_cuda_event_record_corr_id", NO_INT),
                    args.get("wait_on_stream", NO_INT),
                )
            )

    def build(self, path: str, meta: dict, exact: bool) -> KinetoTrace:
        complete = sum(self.counts.values()) - self.flows
        if complete <= 0 and not self.flows:  # e.g. [1, 2, 3]: JSON, but no trace
            raise InputError(path, "holds no trace events (objects with ph, ts, dur): not a PyTorch profiler trace")
        if self.bad and self.bad == complete:
            raise InputError(
                path, f"none of its {self.bad} events has a finite numeric ts and dur: a damaged or hand-edited trace"
            )
        notes = []
        if self.bad:
            notes.append(f"{self.bad} complete events without a finite numeric ts and dur were skipped")
        to_ns = _Times(exact)
        gpu = _gpu_frame(self.gpu, to_ns)
        trace = KinetoTrace(
            path=path,
            gpu=gpu,
            runtime=_range_frame(self.runtime, ["kind", "ts", "dur", "pid", "tid", "corr", "name"], to_ns),
            cpu=_range_frame(self.cpu, ["cat", "ts", "dur", "pid", "tid", "name"], to_ns),
            gpu_annotations=_range_frame(self.gpu_ann, ["ts", "dur", "device", "stream", "name"], to_ns),
            syncs=_sync_frame(self.syncs, to_ns),
            counts=dict(self.counts),
            meta=meta,
            flows=self.flows,
            notes=notes,
            memory=_memory_frame(self.memory, to_ns),
        )
        negative = int((trace.gpu[END] < trace.gpu[START]).sum() + (trace.runtime[END] < trace.runtime[START]).sum())
        if negative:
            raise InputError(path, f"{negative} events have a negative duration: a damaged or hand-edited trace")
        return trace


class _Times:
    """ts/dur columns to integer ns: microseconds x 1000, or already ns where the text was rewritten."""

    def __init__(self, ts_in_ns: bool):
        self.ts_in_ns = ts_in_ns

    def start_end(self, ts, dur) -> tuple[np.ndarray, np.ndarray]:
        if self.ts_in_ns:
            start = np.array(ts, dtype=np.int64)
        else:
            start = us_to_ns(np.asarray(ts, dtype=np.float64))
        dur_ns = np.rint(np.asarray(dur, dtype=np.float64) * 1000.0).astype(np.int64)
        return start, start + dur_ns


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Microseconds (float64) to integer ns without the rounding of `us * 1000` in float: whole
    microseconds (exact below 2^53) and the fraction separately."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


def _ints(values) -> np.ndarray:
    """Integer column from JSON values that may be missing, text ("0x0", "7") or floats."""
    if all(type(v) is int for v in values):
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            pass
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if isinstance(v, bool) or v is None:
            out[i] = NO_INT
        elif isinstance(v, int):
            out[i] = v if -(2**63) <= v < 2**63 else NO_INT
        elif isinstance(v, float):
            out[i] = int(v) if np.isfinite(v) and abs(v) < 2**63 else NO_INT
        else:
            try:
                out[i] = int(str(v), 0)
            except ValueError:
                out[i] = NO_INT
    return out


def _columns(rows: list[tuple], n: int) -> list[list]:
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def _range_frame(rows: list[tuple], names: list[str], to_ns: _Times) -> pd.DataFrame:
    cols = dict(zip(names, _columns(rows, len(names))))
    start, end = to_ns.start_end(cols.pop("ts"), cols.pop("dur"))
    out = {"start": start, "end": end}
    for key, values in cols.items():
        if key in ("name", "kind", "cat"):
            out[key] = pd.Series([str(v) if v is not None else "" for v in values], dtype=object)
        else:
            out[key] = _ints(values)
    return pd.DataFrame(out)


def _gpu_frame(rows: list[tuple], to_ns: _Times) -> pd.DataFrame:
    names = [
        "kind",
        "ts",
        "dur",
        "device",
        "stream",
        "corr",
        "name",
        "bytes",
        "collective",
        "nelems",
        "dtype",
        "group_size",
        "pg_ranks",
        "pg_name",
        "pg_desc",
    ]
    cols = dict(zip(names, _columns(rows, len(names))))
    start, end = to_ns.start_end(cols["ts"], cols["dur"])
    nelems = _ints(cols["nelems"])
    width = np.array(
        [DTYPE_BYTES.get(str(d).lower(), 0) if d is not None else 0 for d in cols["dtype"]], dtype=np.int64
    )
    msg = np.where((nelems >= 0) & (width > 0), nelems * width, 0)
    size = _ints(cols["bytes"])
    return pd.DataFrame(
        {
            KIND: pd.Series(cols["kind"], dtype=object),
            START: start,
            END: end,
            "device": _ints(cols["device"]),
            STREAM: _ints(cols["stream"]),
            CORR: _ints(cols["corr"]),
            NAME: pd.Series([str(v) if v is not None else "" for v in cols["name"]], dtype=object),
            BYTES: np.where(size >= 0, size, 0),
            "collective": pd.Series([str(v) if v is not None else "" for v in cols["collective"]], dtype=object),
            "msg_bytes": msg,
            "group_size": _ints(cols["group_size"]),
            **{
                k: pd.Series([str(v) if v is not None else "" for v in cols[k]], dtype=object)
                for k in ("pg_ranks", "pg_name", "pg_desc")
            },
        }
    )


def _memory_frame(rows: list[tuple], to_ns: _Times) -> pd.DataFrame:
    """`[memory]` events with a numeric time; bytes and ids as integers (-1 where left out)."""
    rows = [r for r in rows if isinstance(r[0], (int, float))]
    cols = dict(zip(MEMORY_COLUMNS, _columns(rows, len(MEMORY_COLUMNS))))
    start, _ = to_ns.start_end(cols.pop("start"), [0] * len(rows))
    return pd.DataFrame({START: start, **{k: _ints(v) for k, v in cols.items()}})


def _sync_frame(rows: list[tuple], to_ns: _Times) -> pd.DataFrame:
    names = ["ts", "dur", "device", "stream", "corr", "kind", "event_id", "record_corr", "record_stream"]
    cols = dict(zip(names, _columns(rows, len(names))))
    start, end = to_ns.start_end(cols.pop("ts"), cols.pop("dur"))
    kind = [str(k or "").strip().lower() for k in cols.pop("kind")]
    out = {"start": start, "end": end, "sync_type": np.array([SYNC_TYPES.get(k, 0) for k in kind], dtype=np.int64)}
    out.update({k: _ints(v) for k, v in cols.items()})
    return pd.DataFrame(out)
