"""What the GUI has open: the measured points and the region models, independent of Qt.

`open_source` reads a profiles folder, a saved experiment or an Extra-P text file through extradeep's
public API; `fit_region_models` models every region in chunks so the UI can show models as they come
and Cancel stops between chunks. Each region (region, kind, category, metric) gets an integer row id;
the points of a region are kept as NumPy arrays per row so a selection change draws without pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.errors import InputError

KEY = ["region", "kind", "category", "metric"]
GROUP_LABELS = {
    "step": "Step (wall time)",
    "computation": "Computation",
    "communication": "Communication",
    "memory": "Memory",
    "nvtx": "NVTX ranges",
    "cuda_api": "CUDA API",
    "mpi": "MPI",
    "os": "OS",
    "library": "Libraries (cuBLAS, cuDNN)",
    "other": "Regions",
}
GROUP_ORDER = list(GROUP_LABELS)
CHUNK = 200  # regions per modeling chunk: small enough for a responsive Cancel and early results


def group_of(category: str, kind: str) -> str:
    """Tree group of a region: MPI calls get their own group although they count as communication."""
    if kind == "mpi":
        return "mpi"
    return category if category in GROUP_LABELS else "other"


@dataclass
class RegionPoints:
    """Measured points of one region: parameter values (n, m), median value and spread."""

    X: np.ndarray
    value: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


@dataclass
class Workspace:
    """An opened input: its parameters, one row per region and metric, their points and models."""

    source: Path
    source_kind: str  # "profiles", "experiment" or "extrap"
    params: list[str]
    regions: pd.DataFrame  # index = row id; KEY columns, group, share, formula, growth, smape, reason
    points: dict[int, RegionPoints]
    steps: pd.DataFrame  # row, phase, params, rep, value: per-step values the models are fitted to
    experiment: object | None = None
    dataset: object | None = None  # extradeep.experiment.Dataset: models are per epoch when known
    fixed: dict = field(default_factory=dict)
    app_steps: pd.DataFrame | None = None  # quantity, phase, params, rep, value (application quantities)
    per: str = "step"
    notes: list[str] = field(default_factory=list)
    models: dict[int, object] = field(default_factory=dict)
    growth_keys: dict[int, object] = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        order = {"time": 0, "visits": 1, "bytes": 2}
        return sorted(self.regions["metric"].unique(), key=lambda m: (order.get(m, 9), m))

    def rows_for_metric(self, metric: str) -> pd.DataFrame:
        return self.regions[self.regions["metric"] == metric]

    def cutoff(self, n_eval: int) -> float:
        """Largest value of the first parameter used for modeling when `n_eval` values are held out."""
        return modeling_cutoff(self.param_values()[self.params[0]], n_eval)

    def param_values(self) -> dict[str, np.ndarray]:
        """Distinct measured values per parameter, over all regions."""
        return {name: np.unique(self.steps[name].to_numpy(float)) for name in self.params}


def open_source(report, path: str | Path) -> Workspace:
    """Read any supported input; raises InputError with one line when it is not one."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or folder")
    if path.is_dir():
        from extradeep.ingest import load_experiment

        report(0, 0, f"Reading profiles in {path.name}")
        exp = load_experiment([path], progress=_ingest_progress(report))
        return workspace_from_experiment(exp, path, "profiles")
    if path.suffix.lower() == ".txt":
        from extradeep.modeling.extrap_text import read_extrap_text

        report(0, 0, f"Reading Extra-P text {path.name}")
        table = read_extrap_text(path)
        params = list(table.attrs.get("params") or _params_of(table))
        return workspace_from_steps(table.assign(phase="train"), params, path, "extrap")
    from extradeep.experiment import Experiment

    report(0, 0, f"Opening experiment {path.name}")
    exp = Experiment.load(path)
    return workspace_from_experiment(exp, path, "experiment")


def _ingest_progress(report):
    def progress(done, total, path):
        report(done, total, f"Reading exports ({done}/{total}): {Path(str(path)).name}")

    return progress


def _params_of(table: pd.DataFrame) -> list[str]:
    known = set(KEY) | {"value", "rep", "phase", "callpath", "unit"}
    return [c for c in table.columns if c not in known and pd.api.types.is_numeric_dtype(table[c])]


def workspace_from_experiment(exp, path: Path, source_kind: str) -> Workspace:
    """Per-step values per phase exactly as `extradeep model` models them (extradeep.analysis)."""
    from extradeep.analysis.analyse import per_unit
    from extradeep.analysis.epoch import application_steps, dataset_notes, step_values
    from extradeep.experiment import TOTAL

    params = list(exp.params)
    steps = step_values(exp)
    ws = workspace_from_steps(steps[steps["kind"] != TOTAL], params, path, source_kind, experiment=exp,
                              dataset=exp.dataset, fixed=exp.fixed_params)
    ws.app_steps = application_steps(steps, params)
    ws.per = per_unit(exp.dataset)
    ws.notes = dataset_notes(exp, exp.dataset, steps) + list(exp.problems)
    return ws


def workspace_from_steps(steps: pd.DataFrame, params: list[str], path: Path, source_kind: str,
                         experiment=None, dataset=None, fixed: dict | None = None) -> Workspace:
    """Index a tidy per-step table (region keys, phase, params, rep, value) by region row."""
    if not params:
        raise InputError(path, "no numeric parameter columns to model against")
    if steps.empty:
        raise InputError(path, "no measured values")
    steps = steps.copy()
    for col, default in (("kind", ""), ("category", "other"), ("metric", "time"), ("rep", 0),
                         ("phase", "train")):
        if col not in steps.columns:
            steps[col] = default
    rows = steps[KEY].drop_duplicates().reset_index(drop=True)
    rows["group"] = [group_of(c, k) for c, k in zip(rows["category"], rows["kind"])]
    row_of = pd.Series(rows.index, index=pd.MultiIndex.from_frame(rows[KEY]))
    steps["row"] = row_of.reindex(pd.MultiIndex.from_frame(steps[KEY])).to_numpy()
    steps = steps[["row", "phase", *params, "rep", "value"]].sort_values(["row", *params]).reset_index(drop=True)
    fixed = dict(fixed or {})
    per_row = points_per_row(epoch_values(steps, "row", params, dataset, fixed), "row", params)
    rows["share"] = _shares(rows, per_row)
    rows["n_points"] = [len(per_row[r].value) if r in per_row else 0 for r in rows.index]
    for col, empty in (("formula", ""), ("growth", ""), ("growth_rank", np.nan), ("smape", np.nan),
                       ("reason", "not modeled yet")):
        rows[col] = empty
    return Workspace(path, source_kind, list(params), rows, per_row, steps, experiment, dataset, fixed)


def epoch_values(steps: pd.DataFrame, key: str, params: list[str], dataset, fixed: dict) -> pd.DataFrame:
    """Values per epoch (Eq. 4) with dataset sizes, else per training step, per point and repetition."""
    from extradeep.analysis.epoch import per_epoch

    return per_epoch(steps, [key], params, dataset, fixed)


def points_per_row(values: pd.DataFrame, key: str, params: list[str]) -> dict:
    """Median over repetitions and min/max spread per point, as arrays per `key` value."""
    from extradeep.analysis.epoch import point_summary

    points = point_summary(values, [key], params).sort_values([key, *params])
    X = points[params].to_numpy(float)
    v, lo, hi = (points[c].to_numpy(float) for c in ("value", "rep_min", "rep_max"))
    return {k: RegionPoints(X[i], v[i], lo[i], hi[i]) for k, i in points.groupby(key, sort=False).indices.items()}


def _shares(rows: pd.DataFrame, per_row: dict[int, RegionPoints]) -> np.ndarray:
    """Share of each region in its group and metric, at the largest measured point."""
    last = np.array([per_row[r].value[-1] if r in per_row else 0.0 for r in rows.index])
    totals = pd.Series(last).groupby([rows["group"].to_numpy(), rows["metric"].to_numpy()]).transform("sum")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals.to_numpy() > 0, last / totals.to_numpy(), np.nan)


def modeling_cutoff(values: np.ndarray, n_eval: int) -> float:
    """Largest of `values` left when the `n_eval` largest distinct ones are held out (inf: none)."""
    firsts = np.unique(values)
    if n_eval <= 0 or n_eval >= len(firsts):
        return np.inf
    return float(firsts[-n_eval - 1])


def fit_region_models(report, ws: Workspace, options: dict, n_eval: int = 0, metric_first: str = "time",
                      first_rows: list[int] | None = None) -> dict[int, dict]:
    """Model every region as `extradeep model` does, a chunk at a time; partial results go to `report`.

    Regions of `metric_first` (and `first_rows`) come first so the visible tree fills in first.
    Returns {row: {"model", "formula", "growth", "growth_key", "smape", "reason"}}.
    """
    order = _fit_order(ws.regions, metric_first, first_rows or [])
    cutoff = ws.cutoff(n_eval)
    by_row = ws.steps.groupby("row", sort=False).indices
    results: dict[int, dict] = {}
    for start in range(0, len(order), CHUNK):
        chunk = order[start:start + CHUNK]
        idx = [by_row[r] for r in chunk if r in by_row]
        table = ws.steps.iloc[np.concatenate(idx)] if idx else ws.steps.iloc[:0]
        part = fit_table(ws, table, "row", options, cutoff)
        for row in chunk:
            part.setdefault(row, _model_fields({"reason": "no points"}))
        results.update(part)
        report(len(results), len(order), f"Modeling regions ({len(results)}/{len(order)})", partial=part)
    return results


def fit_table(ws: Workspace, steps: pd.DataFrame, key: str, options: dict, cutoff: float) -> dict:
    """Per-phase step models combined into epoch models (extradeep.analysis.analyse.fit_phase_models),
    from points up to `cutoff` of the first parameter; {key value: model fields}."""
    from extradeep.analysis.analyse import fit_phase_models

    steps = steps[steps[ws.params[0]].to_numpy(float) <= cutoff]
    if steps.empty:
        return {}
    fitted = fit_phase_models(steps, [key], ws.params, ws.dataset, ws.fixed, options)
    return {r[key]: _model_fields(r) for r in fitted.to_dict("records")}


def _fit_order(rows: pd.DataFrame, metric_first: str, first_rows: list[int]) -> list[int]:
    rank = np.where(rows["metric"].to_numpy() == metric_first, 1, 2)
    order = rows.index.to_numpy()[np.argsort(rank, kind="stable")].tolist()
    first = [r for r in first_rows if r in rows.index]
    seen = set(first)
    return first + [r for r in order if r not in seen]


def _model_fields(record: dict) -> dict:
    model = record.get("model")
    if model is None or (isinstance(model, float) and np.isnan(model)):
        return {"model": None, "formula": "", "growth": "", "growth_key": None, "smape": np.nan,
                "reason": record.get("reason") or "no model"}
    return {"model": model, "formula": model.formula(), "growth": model.growth(),
            "growth_key": model.growth_key(), "smape": float(model.smape), "reason": ""}


def apply_models(ws: Workspace, results: dict[int, dict]) -> list[int]:
    """Store fitted models in the workspace; returns the rows that changed."""
    rows = [r for r in results if r in ws.regions.index]
    if not rows:
        return []
    for col in ("formula", "growth", "smape", "reason"):
        ws.regions.loc[rows, col] = [results[r][col] for r in rows]
    for r in rows:
        ws.models[r] = results[r]["model"]
    _rank_growth(ws, {r: results[r]["growth_key"] for r in rows})
    return rows


def _rank_growth(ws: Workspace, keys: dict[int, object]) -> None:
    """Turn growth keys (comparable, maybe tuples) into one float column Qt can sort on."""
    store = ws.growth_keys
    store.update({r: k for r, k in keys.items() if k is not None})
    for r, k in keys.items():
        if k is None:
            store.pop(r, None)
    distinct = sorted(set(store.values()))
    rank = {k: float(i) for i, k in enumerate(distinct)}
    ws.regions["growth_rank"] = np.nan
    if store:
        idx = list(store)
        ws.regions.loc[idx, "growth_rank"] = [rank[store[r]] for r in idx]
