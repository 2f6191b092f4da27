"""Node signals of the real Kineto traces (distributedInfo, deviceProperties, host_name, the kernels'
device), against the JSON as the standard library reads it."""

from collections import Counter

import pandas as pd

from extradeep.io.kineto.placement import read_placement
from extradeep.io.placement import cluster_layout


def _kernel_device(doc: dict):
    counts = Counter(
        int(e["args"].get("device", e.get("pid")))
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "kernel"
    )
    return counts.most_common(1)[0][0] if counts else None


def test_each_trace_gives_its_rank_gpus_device_and_host(real_trace, plain_json):
    doc = plain_json(real_trace)
    place = read_placement(real_trace)
    info = doc.get("distributedInfo") or {}
    assert place["recorded_rank"] == info.get("rank") and place["world_size"] == info.get("world_size")
    assert place["node_gpus"] == (len(doc.get("deviceProperties") or []) or None)
    assert place["device"] == _kernel_device(doc)
    assert place["host"] == doc.get("host_name") and place["export_host"] is None


def test_ranks_on_their_local_device_give_nodes_of_the_listed_gpus(real_kineto):
    """Rank 3 of 8 ran on device 3 of its node's 8 GPUs, rank 1 of 2 on device 1 of 2: the block
    placement of every launcher, so each trace sits on node rank // GPUs."""
    for name, gpus in (("HTA__trace_diff_control_control.json.gz", 8), ("HTA__trace_diff_test_test.json.gz", 2)):
        place = read_placement(real_kineto(name))
        frame = pd.DataFrame([{"path": name, "rank": 0, "rep": 1, **place}])
        layout = cluster_layout(frame, [])
        assert layout["source"] == "devices" and layout["gpus_per_node"] == gpus
        assert layout["fields"] == ["Kineto distributedInfo and deviceProperties"]


def test_a_trace_that_names_its_machine_gives_a_host(real_kineto):
    place = read_placement(real_kineto("HTA__ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    layout = cluster_layout(pd.DataFrame([{"path": "x", "rank": 0, "rep": 1, **place}]), [])
    assert layout["source"] == "hostname" and layout["fields"] == ["Kineto host_name"]
    assert layout["gpus_per_node"] == 8 and not layout["warnings"]


def test_sampled_ranks_without_device_properties_have_no_layout(real_kineto):
    """Ranks 0 and 1 of 128 record no GPUs of their node: nothing says which ranks share one."""
    rows = [
        {"path": n, "rank": r, "rep": 1, **read_placement(real_kineto(n))}
        for r, n in enumerate(["HTA__trace_filter_sampled_rank-0.json.gz", "HTA__trace_filter_sampled_rank-1.json.gz"])
    ]
    layout = cluster_layout(pd.DataFrame(rows), [])
    assert layout["source"] == "none" and layout["gpus_per_node"] is None and "no node signal" in layout["note"]
