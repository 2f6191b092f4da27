"""A Kineto trace in the shape of the shared tables (`extradeep.io.frames`), so the per-step sums and the
step finder (`extradeep.io.sums.step_sums`, `extradeep.io.steps.find_steps`) serve both formats unchanged.

CPU ranges (cpu_op, user_annotation) play the part of NVTX ranges: `ProfilerStep#N`, extradeep's
marks written through `torch.profiler.record_function` ("epoch 0", "train_step 3") and user
patterns are found exactly as in an nsys export. cpu_op ranges are in the NVTX "domain" `cpu_op`,
user annotations in the default domain "", so a pattern `cpu_op:REGEX` restricts to operators.
Launch keys are `1 << 32 | correlation` (one trace is one process, so the correlation id alone
joins a kernel to its launching runtime call).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from extradeep.columns import BYTES, CATEGORY, CORR, END, KIND, NAME, PID, START, STREAM
from extradeep.io import categories as cat
from extradeep.io.frames import CPU_COLUMNS, NULL_INT, NVTX_PAYLOADS, NVTX_PUSHPOP
from extradeep.io.kineto.load import KinetoTrace

CPU_OP_DOMAIN = "cpu_op"
CPU_OP_KIND = "cpu_op"
_MEMCPY = re.compile(r"\s*Memcpy\s+(\w+)", re.IGNORECASE)


def short_kernel_name(name: str) -> str:
    """nsys-style short name of a demangled kernel signature: no return type, namespaces, template
    arguments or parameters (`void at::native::elementwise_kernel<128, 4, ...>(int, ...)` ->
    `elementwise_kernel`), so regions match between Kineto traces and nsys exports."""
    text = name.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i] if i > 0 else text
                break
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    base = "".join(out).strip().split(" ")[-1]
    short = base.split("::")[-1]
    return short or name


def per_distinct_name(rename, names: pd.Series) -> pd.Series:
    """``names.map(rename)`` with ``rename`` called once per distinct name: a trace repeats a few
    hundred kernel names thousands of times, and short_kernel_name walks each signature in Python."""
    distinct = names.unique()
    return names.map(dict(zip(distinct, map(rename, distinct))))


def memcpy_region(name: str) -> str:
    """`Memcpy HtoD (Host -> Device)` -> `[CUDA memcpy HtoD]`, the nsys label."""
    m = _MEMCPY.match(name)
    return f"[CUDA memcpy {m.group(1)}]" if m else f"[CUDA memcpy {name}]"


def _categorical(values) -> pd.Categorical:
    codes, uniques = pd.factorize(pd.Series(values, dtype=object))
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


def launch_key(corr: np.ndarray) -> np.ndarray:
    corr = np.asarray(corr, dtype=np.int64)
    valid = (corr > 0) & (corr < (1 << 32))
    return np.where(valid, (1 << 32) | corr, NULL_INT)


def gpu_tables(trace: KinetoTrace, kernel_names: str = "short") -> dict[str, pd.DataFrame]:
    """kernels, memcpy and memset frames as `extradeep.io.nsys.events` returns them (start, end,
    launchKey, name, bytes; kernels also category)."""
    gpu = trace.gpu
    out = {}
    for kind in ("kernel", "memcpy", "memset"):
        f = gpu[(gpu[KIND] == kind).to_numpy()]
        if kind == "kernel":
            names = per_distinct_name(short_kernel_name, f[NAME]) if kernel_names == "short" else f[NAME]
        elif kind == "memcpy":
            names = per_distinct_name(memcpy_region, f[NAME])
        else:
            names = pd.Series(cat.MEMSET_NAME, index=f.index, dtype=object)
        frame = pd.DataFrame(
            {
                START: f[START].to_numpy(np.int64),
                END: f[END].to_numpy(np.int64),
                "launchKey": launch_key(f[CORR].to_numpy()),
                BYTES: np.where(f[BYTES].to_numpy() > 0, f[BYTES].to_numpy(), NULL_INT).astype(np.int64),
                "deviceId": f["device"].to_numpy(np.int64),
                "streamId": f[STREAM].to_numpy(np.int64),
                "correlationId": f[CORR].to_numpy(np.int64),
            }
        )
        frame[NAME] = _categorical(names.to_numpy(object))
        if kind == "kernel":
            frame[CATEGORY] = pd.Categorical(cat.kernel_categories(frame[NAME].astype(str)))
        out[{"kernel": "kernels"}.get(kind, kind)] = frame
    return out


def runtime_table(trace: KinetoTrace) -> pd.DataFrame:
    """CUDA/HIP runtime and driver calls: start, end, pid, tid, correlationId, launchKey, name."""
    r = trace.runtime
    frame = pd.DataFrame(
        {
            START: r[START].to_numpy(np.int64),
            END: r[END].to_numpy(np.int64),
            PID: r[PID].to_numpy(np.int64),
            "tid": r["tid"].to_numpy(np.int64),
            "correlationId": r[CORR].to_numpy(np.int64),
            "launchKey": launch_key(r[CORR].to_numpy()),
        }
    )
    frame[NAME] = _categorical(r[NAME].to_numpy(object))
    return frame


def nvtx_table(trace: KinetoTrace) -> pd.DataFrame:
    """The CPU ranges as an NVTX frame (eventType push/pop): user annotations in domain "",
    operators in domain `cpu_op`; ranges recorded twice (same name, start, end) once."""
    c = trace.cpu.drop_duplicates([NAME, START, END, "tid"]).sort_values(START, kind="stable")
    n = len(c)
    frame = pd.DataFrame(
        {
            START: c[START].to_numpy(np.int64),
            END: c[END].to_numpy(np.int64),
            "eventType": np.full(n, NVTX_PUSHPOP, np.int64),
            "rangeId": np.full(n, NULL_INT, np.int64),
            "globalTid": c["tid"].to_numpy(np.int64),
            PID: c[PID].to_numpy(np.int64),
            "tid": c["tid"].to_numpy(np.int64),
            "domainId": (c["cat"] == "cpu_op").to_numpy().astype(np.int64),
            "categoryId": np.zeros(n, np.int64),
        }
    )
    frame[NAME] = _categorical(c[NAME].to_numpy(object))
    frame["domain"] = _categorical(np.where(c["cat"].to_numpy() == "cpu_op", CPU_OP_DOMAIN, ""))
    frame[CATEGORY] = _categorical(np.full(n, "", dtype=object))
    for payload in NVTX_PAYLOADS:
        frame[payload] = np.full(n, NULL_INT, np.int64)
    return frame


def empty_cpu_table(extra: dict | None = None) -> pd.DataFrame:
    """An empty frame like events.osrt / library_events / mpi (tables a Kineto trace lacks)."""
    frame = pd.DataFrame({c: np.empty(0, np.int64) for c in CPU_COLUMNS})
    frame[NAME] = pd.Categorical([])
    for key, value in (extra or {}).items():
        frame[key] = value
    return frame
