"""Bottlenecks (paper section 3.1, Q3): region models ranked by how fast they grow.

Regions are ordered by the asymptotic growth of their runtime model (``Model.growth_key()``,
fastest first), ties broken by their predicted share at a target point, the configuration the
user cares about (default: the largest point asked for). Each row also gives the region's share
of its category and of all GPU work at that point.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.analysis.scaling import design
from extradeep.columns import CATEGORY, KIND, METRIC, PREDICTED, REGION

EPOCH_CATEGORIES = ("computation", "communication", "memory")


def bottleneck_table(
    region_models: pd.DataFrame,
    target: dict,
    params: list[str],
    categories=EPOCH_CATEGORIES,
    metric: str = "time",
    top: int | None = None,
) -> pd.DataFrame:
    """Rank the ``metric`` models of ``region_models`` (fit_models output with region, kind,
    category, metric, model) by growth class, then by predicted share at ``target``.

    Columns: rank, region, kind, category, growth, formula, predicted, share_of_category,
    share_of_total, smape.
    """
    columns = [
        "rank",
        "region",
        "kind",
        "category",
        "growth",
        "formula",
        "predicted",
        "share_of_category",
        "share_of_total",
        "smape",
    ]
    rows = region_models[
        (region_models[METRIC] == metric) & region_models[CATEGORY].isin(categories) & region_models["model"].notna()
    ]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    X = design(pd.DataFrame([{p: float(target[p]) for p in params}]), params)
    table = rows[[REGION, KIND, CATEGORY]].reset_index(drop=True).copy()
    models = list(rows["model"])
    table["growth"] = [m.growth() for m in models]
    table["formula"] = [m.formula() for m in models]
    table["_key"] = [m.growth_key() for m in models]
    # Negative predictions (a model extrapolated below zero) count as no time, not as negative share.
    table[PREDICTED] = [max(float(np.asarray(m.predict(X)).reshape(-1)[0]), 0.0) for m in models]
    table["smape"] = [getattr(m, "smape", np.nan) for m in models]
    category_total = table.groupby(CATEGORY)[PREDICTED].transform("sum")
    table["share_of_category"] = np.divide(
        table[PREDICTED], category_total, out=np.zeros(len(table)), where=category_total.to_numpy() > 0
    )
    total = table[PREDICTED].sum()
    table["share_of_total"] = table[PREDICTED] / total if total > 0 else 0.0
    table = _sort_by_growth_then_share(table)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    table = table[columns]
    return table.head(top) if top else table


def _sort_by_growth_then_share(table: pd.DataFrame) -> pd.DataFrame:
    # growth_key() is sortable but need not be a scalar (e.g. a tuple); sort in Python for that reason.
    order = sorted(range(len(table)), key=lambda i: (table["_key"].iloc[i], table[PREDICTED].iloc[i]), reverse=True)
    return table.iloc[order].drop(columns="_key").reset_index(drop=True)
