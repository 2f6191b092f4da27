"""`inspect`, `model` and `plan` say which signal gave the cluster layout, on a simulated study whose
exports keep it only in GPU UUID sets and EXPORT_HOST (no TARGET_INFO_SYSTEM_ENV)."""

from __future__ import annotations

import json
import re

import pytest

from extradeep.cli import main
from extradeep.simulate import simulate


@pytest.fixture(scope="module")
def uuid_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("uuids")
    simulate(
        out,
        params={"ranks": [2, 4, 8, 12, 16]},
        repetitions=1,
        epochs=2,
        train_steps=2,
        val_steps=0,
        truth_replicates=0,
        topology="4gpu-1nic-per-gpu",
        signals="uuids",
    )
    return out


def test_inspect_shows_each_files_signals_and_the_studys_layout(uuid_study, capsys):
    assert main(["inspect", str(uuid_study)]) == 0
    out = capsys.readouterr().out
    assert "node: 4 GPU(s) with UUIDs (TARGET_INFO_GPU)" in out and "(EXPORT_HOST)" in out
    assert "no host name" not in out
    assert "cluster layout of the 42 profiles:" in out
    assert "layout from GPU UUID sets (TARGET_INFO_GPU): 4 GPUs per node" in out and "16 ranks on 4 nodes" in out


def test_inspect_json_carries_the_layout_and_its_source(uuid_study, capsys):
    assert main(["inspect", str(uuid_study), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layout"]["source"] == "gpu_uuids" and doc["layout"]["gpus_per_node"] == 4
    assert all(f["placement"]["export_host"].startswith("gpu-node") for f in doc["files"])


def test_model_names_the_source_of_the_layout(uuid_study, capsys):
    assert main(["model", str(uuid_study), "--no-cache", "--no-replay"]) == 0
    out = capsys.readouterr().out
    assert "layout from GPU UUID sets (TARGET_INFO_GPU): 4 GPUs per node" in out


def test_plan_proposes_whole_nodes_unless_partial_nodes_and_says_so(uuid_study, capsys):
    base = ["plan", str(uuid_study), "--no-cache", "--no-replay", "--target", "64", "--max-ranks", "32", "-k", "6"]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "node size 4 GPUs from the experiment's profiles' GPU UUID sets" in out
    assert "whole nodes (4 ranks each)" in out
    ranks = [int(m) for m in re.findall(r"^\s+(\d+)\s+\d+\s+\d+\s+\d+\s", out, flags=re.MULTILINE)]
    assert ranks and all(r <= 4 or r % 4 == 0 for r in ranks)  # within one node, or whole nodes
    assert main([*base, "--partial-nodes"]) == 0
    assert "--partial-nodes: beyond one node the plan also proposes half nodes" in capsys.readouterr().out
