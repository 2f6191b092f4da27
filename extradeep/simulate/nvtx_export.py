"""write_nvtx_export(): a schema-correct export holding only given NVTX ranges and marks.

For code that records NVTX push/pop calls itself (the instrumentation helpers) and wants to check
that the reader recognises them, without a GPU or nsys.
"""

from __future__ import annotations

from pathlib import Path

from extradeep.simulate.schema import StringTable, load_layout
from extradeep.simulate.writer import global_tid, new_export, write_metadata, write_nvtx

PID = 1000


def write_nvtx_export(path, ranges, layout: str = "2026", nvtx_strings: str = "text") -> Path:
    """Write ranges [(name, domain, start_ns, end_ns, thread), ...] to a new export at path.

    end_ns None makes an instant mark (eventType 34), otherwise a push/pop range (eventType 59);
    domain None is the default domain, a name gets a domain-create row (eventType 75); thread is the
    OS thread id packed into globalTid (pid 1000). Refuses to overwrite an existing file.
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path}: exists; write_nvtx_export never overwrites a file")
    ranges = list(ranges)
    domains: dict[str, int] = {}
    rows = []
    for name, domain, start, end, thread in ranges:
        if end is not None and end < start:
            raise ValueError(f"range {name!r} ends before it starts ({end} < {start})")
        if domain is not None and domain not in domains:
            domains[domain] = len(domains) + 1
            rows.append([domain, int(start), None, 75, None, domains[domain], global_tid(PID, int(thread)), None])
        event_type = 34 if end is None else 59
        rows.append(
            [name, int(start), end, event_type, None, domains.get(domain, 0), global_tid(PID, int(thread)), None]
        )
    conn, w = new_export(path, load_layout(layout))
    strings = StringTable()
    write_nvtx(w, strings, rows, 0, global_tid(PID, PID), nvtx_strings)
    times = [r[1] for r in rows] + [r[2] for r in rows if r[2] is not None] or [0]
    threads = {int(t): "python3" if int(t) == PID else f"thread {t}" for *_, t in ranges} or {PID: "python3"}
    write_metadata(w, strings, path, PID, threads, set(), (min(times), max(times)))
    w.insert("StringIds", len(strings.ids), id=[i for i, _ in strings.rows()], value=[v for _, v in strings.rows()])
    conn.commit()
    conn.close()
    return path
