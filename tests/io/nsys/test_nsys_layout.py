"""Cluster layout from real and simulated exports: host, the node's GPUs, the GPU a rank used."""

import hashlib

import pandas as pd

from extradeep.io.nsys.layout import cluster_layout, read_placement


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_real_export_gives_host_gpus_and_device_uuid(real_nsys_dir):
    path = real_nsys_dir / "yyhtbs-yye__mmagic_vsr_v2__net.sqlite"
    before = _digest(path)
    place = read_placement(path)
    assert place["host"] == "a44a589055b9" and place["node_gpus"] == 4
    assert place["device"] == 0 and place["uuid"] == "b3c1eae3-15dc-dc1b-5a5b-e690d743ad47"
    assert _digest(path) == before


def test_real_export_without_system_env_has_no_host(real_nsys_dir):
    place = read_placement(real_nsys_dir / "lockfuehrer__beast_ressoruces__report2.sqlite")
    assert place["host"] is None
    layout = cluster_layout(pd.DataFrame([{"path": "x", "rank": 0, "rep": 1, "ranks": 1, **place}]), ["ranks"])
    assert layout["source"] == "none" and "no host names" in layout["note"]


def test_containers_sharing_a_node_are_one_node():
    gpus = "u0,u1,u2,u3"
    rows = [
        {
            "path": str(r),
            "rank": r,
            "rep": 1,
            "ranks": 4,
            "host": f"container{r}",
            "device": r,
            "uuid": f"u{r}",
            "node_gpus": 4,
            "gpu_set": gpus,
        }
        for r in range(4)
    ]
    layout = cluster_layout(pd.DataFrame(rows), ["ranks"])
    assert layout["gpus_per_node"] == 4 and layout["points"][0]["nodes"] == 1
