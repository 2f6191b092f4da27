"""Aggregate per-step sums into per-point values (paper section 2.2, Eq. 1 and the text after it).

The reader gives one value per (region, metric, epoch, phase, step) and file (Eq. 1, the sum per
step). Here: median over the steps of each rank and repetition, median over ranks, median over
repetitions, keeping the spread over ranks and over repetitions. A step (or rank, or repetition) in
which a region never ran counts as 0 for that region: the sum over no events is 0, and leaving it out
would inflate rare regions when they are extrapolated to whole epochs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import EPOCH, FILE, PHASE, RANK, REGION_KEYS, REP, STEP, VALUE

SPREAD = ("min", "q1", "q3", "max")


def aggregate(step_sums: pd.DataFrame, point_cols: list[str], min_points: int = 5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Step sums of many files -> (values per repetition, points), as in the Experiment contract.

    `step_sums` has the read_export columns plus `file` (any id unique per export), `rank`, `rep` and
    the point columns. Returns the `values` and `points` tables of `extradeep.aggregate.experiment.Experiment`.
    """
    step_sums, text = _coded(step_sums)
    per_rank = rank_medians(step_sums, point_cols)
    per_rank = fill_absent(per_rank, _file_phases(step_sums, point_cols), REGION_KEYS + point_cols)
    values = rank_spread(per_rank, point_cols)
    points = rep_spread(values, per_rank, point_cols)
    points["modelable"] = point_counts(points) >= min_points
    return _as_text(values, text), _as_text(points, text)


def _coded(step_sums: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The text keys as Categoricals with their values in sorted order (sorting and grouping then work
    on integer codes, in the order the text would sort), and each key's dtype to restore."""
    text = {c: step_sums[c].dtype for c in REGION_KEYS if not isinstance(step_sums[c].dtype, pd.CategoricalDtype)}
    coded = step_sums.assign(
        **{c: pd.Categorical(step_sums[c], categories=np.sort(step_sums[c].unique())) for c in text}
    )
    coded.attrs = {}  # the per-file notes stay with the files; copying them at every step costs
    return coded, text


def _as_text(frame: pd.DataFrame, text: dict) -> pd.DataFrame:
    return frame.assign(**{c: frame[c].astype(dtype) for c, dtype in text.items() if c in frame})


def rank_medians(step_sums: pd.DataFrame, point_cols: list[str]) -> pd.DataFrame:
    """Median over the steps of each file (one rank of one repetition), absent steps counting as 0."""
    steps_per_file = (
        step_sums[[FILE, PHASE, EPOCH, STEP]].drop_duplicates().groupby([FILE, PHASE], observed=True).size()
    )
    keys = ["file", *REGION_KEYS]
    frame = step_sums.sort_values(keys + [VALUE], kind="stable")
    groups = frame.groupby(keys, sort=False, dropna=False, observed=True)
    first = groups.head(1).drop(columns=[VALUE, EPOCH, STEP]).reset_index(drop=True)
    counts = groups.size().to_numpy()
    expected = steps_per_file.reindex(pd.MultiIndex.from_frame(first[[FILE, PHASE]])).to_numpy()
    first[VALUE] = padded_median(frame[VALUE].to_numpy(dtype=float), counts, expected)
    first["n_steps"] = expected.astype("int64")
    return first[keys + ["rank", "rep", *point_cols, "n_steps", "value"]]


def padded_median(sorted_values: np.ndarray, counts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Median of each group of `sorted_values` (sorted within consecutive groups of `counts`) after
    padding the group with zeros up to `totals` elements. Vectorised over all groups."""
    counts = np.asarray(counts, dtype=np.int64)
    totals = np.maximum(np.asarray(totals, dtype=np.int64), counts)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    negatives = np.add.reduceat(sorted_values < 0, starts) if len(counts) else counts
    zeros = totals - counts

    def at(k):
        idx = np.where(k < negatives, k, k - zeros)
        in_zeros = (k >= negatives) & (k < negatives + zeros)
        picked = sorted_values[np.clip(starts + idx, 0, max(len(sorted_values) - 1, 0))] if len(sorted_values) else idx
        return np.where(in_zeros, 0.0, picked)

    return (at((totals - 1) // 2) + at(totals // 2)) / 2.0


def _file_phases(step_sums: pd.DataFrame, point_cols: list[str]) -> pd.DataFrame:
    """Which files observed which phase, with their point and repetition: the grid for zero-filling."""
    return step_sums[[FILE, RANK, REP, *point_cols, PHASE]].drop_duplicates().reset_index(drop=True)


def fill_absent(frame: pd.DataFrame, files: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Add value 0 rows for the files of a point (any repetition) that observed a region's phase but
    never ran the region, so that medians over ranks and repetitions see them."""
    shared = [c for c in files.columns if c in keys]
    grid = frame[keys].drop_duplicates().merge(files, on=shared, how="inner")
    full = grid.merge(frame, on=list(grid.columns), how="left")
    absent = full[VALUE].isna()
    full.loc[absent, VALUE] = 0.0
    # An absent region still had the file's steps behind its 0.
    steps = frame.groupby([FILE, PHASE], observed=True)["n_steps"].max()
    fill = steps.reindex(pd.MultiIndex.from_frame(full.loc[absent, ["file", "phase"]])).to_numpy()
    full.loc[absent, "n_steps"] = fill
    full["n_steps"] = full["n_steps"].fillna(0).astype("int64")
    return full


def _spread(groups, prefix: str) -> pd.DataFrame:
    value = groups[VALUE]
    quart = value.quantile([0.25, 0.75]).unstack()
    out = pd.DataFrame(
        {
            VALUE: value.median(),
            f"{prefix}_min": value.min(),
            f"{prefix}_q1": quart[0.25],
            f"{prefix}_q3": quart[0.75],
            f"{prefix}_max": value.max(),
        }
    )
    return out


def rank_spread(per_rank: pd.DataFrame, point_cols: list[str]) -> pd.DataFrame:
    """Median over ranks per repetition, with the spread over ranks, n_ranks and n_steps."""
    keys = REGION_KEYS + point_cols + [REP]
    groups = per_rank.groupby(keys, sort=True, dropna=False, observed=True)
    out = _spread(groups, "rank")
    out["n_ranks"] = groups.size()
    out["n_steps"] = groups["n_steps"].min()
    return out.reset_index()


def rep_spread(values: pd.DataFrame, per_rank: pd.DataFrame, point_cols: list[str]) -> pd.DataFrame:
    """Median over repetitions with the spread over repetitions and the pooled spread over ranks."""
    keys = REGION_KEYS + point_cols
    groups = values.groupby(keys, sort=True, dropna=False, observed=True)
    out = _spread(groups, "rep")
    out["n_reps"] = groups.size()
    pooled = _spread(per_rank.groupby(keys, sort=True, dropna=False, observed=True), "rank").drop(columns=VALUE)
    return out.join(pooled).reset_index()


def point_counts(points: pd.DataFrame) -> pd.Series:
    """For each row, at how many configuration points its region/metric/phase was measured."""
    return points.groupby(REGION_KEYS, dropna=False, observed=True)[VALUE].transform("size")
