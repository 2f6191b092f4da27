"""Every node signal of the real exports (2020.3 to 2026.2), read where each version keeps it."""

import hashlib
import sqlite3

import pandas as pd

from extradeep.errors import InputError
from extradeep.io.nsys import events
from extradeep.io.nsys.layout import GPU_FIELDS, read_placement, read_signals
from extradeep.io.nsys.read import read_export_once
from extradeep.io.placement import cluster_layout, uuid_set
from extradeep.io.sqlite import open_readonly


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows(path, sql):
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def _one_rank(place: dict) -> dict:
    return cluster_layout(pd.DataFrame([{"path": "x", "rank": 0, "rep": 1, **place}]), [])


def test_real_export_gives_host_gpus_and_device_uuid(real_nsys_dir):
    path = real_nsys_dir / "yyhtbs-yye__mmagic_vsr_v2__net.sqlite"
    before = _digest(path)
    place = read_placement(path)
    assert place["host"] == "a44a589055b9" and place["node_gpus"] == 4
    assert place["device"] == 0 and place["uuid"] == "b3c1eae3-15dc-dc1b-5a5b-e690d743ad47"
    assert place["export_host"] == "a44a589055b9" and place["gpu_set"].count(",") == 3
    assert _digest(path) == before


def test_every_signal_agrees_with_the_table_it_comes_from(real_export):
    """Host names, GPU UUIDs and the export host as sqlite3 reads them from each table, every version."""
    path = real_export
    signals = read_signals(path)
    host = _rows(path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
    assert signals.get("TARGET_INFO_SYSTEM_ENV Hostname") == (host[0][0] if host else None)
    meta = _rows(path, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_HOST'") or _rows(
        path, "SELECT value FROM EXPORT_META_DATA WHERE name = 'EXPORT_HOST'"
    )
    assert signals.get("EXPORT_HOST") == (meta[0][0] if meta else None)
    uuids = _rows(path, "SELECT uuid FROM TARGET_INFO_GPU WHERE totalMemory > 0")
    assert signals.get("TARGET_INFO_GPU") == uuid_set(u for (u,) in uuids)
    # 2023.1+ keep the node's GPUs as JSON in GpuInfo, 2022.x as protobuf bytes: the same UUIDs
    if signals.get(GPU_FIELDS[1]) and signals.get(GPU_FIELDS[0]):
        assert signals[GPU_FIELDS[1]] == signals[GPU_FIELDS[0]]
    # every real export was exported where it was captured, and names that host wherever it can
    names = {
        signals[k] for k in ("TARGET_INFO_SYSTEM_ENV Hostname", "META_DATA_CAPTURE DEVICE_DISPLAY_NAME") if k in signals
    }
    assert len(names) <= 1 and (not names or signals.get("EXPORT_HOST") in names)


def test_old_exports_list_gpus_without_uuids_or_host(real_nsys_dir):
    """2020.3: no TARGET_INFO_SYSTEM_ENV, no metadata; GPUs in TARGET_INFO_CUDA_GPU or a UUID-less TARGET_INFO_GPU."""
    for name in ("lockfuehrer__beast_ressoruces__report2.sqlite", "quasiben__nvtx-examples__cudf.sqlite"):
        place = read_placement(real_nsys_dir / name)
        assert place["host"] is None and place["gpu_set"] is None and place["export_host"] is None
        assert place["node_gpus"] == 2 and place["device"] == 0
        layout = _one_rank(place)
        # one rank on device 0 of a node listing 2 GPUs: the only signal is the rank's device
        assert layout["source"] == "devices" and layout["gpus_per_node"] == 2


def test_windows_export_names_its_host_at_capture_and_lists_only_cuda_gpus(real_nsys_dir):
    place = read_placement(real_nsys_dir / "Faraz-Nasir__CUDA---Recap__report1.sqlite")
    # no Hostname row on Windows: the capture's DEVICE_DISPLAY_NAME; the Basic Render Driver is no GPU
    assert place["host"] == "LAPTOP-F7897UP0" and place["host_from"].endswith("DEVICE_DISPLAY_NAME")
    assert place["node_gpus"] == 1 and place["gpu_set"] == place["uuid"]


def test_torchrun_container_export_gives_visible_gpus_and_ranks_per_node(real_nsys_dir):
    """The 2-GPU FSDP slice has no TARGET_INFO_GPU: its container's NVIDIA_VISIBLE_DEVICES lists the
    two GPUs, and the captured command line (torchrun --nproc_per_node=2) the ranks per node."""
    place = read_placement(real_nsys_dir / "GindaChen__nsys-ai__mfu_2gpu_before.sqlite")
    visible = _rows(
        real_nsys_dir / "GindaChen__nsys-ai__mfu_2gpu_before.sqlite",
        "SELECT value FROM META_DATA_CAPTURE WHERE value LIKE 'NVIDIA_VISIBLE_DEVICES=%'",
    )
    assert place["gpus_from"] == "NVIDIA_VISIBLE_DEVICES" and place["gpu_set"] == uuid_set([visible[0][0]])
    assert place["gpu_set"].count(",") == 1
    assert place["local_ranks"] == 2 and "nproc" in place["launcher_from"]
    layout = _one_rank(place)
    assert layout["source"] == "hostname" and layout["gpus_per_node"] == 2 and not layout["warnings"]
    assert layout["signals"] == ["hostname", "gpu_uuids", "launcher", "export_host"]


def test_a_file_that_is_not_an_export_has_no_signals(tmp_path):
    path = tmp_path / "x.sqlite"
    path.write_bytes(b"not sqlite at all")
    assert read_signals(path) == {} and set(read_placement(path).values()) == {None}


def test_device_from_the_readers_scans_is_the_one_sqlite_counts(real_export, sim_ranges, altered_copy, tmp_path):
    """The pass that reads the sums also gives the placement's device (from the deviceId range its
    GPU table scans see): the most used deviceId as SQLite groups it, on every real export, one
    simulated rank and that rank with two thirds of its kernels (and no copies) moved to device 5
    (then the range spans two devices and SQLite is asked); a file the reader refuses is skipped."""
    sim = sorted(sim_ranges.glob("*.sqlite"))[0]
    moved = altered_copy(
        sim,
        tmp_path,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 5 WHERE rowid % 3 <> 0",
        "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    )
    for path in [real_export, sim, moved]:
        counted = None
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            sql = f"SELECT deviceId FROM {table} GROUP BY deviceId ORDER BY count(*) DESC, deviceId LIMIT 1"
            rows = _rows(path, sql)
            if rows and rows[0][0] is not None:
                counted = rows[0][0]
                break
        try:
            found = read_export_once(path).placement
        except InputError:
            continue
        assert found["device"] == counted == read_placement(path)["device"]


def test_device_when_a_kernel_has_a_text_or_real_device(sim_ranges, altered_copy, tmp_path):
    """A damaged deviceId (TEXT or REAL in one kernel row) neither stops the reader nor changes the
    device: the most used one, as SQLite groups them, on both of the reader's paths."""
    sim = sorted(sim_ranges.glob("*.sqlite"))[0]
    for value in ("'gpu'", "0.5"):
        (tmp_path / value.strip("'.")).mkdir()
        path = altered_copy(
            sim,
            tmp_path / value.strip("'."),
            f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = {value} WHERE rowid = 2",
        )
        sql = "SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId ORDER BY count(*) DESC LIMIT 1"
        counted = _rows(path, sql)[0][0]
        assert read_placement(path)["device"] == counted
        assert read_export_once(path).placement["device"] == counted  # a small export: one statement
        conn = open_readonly(path)  # a large export's way: the kernels' own scan (read as its reader does)
        try:
            events.kernel_table(conn, columns=["launchKey"])
            assert read_placement(conn)["device"] == counted
        finally:
            conn.close()
