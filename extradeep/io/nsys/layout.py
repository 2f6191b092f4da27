"""Every node signal an Nsight Systems export carries, as one placement (extradeep.io.placement).

Where nsys keeps them, by version (checked on the real exports of 2020.3 to 2026.2):

* host name: ``TARGET_INFO_SYSTEM_ENV`` name ``Hostname`` (2022.1+); else a captured
  ``SLURMD_NODENAME`` (the launch environment: ``DeviceEnvironment`` of ``TARGET_INFO_SYSTEM_ENV``,
  ';'-separated, NUL-separated in 2022.x, or ``META_DATA_CAPTURE`` ``PROCESS_n:ENVIRONMENT_VARIABLE``
  rows); else ``META_DATA_CAPTURE`` ``DEVICE_DISPLAY_NAME`` (2023.3+);
* the node's GPUs: ``TARGET_INFO_GPU`` rows with ``uuid`` (2021.2+; 2020.3 lists GPUs without
  UUIDs, and ``TARGET_INFO_CUDA_GPU`` without either); else the UUIDs in the ``GpuInfo`` of
  ``TARGET_INFO_SYSTEM_ENV`` (JSON from 2023.1, protobuf bytes in 2022.x); else the ``GPU-<uuid>``
  list of a captured ``NVIDIA_VISIBLE_DEVICES`` (what a container was given). Rows of non-CUDA
  adapters (Windows' "Microsoft Basic Render Driver": no memory, zero UUID) are left out;
* the rank's GPU: ``deviceId`` of its kernels (else memcpys, memsets), the GPU's ``id`` in
  ``TARGET_INFO_GPU`` (both columns are "Device ID" in the DDL comments; ``cuDevice``, the CUDA
  number, can differ: the 2024.2 A100 export lists id 0 as cuDevice 1), which gives its UUID;
* ranks per node given to the launcher: torchrun's ``--nproc-per-node`` in the captured command
  line (``PROCESS_n:ARGUMENT_k``), or ``LOCAL_WORLD_SIZE``, ``SLURM_NTASKS_PER_NODE``,
  ``OMPI_COMM_WORLD_LOCAL_SIZE`` in the captured environment;
* ``EXPORT_HOST`` of ``EXPORT_META_DATA`` / ``META_DATA_EXPORT`` (2022.1+): where the export ran.
"""

from __future__ import annotations

import re
import sqlite3

from extradeep.errors import InputError
from extradeep.io.nsys.schema import metadata, schema_of
from extradeep.io.placement import empty_placement, uuid_set
from extradeep.io.sqlite import fetch_all, open_readonly

ENV_TABLE = "TARGET_INFO_SYSTEM_ENV"
CAPTURE_TABLE = "META_DATA_CAPTURE"
GPU_WORK_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
# launch-environment variables that give ranks per node, in order of preference
LOCAL_SIZE_VARIABLES = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS")
_NPROC = re.compile(r"^--nproc[-_]per[-_]node(?:=(\S+))?$")


def read_placement(source) -> dict:
    """The placement of one export (keys of :data:`extradeep.io.placement.PLACEMENT_COLUMNS`; None
    where the export lacks a signal). ``source``: a path, or an open read-only connection of the
    reader (left open). Never raises for a bad file: every key is then None."""
    return placement_of(read_signals(source))


HOST_FIELDS = (f"{ENV_TABLE} Hostname", "SLURMD_NODENAME", f"{CAPTURE_TABLE} DEVICE_DISPLAY_NAME")
GPU_FIELDS = ("TARGET_INFO_GPU", f"{ENV_TABLE} GpuInfo", "NVIDIA_VISIBLE_DEVICES")
SIGNAL_FIELDS = (*HOST_FIELDS, *GPU_FIELDS, "launcher", "EXPORT_HOST")


def read_signals(source) -> dict:
    """Every node signal of one export by where it is kept (the names of :data:`SIGNAL_FIELDS`;
    absent where the export lacks it), plus "node_gpus", "device" and "uuid". ``source``: a path or
    an open connection (left open); {} for a file that cannot be read."""
    own = not isinstance(source, sqlite3.Connection)
    try:
        conn = open_readonly(source) if own else source
    except InputError:
        return {}
    out: dict = {}
    try:
        _fill(conn, out)
    except (InputError, sqlite3.Error):
        pass  # a damaged export keeps what was read; its reader reports the damage
    finally:
        if own:
            conn.close()
    return {k: v for k, v in out.items() if v is not None}


def placement_of(signals: dict) -> dict:
    """The placement the signals of one export give: for each kind, the first field that has it."""
    out = empty_placement()
    out["host_from"] = next((f for f in HOST_FIELDS if signals.get(f)), None)
    out["host"] = signals.get(out["host_from"])
    out["gpus_from"] = next((f for f in GPU_FIELDS if signals.get(f)), None)
    out["gpu_set"] = signals.get(out["gpus_from"])
    out["node_gpus"], out["device"], out["uuid"] = (signals.get(k) for k in ("node_gpus", "device", "uuid"))
    if out["node_gpus"] is None and out["gpu_set"]:  # the UUIDs of GpuInfo or NVIDIA_VISIBLE_DEVICES
        out["node_gpus"] = out["gpu_set"].count(",") + 1
    out["local_ranks"], out["launcher_from"] = signals.get("launcher", (None, None))
    out["export_host"] = signals.get("EXPORT_HOST")
    return out


def _fill(conn, out: dict) -> None:
    schema = schema_of(conn)
    env = _system_env(conn, schema)
    capture = fetch_all(conn, f"SELECT name, value FROM {CAPTURE_TABLE}") if schema.has(CAPTURE_TABLE) else []
    variables = {**_capture_variables(capture), **_device_environment(env.get("DeviceEnvironment"))}
    capture_values = {str(k): _text(v) for k, v in capture}
    out[HOST_FIELDS[0]] = env.get("Hostname") or None
    out[HOST_FIELDS[1]] = variables.get("SLURMD_NODENAME") or None
    out[HOST_FIELDS[2]] = capture_values.get("DEVICE_DISPLAY_NAME") or None
    gpus = _gpu_rows(conn, schema)
    out["node_gpus"] = len(gpus) or _cuda_gpu_count(conn, schema) or None
    out["device"] = _device(conn, schema)
    out[GPU_FIELDS[0]] = uuid_set(u for _, u, _ in gpus)
    out[GPU_FIELDS[1]] = uuid_set([env.get("GpuInfo", "")])
    out[GPU_FIELDS[2]] = uuid_set([variables.get("NVIDIA_VISIBLE_DEVICES", "")])
    out["uuid"] = uuid_set([_device_uuid(gpus, out["device"])])
    launcher = _launcher(capture, variables)
    out["launcher"] = launcher if launcher[0] is not None else None
    out["EXPORT_HOST"] = metadata(conn).get("EXPORT_HOST") or None


def _text(value) -> str:
    """A TEXT value that 2022.x exports store with NULs inside (read as bytes) as str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _system_env(conn, schema) -> dict[str, str]:
    """name -> value of TARGET_INFO_SYSTEM_ENV, read as bytes so 2022.x's NUL-separated and
    protobuf values arrive whole."""
    if not (schema.has(ENV_TABLE) and schema.has_column(ENV_TABLE, "value")):
        return {}
    rows = fetch_all(conn, f"SELECT name, CAST(value AS BLOB) FROM {ENV_TABLE}")
    return {str(k): _text(v) for k, v in rows if k is not None}


def _device_environment(text: str | None) -> dict[str, str]:
    """The launch environment nsys recorded (``DeviceEnvironment``: NAME=value separated by ';', or
    by NUL bytes in 2022.x)."""
    out = {}
    for item in re.split(r"[;\x00]", text or ""):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            out[name.strip()] = value
    return out


def _capture_variables(capture) -> dict[str, str]:
    """The launched process's environment (``PROCESS_n:ENVIRONMENT_VARIABLE`` rows, NAME="value")."""
    out = {}
    for name, value in capture:
        if str(name).endswith(":ENVIRONMENT_VARIABLE"):
            key, sep, rest = _text(value).partition("=")
            if sep:
                out.setdefault(key.strip(), rest.strip().strip('"'))
    return out


def _gpu_rows(conn, schema) -> list[tuple]:
    """(id, uuid, cuDevice) of the CUDA GPUs TARGET_INFO_GPU lists (2020.3's table: no UUIDs)."""
    table = "TARGET_INFO_GPU"
    if not schema.has(table):
        return []
    cols = schema.columns(table)
    ident = "id" if "id" in cols else "deviceId" if "deviceId" in cols else None
    if ident is None:
        return []
    uuid = "uuid" if "uuid" in cols else "NULL"
    cuda = '"cuDevice"' if "cuDevice" in cols else "NULL"
    real = "totalMemory > 0" if "totalMemory" in cols else "1"
    return fetch_all(conn, f'SELECT "{ident}", {uuid}, {cuda} FROM {table} WHERE {real} ORDER BY "{ident}"')


def _cuda_gpu_count(conn, schema) -> int:
    """GPUs of 2020.3's TARGET_INFO_CUDA_GPU (one row per GPU and process)."""
    table = "TARGET_INFO_CUDA_GPU"
    if not (schema.has(table) and schema.has_column(table, "deviceId")):
        return 0
    return int(fetch_all(conn, f"SELECT count(DISTINCT deviceId) FROM {table}")[0][0])


def _device(conn, schema) -> int | None:
    """The CUDA device number the rank's GPU work ran on (the most used, for a rank on several)."""
    seen = getattr(conn, "_extradeep_devices", {})  # what the reader's scans saw (fetch.note_devices)
    for table in GPU_WORK_TABLES:
        if schema.has(table) and schema.has_column(table, "deviceId"):
            if table in seen:
                low, high, known, rows = seen[table]
                if rows == 0:  # no rows: no device in this table, as the query would find
                    continue
                if low is not None and known == rows and low == high:  # one device, no NULL: the answer
                    return int(low)
            rows = fetch_all(
                conn, f"SELECT deviceId FROM {table} GROUP BY deviceId ORDER BY count(*) DESC, deviceId LIMIT 1"
            )
            if rows and rows[0][0] is not None:
                return int(rows[0][0])
    return None


def _device_uuid(gpus: list[tuple], device: int | None) -> str | None:
    """The UUID of the GPU row whose id is ``device``."""
    return next((uuid for gid, uuid, _ in gpus if device is not None and gid == device), None)


def _launcher(capture, variables: dict) -> tuple[int | None, str | None]:
    """Ranks per node given to the launcher: torchrun's --nproc-per-node on the captured command
    line, else a local-size variable of the captured environment."""
    args = [_text(v) for k, v in capture if re.fullmatch(r"PROCESS_\d+:ARGUMENT_\d+", str(k))]
    for i, arg in enumerate(args):
        m = _NPROC.match(arg.strip())
        if m:
            value = m.group(1) if m.group(1) is not None else (args[i + 1] if i + 1 < len(args) else "")
            if value.strip().isdigit() and int(value) >= 1:
                return int(value), "torchrun --nproc-per-node"
    for name in LOCAL_SIZE_VARIABLES:
        value = variables.get(name, "").split("(")[0].split(",")[0].strip()  # SLURM: "4(x2)" or "4,4"
        if value.isdigit() and int(value) >= 1:
            return int(value), name
    return None, None
