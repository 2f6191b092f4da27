"""The cluster layout from every node signal, with its source: each signal as the simulator writes it
(as real exports of different versions and set-ups do), in order of trust, and their disagreements."""

from __future__ import annotations

import pandas as pd
import pytest

from extradeep.analysis.layout_text import layout_text
from extradeep.io.placement import cluster_layout, resolve_layout, source_name
from extradeep.io.read import read_placement
from extradeep.simulate import simulate
from extradeep.system import PRESETS

RANKS = [2, 4, 8, 12]
NODES = [1, 1, 2, 3]  # on nodes of 4 GPUs


def _simulate(out, signals="all", formats=("nsys",), topology="4gpu-1nic-per-gpu"):
    return simulate(
        out,
        params={"ranks": RANKS},
        repetitions=1,
        epochs=1,
        train_steps=1,
        val_steps=0,
        truth_replicates=0,
        noise=(0, 0, 0),
        topology=topology,
        signals=signals,
        formats=formats,
    )


def _placements(sim) -> pd.DataFrame:
    files = sim.files
    rows = pd.DataFrame([read_placement(p) for p in files["path"]], index=files.index)
    return pd.concat([files, rows], axis=1)


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """Placements of the same 4-GPU-node study, once per set of signals the exports carry."""
    out = {}
    for signals in ("all", "hostname", "uuids", "export-host", "containers", "elsewhere"):
        out[signals] = _placements(_simulate(tmp_path_factory.mktemp(signals), signals))
    out["kineto"] = _placements(_simulate(tmp_path_factory.mktemp("kineto"), formats=("kineto",)))
    out["8gpu"] = _placements(_simulate(tmp_path_factory.mktemp("dgx"), "export-host", topology="dgx-8-nvswitch"))
    return out


@pytest.mark.parametrize(
    "signals, source, fields",
    [
        ("all", "hostname", ["TARGET_INFO_SYSTEM_ENV Hostname"]),
        ("hostname", "hostname", ["TARGET_INFO_SYSTEM_ENV Hostname"]),
        ("uuids", "gpu_uuids", ["TARGET_INFO_GPU"]),
        ("export-host", "export_host", ["EXPORT_HOST"]),
        ("containers", "hostname", ["TARGET_INFO_SYSTEM_ENV Hostname"]),
        ("elsewhere", "gpu_uuids", ["TARGET_INFO_GPU"]),
        ("kineto", "devices", ["Kineto distributedInfo and deviceProperties"]),
    ],
)
def test_each_signal_alone_gives_the_true_layout_and_names_its_source(variants, signals, source, fields):
    layout = cluster_layout(variants[signals], ["ranks"])
    assert layout["source"] == source and layout["fields"] == fields
    assert layout["gpus_per_node"] == PRESETS["4gpu-1nic-per-gpu"].gpus_per_node
    assert [p["nodes"] for p in layout["points"]] == NODES and not layout["warnings"]
    assert [p["ranks_per_node"] for p in layout["points"]] == [2, 4, 4, 4]
    text = "\n".join(layout_text(layout))
    assert f"layout from {source_name(source)} ({fields[0]})" in text


def test_the_most_trusted_signal_wins_and_the_others_agree(variants):
    layout = cluster_layout(variants["all"], ["ranks"])
    assert layout["signals"] == ["hostname", "gpu_uuids", "devices", "export_host"]
    assert layout["sources"] == {"hostname": len(RANKS)}


def test_containers_on_one_node_are_joined_by_their_gpus(variants):
    frame = variants["containers"]
    assert frame["host"].nunique() == max(RANKS)  # one container (host name) per rank
    layout = cluster_layout(frame, ["ranks"])
    assert any("containers on one node" in n for n in layout["notes"])


def test_reports_exported_elsewhere_do_not_make_one_node(variants):
    layout = cluster_layout(variants["elsewhere"], ["ranks"])
    assert not layout["warnings"] and "export_host" in layout["signals"]
    assert any("exported elsewhere" in n for n in layout["notes"])
    # EXPORT_HOST alone, where the exports list their node's GPUs, is refused the same way
    alone = variants["elsewhere"].assign(gpu_set=None, host=None, device=None)
    assert cluster_layout(alone, ["ranks"])["source"] == "none"


def test_export_hosts_alone_carry_a_caveat(variants):
    layout = cluster_layout(variants["export-host"], ["ranks"])
    assert any("--system" in n and "EXPORT_HOST" in n for n in layout["notes"])


def test_signals_that_disagree_give_a_warning_and_the_trusted_one_is_kept(variants):
    """Host names of 4-GPU nodes beside export hosts of 8-GPU nodes, for the same files."""
    hosts = variants["hostname"].set_index("path")
    other = variants["8gpu"].set_index(variants["8gpu"]["path"].map(lambda p: p.split("/")[-1]))
    merged = hosts.assign(export_host=hosts.index.map(lambda p: other.loc[p.split("/")[-1], "export_host"]))
    layout = cluster_layout(merged.reset_index(), ["ranks"])
    assert layout["source"] == "hostname" and layout["gpus_per_node"] == 4
    [warning] = layout["warnings"]
    assert "host names and export hosts disagree" in warning and "ranks=8" in warning
    assert "on 2 node(s), export hosts on 1" in warning
    assert any(line.startswith("WARNING: host names and export hosts") for line in layout_text(layout))


def test_profiles_without_signals_leave_the_layout_to_a_system_file(variants):
    bare = variants["hostname"].assign(host=None, device=None, node_gpus=None, gpu_set=None)
    layout = cluster_layout(bare, ["ranks"])
    assert layout["source"] == "none" and layout["gpus_per_node"] is None
    system = PRESETS["dgx-8-nvswitch"].to_dict()
    assert resolve_layout(layout, system) == {"gpus_per_node": 8, "source": "system", "warning": None}
    assert "layout from the system file: 8 GPUs per node" in layout_text(layout, system)


def test_a_system_file_that_contradicts_the_profiles_is_overruled_with_a_warning(variants):
    layout = cluster_layout(variants["uuids"], ["ranks"])
    resolved = resolve_layout(layout, PRESETS["dgx-8-nvswitch"].to_dict())
    assert resolved["gpus_per_node"] == 4 and resolved["source"] == "gpu_uuids"
    assert "system file says 8 GPUs per node" in resolved["warning"] and "GPU UUID sets" in resolved["warning"]
    # a system file that agrees adds its links and no warning
    assert resolve_layout(layout, PRESETS["4gpu-1nic"].to_dict())["warning"] is None
