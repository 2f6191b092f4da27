"""The search: the Pareto front against a brute-force check, nothing infeasible recommended,
limits respected, energy and cost from their definitions, several GPU types, CSV/JSON written."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from extradeep.errors import InputError
from extradeep.layouts.hardware import Hardware, load_hardware
from extradeep.layouts.search import best_layout, pareto_front, pareto_mask, search_layouts, why_none, write_search
from extradeep.layouts.validation import VTRAIN_CLUSTER
from extradeep.layouts.workload import TransformerShape

GPT_39B = TransformerShape(layers=48, hidden=8192, heads=64, seq_len=2048, name="GPT 39.1B")
PRICED = Hardware(
    gpu=VTRAIN_CLUSTER.gpu, system=VTRAIN_CLUSTER.system, price_per_gpu_hour=4.1, price_per_kwh=0.2, pue=1.3
)


@pytest.fixture(scope="module")
def table(vtrain_model):
    return search_layouts(
        vtrain_model,
        GPT_39B,
        [128, 256, 512],
        1536,
        hardware=PRICED,
        samples_per_epoch=1536 * 100,
        micro_batches=(1, 2, 4, 8),
    )


def test_pareto_front_matches_brute_force(table):
    fits = table["fits"].to_numpy()
    time, cost = table["time"].to_numpy(), table["cost"].to_numpy()
    for i in range(len(table)):
        dominated = fits & (time <= time[i]) & (cost <= cost[i]) & ((time < time[i]) | (cost < cost[i]))
        assert table["pareto"].iloc[i] == (fits[i] and not dominated.any())
    front = pareto_front(table)
    assert front["time"].is_monotonic_increasing and front["cost"].is_monotonic_decreasing
    assert pareto_mask([1.0, 2.0], [1.0, 0.5], [False, False]).sum() == 0


def test_nothing_infeasible_is_ranked_and_the_best_is_fastest(table):
    assert (~table["fits"]).any(), "this search should meet layouts that do not fit in 80 GiB"
    assert (table.loc[~table["fits"], "rank"] == 0).all()
    assert table.loc[~table["fits"], "reason"].str.startswith("needs ").all()
    best = best_layout(table)
    assert best["fits"] and best["time"] == table.loc[table["fits"], "time"].min()
    ranked = table[table["rank"] > 0].sort_values("rank")
    assert ranked["time"].is_monotonic_increasing


def test_cost_energy_and_epochs_follow_their_definitions(table):
    steps = np.ceil(1536 * 100 / table["global_batch"])
    assert np.allclose(table["time"], table["step_time"] * steps)
    assert np.allclose(table["cost"], table["gpus"] * table["time"] / 3600 * 4.1)
    kwh = table["gpus"] * PRICED.gpu.power * table["time"] * 1.3 / 3.6e6
    assert np.allclose(table["energy_kwh"], kwh) and np.allclose(table["energy_cost"], kwh * 0.2)
    assert table.attrs["time_unit"] == "s per epoch" and table.attrs["cost_unit"] == "currency"


def test_limits_and_objectives(vtrain_model, table):
    limit = 1.5 * table.loc[table["fits"], "step_time"].min()  # per step: this search gives no epoch
    limited = search_layouts(
        vtrain_model, GPT_39B, [128, 256, 512], 1536, hardware=PRICED, max_time=limit, objective="cost"
    )
    chosen = best_layout(limited)
    within = limited[limited["within_limits"]]
    assert (within["time"] <= limit).all() and within["fits"].all() and len(within) < limited["fits"].sum()
    assert chosen["time"] <= limit and chosen["cost"] == within["cost"].min()
    impossible = search_layouts(vtrain_model, GPT_39B, [128], 1536, hardware=PRICED, max_time=1e-3)
    assert best_layout(impossible) is None and "over --max-time" in why_none(impossible)
    with pytest.raises(InputError, match="must be one of"):
        search_layouts(vtrain_model, GPT_39B, [128], 1536, objective="speed")
    with pytest.raises(InputError, match="no valid layout"):
        search_layouts(vtrain_model, GPT_39B, [7], 1536)


def test_several_gpu_types(vtrain_model):
    both = search_layouts(vtrain_model, GPT_39B, [256], 1536, hardware=[None, "h100-sxm"], micro_batches=(1, 2))
    assert set(both["hardware"]) == {VTRAIN_CLUSTER.label, load_hardware("h100-sxm").label}
    assert both.loc[both["hardware"] == "h100-sxm", "estimate"].all()
    assert not both.loc[both["hardware"] == VTRAIN_CLUSTER.label, "estimate"].any()


def test_written_tables_read_back(table, tmp_path):
    csv_path = write_search(table, tmp_path / "layouts.csv")
    back = pd.read_csv(csv_path)
    assert len(back) == len(table) and np.allclose(back["time"], table["time"])
    json_path = write_search(table, tmp_path / "layouts.json")
    data = json.loads(json_path.read_text())
    assert data["attrs"]["objective"] == "time" and len(data["layouts"]) == len(table)
    # the ranked layouts keep their ranks 1, 2, ...; the others have none, never a 0
    ranked = table["within_limits"].to_numpy(bool)
    assert 0 < ranked.sum() < len(table)
    assert back["rank"][ranked].tolist() == table["rank"][ranked].tolist() and back["rank"][~ranked].isna().all()
    ranks = [row["rank"] for row in data["layouts"]]
    assert [r for r, k in zip(ranks, ranked) if k] == table["rank"][ranked].tolist()
    assert all(r is None for r, k in zip(ranks, ranked) if not k)
    with pytest.raises(InputError, match="write .csv or .json"):
        write_search(table, tmp_path / "layouts.xlsx")


@pytest.mark.parametrize(
    "prices,field",
    [({"price_per_gpu_hour": 1e308}, "price_per_gpu_hour"), ({"price_per_kwh": 1e308}, "price_per_kwh")],
)
def test_a_cost_past_the_largest_float_is_refused_not_shown_as_inf(vtrain_model, prices, field):
    """A finite but absurd price once made the best layout's cost 'inf currency'."""
    hardware = Hardware(gpu=PRICED.gpu, system=PRICED.system, **{"price_per_gpu_hour": 4.1, **prices})
    with pytest.raises(InputError, match="overflows") as info:
        search_layouts(
            vtrain_model, GPT_39B, [512], 1536, hardware=hardware, micro_batches=(1, 2), samples_per_epoch=1536 * 1000
        )
    assert info.value.field == field
