"""The search: every valid layout for a range of GPU counts (and GPU types), ranked by time, cost
and energy, with the Pareto front of time against cost and the best layout under limits.

Time is per step, or per epoch when ``samples_per_epoch`` is given (ceil(samples / global batch)
steps). Cost is GPU-hours (N x time / 3600), times the price per GPU-hour when the hardware has one.
Energy is N x the GPU's power x time x PUE, in kWh, times the price per kWh for its cost; the
power per GPU is a :class:`extradeep.layouts.energy.PowerModel`'s (calibrated on profiles' power
samples, else the hardware file's figure). Beside them, as DFModel reports perf/W and perf/$:
``throughput`` (samples/s), ``perf_per_watt`` (samples per joule of GPU energy, PUE included) and
``perf_per_cost`` (samples per unit of cost: GPU-hours, or money with a price, plus the energy's
price when both are known). A layout whose peak memory exceeds the GPU's is never
ranked or recommended; its ``reason`` says why.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import (
    COST,
    ENERGY_COST,
    ENERGY_KWH,
    FITS,
    GLOBAL_BATCH,
    GPU_HOURS,
    GPUS,
    HARDWARE,
    PARETO,
    PEAK_MEMORY,
    POWER_W,
    RANK,
    RUN_TIME,
    STEP_TIME,
    TIME_HIGH,
    TIME_LOW,
)
from extradeep.errors import InputError
from extradeep.layouts.energy import PowerModel
from extradeep.layouts.hardware import load_hardware
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.space import enumerate_layouts
from extradeep.layouts.transfer import transferred_model
from extradeep.layouts.workload import TransformerShape, load_transformer

OBJECTIVES = ("time", "cost", "energy")


def search_layouts(
    model: LayoutModel,
    shape,
    gpus,
    global_batch: int,
    hardware=None,
    samples_per_epoch: float | None = None,
    max_time: float | None = None,
    max_cost: float | None = None,
    objective: str = "time",
    micro_batches=(1, 2, 4, 8, 16),
    zero=(0, 1),
    recompute=("full",),
    schedules=("1f1b",),
    chunks=(2,),
    power=None,
    kernel_classes: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per candidate layout (and GPU type of ``hardware``: one or a list; default the
    model's), with its predicted time, interval, cost, energy, memory, ``fits``/``reason``,
    ``pareto`` (on the front of time against cost among the layouts that fit), ``rank`` by
    ``objective`` among those that fit and meet the limits (0 for the others) and ``best``
    (rank 1). Sorted by rank. ``attrs`` holds the units and limits. ``power``: a fitted
    :class:`~extradeep.layouts.energy.PowerModel` (default: the hardware file's watts).
    ``kernel_classes``: :func:`extradeep.layouts.transfer.class_observations` of the calibration
    runs; on other GPU types the compute then moves as those kernel classes move
    (:func:`~extradeep.layouts.transfer.transferred_model`)."""
    if objective not in OBJECTIVES:
        raise InputError(None, f"must be one of {', '.join(OBJECTIVES)}, got {objective!r}", field="objective")
    for name, value in (("max_time", max_time), ("max_cost", max_cost), ("samples_per_epoch", samples_per_epoch)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InputError(None, f"must be a positive number, got {value!r}", field=name)
    shape = load_transformer(shape) if not isinstance(shape, TransformerShape) else shape
    power = PowerModel().fit(model) if power is None else power
    targets = hardware if isinstance(hardware, (list, tuple)) else [hardware]
    tables = []
    for spec in targets:
        target = model.hardware_ if spec is None else load_hardware(spec)
        layouts = enumerate_layouts(
            shape, gpus, global_batch, target.system.gpus_per_node, micro_batches, zero, recompute, schedules, chunks
        )
        if not len(layouts):
            continue
        predictor = model
        if kernel_classes is not None and len(kernel_classes) and target.gpu != model.hardware_.gpu:
            predictor = transferred_model(model, kernel_classes, target)
        predicted = predictor.predict(layouts, hardware=target)
        watts = power.predict(predicted, target)
        tables.append(_economics(pd.concat([layouts, predicted], axis=1), target, samples_per_epoch, watts))
    if not tables:
        raise InputError(
            None, f"no valid layout of this model for {global_batch} samples per step on {gpus} GPUs", field="gpus"
        )
    table = pd.concat(tables, ignore_index=True)
    _check_finite(table)
    table.attrs["power_source"] = power.source_
    return rank_layouts(table, objective, max_time, max_cost, per_epoch=samples_per_epoch is not None)


def _check_finite(table: pd.DataFrame) -> None:
    """A time, cost or energy past the largest float (a price or epoch of 1e300) would be shown as inf:
    name what to make smaller instead."""
    for column, name in ((RUN_TIME, "samples_per_epoch"), (COST, "price_per_gpu_hour"), (ENERGY_COST, "price_per_kwh")):
        if np.isinf(table[column].to_numpy(float)).any():
            raise InputError(
                None, f"too large (given or from the hardware file): a layout's {column} overflows", field=name
            )


def _economics(table: pd.DataFrame, hardware, samples_per_epoch, watts) -> pd.DataFrame:
    steps = 1.0 if samples_per_epoch is None else np.ceil(samples_per_epoch / table[GLOBAL_BATCH])
    table[HARDWARE] = hardware.label
    table[RUN_TIME] = table[STEP_TIME] * steps
    table[TIME_LOW] = table[STEP_TIME + "_low"] * steps
    table[TIME_HIGH] = table[STEP_TIME + "_high"] * steps
    table[GPU_HOURS] = table[RUN_TIME] * table[GPUS] / 3600
    price = hardware.price_per_gpu_hour
    table[COST] = table[GPU_HOURS] * (price if price is not None else 1.0)
    table[POWER_W] = watts
    table[ENERGY_KWH] = table[GPUS] * table[POWER_W] * table[RUN_TIME] * hardware.pue / 3.6e6
    table[ENERGY_COST] = table[ENERGY_KWH] * (hardware.price_per_kwh if hardware.price_per_kwh else np.nan)
    samples = table[GLOBAL_BATCH] * steps
    table["throughput"] = samples / table[RUN_TIME]
    table["perf_per_watt"] = samples / (table[ENERGY_KWH] * 3.6e6)
    both = price is not None and hardware.price_per_kwh
    table["perf_per_cost"] = samples / (table[COST] + (table[ENERGY_COST] if both else 0.0))
    table.attrs["cost_unit"] = "currency" if price is not None else "GPU-hours"
    return table


def rank_layouts(table: pd.DataFrame, objective="time", max_time=None, max_cost=None, per_epoch=False) -> pd.DataFrame:
    """Mark the Pareto front, the limits, the ranks and the best layout of a search table."""
    out = table.copy()
    column = {"time": "time", "cost": "cost", "energy": "energy_kwh"}[objective]
    within = out[FITS].to_numpy(bool).copy()
    if max_time is not None:
        within &= out[RUN_TIME].to_numpy() <= max_time
    if max_cost is not None:
        within &= out[COST].to_numpy() <= max_cost
    out["within_limits"] = within
    out[PARETO] = pareto_mask(out[RUN_TIME].to_numpy(), out[COST].to_numpy(), out[FITS].to_numpy(bool))
    order = np.argsort(np.where(within, out[column].to_numpy(), np.inf), kind="stable")
    rank = np.zeros(len(out), int)
    rank[order[: within.sum()]] = np.arange(1, within.sum() + 1)
    out[RANK] = rank
    out["best"] = rank == 1
    out = out.iloc[np.lexsort((out[RUN_TIME].to_numpy(), np.where(rank > 0, rank, len(out) + 1)))].reset_index(
        drop=True
    )
    out.attrs.update(
        {
            "objective": objective,
            "max_time": max_time,
            "max_cost": max_cost,
            "time_unit": "s per epoch" if per_epoch else "s per step",
            "cost_unit": table.attrs.get("cost_unit", "GPU-hours"),
            "power_source": table.attrs.get("power_source", "system file"),
        }
    )
    return out


def pareto_mask(time, cost, eligible) -> np.ndarray:
    """True where no eligible layout is at least as fast and as cheap and better in one of them."""
    time, cost = np.asarray(time, float), np.asarray(cost, float)
    mask = np.zeros(len(time), bool)
    index = np.flatnonzero(eligible)
    if not len(index):
        return mask
    order = index[np.lexsort((cost[index], time[index]))]
    best = np.inf
    for i in order:  # by time, then cost: a layout is on the front when it is cheaper than every faster one
        if cost[i] < best:
            mask[i] = True
            best = cost[i]
    return mask


def pareto_front(table: pd.DataFrame) -> pd.DataFrame:
    """The layouts on the front of time against cost, fastest first."""
    return table[table[PARETO]].sort_values(RUN_TIME).reset_index(drop=True)


def best_layout(table: pd.DataFrame) -> pd.Series | None:
    """The recommended layout (rank 1), or None when no layout fits and meets the limits."""
    best = table[table["best"]]
    return None if best.empty else best.iloc[0]


def why_none(table: pd.DataFrame) -> str:
    """Why no layout was recommended: nothing fits in memory, or which limit the closest misses."""
    if not table[FITS].any():
        return f"no layout fits in GPU memory (smallest need: {table['reason'].iloc[table[PEAK_MEMORY].argmin()]})"
    fits = table[table[FITS]]
    parts = []
    limit = table.attrs.get("max_time")
    if limit is not None and (fits[RUN_TIME] > limit).all():
        parts.append(f"the fastest layout takes {fits[RUN_TIME].min():.4g} s, over --max-time {limit:g} s")
    limit = table.attrs.get("max_cost")
    if limit is not None and (fits[COST] > limit).all():
        parts.append(
            f"the cheapest costs {fits[COST].min():.4g} {table.attrs.get('cost_unit')}, over --max-cost {limit:g}"
        )
    return "; ".join(parts) or "no layout meets both limits at once"


def write_search(table: pd.DataFrame, path) -> Path:
    """Write the search table as CSV or JSON (by the file's suffix); JSON keeps the units and limits.
    A layout outside the ranking (it does not fit, or breaks a limit) has no rank: blank in CSV,
    null in JSON (the table's 0 would read as better than first)."""
    import orjson

    path = Path(path)
    if RANK in table:  # a ranked search (a calibration's fit table has no ranks)
        table = table.assign(**{RANK: table[RANK].where(table[RANK] > 0).astype("Int64")})
    if path.suffix.lower() == ".json":
        records = table.astype(object).replace({np.inf: None, pd.NA: None}).to_dict(orient="records")
        payload = {"attrs": {k: v for k, v in table.attrs.items()}, "layouts": records}
        path.write_bytes(orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2))
    elif path.suffix.lower() == ".csv":
        table.to_csv(path, index=False)
    else:
        raise InputError(path, "write .csv or .json")
    return path
