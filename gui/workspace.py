"""What the GUI has open: the regions, their measured points and models, independent of Qt.

`open_source` reads a profiles folder, a saved experiment or an Extra-P text file through extradeep's
public API and lists the regions straight away. `fit_region_models` then works a chunk of regions at
a time, with the functions `extradeep model` uses (`region_step_values`, `fit_region_models`: epoch models
from the step counts), so the selected region is drawn first and Cancel stops between chunks. Each
region (region, kind, category, metric) has an integer row id; its points are NumPy arrays per row so
a selection change draws without pandas.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.columns import CATEGORY, KIND, METRIC, PHASE, REGION, REGION_GROUP, REP, VALUE
from extradeep.errors import InputError
from extradeep.io.config import CONFIG_NAME

KEY = ["region", "kind", "category", "metric"]
GROUP_LABELS = {
    "step": "Step (wall time, GPU busy)",
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
CHUNK = 250  # regions per modeling chunk: small enough for a responsive Cancel and early results
UI_SETTLE_S = 1.0  # longest wait for the UI to lay out a new input before the first chunk
TOTAL_KIND = "total"  # category sums (extradeep.aggregate.experiment.TOTAL) are application quantities, not regions


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
    """An opened input: its parameters, one row per region and metric, their points and models.

    `steps_for(rows)` gives the per-step values (row, phase, params, rep, value) of some regions, the
    input of modeling; `points` and `models` fill in as chunks are modeled.
    """

    source: Path
    source_kind: str  # "profiles", "experiment" or "extrap"
    params: list[str]
    regions: pd.DataFrame  # index = row id; KEY columns, group, share, formula, growth, smape, reason
    param_grid: dict[str, np.ndarray]  # distinct measured values per parameter
    steps_for: Callable[[list[int]], pd.DataFrame]
    experiment: object | None = None
    dataset: object | None = None  # extradeep.aggregate.experiment.Dataset: models are per epoch when known
    fixed: dict = field(default_factory=dict)
    per: str = "step"
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # skipped files and other input problems, one line each
    points: dict[int, RegionPoints] = field(default_factory=dict)
    models: dict[int, object] = field(default_factory=dict)
    growth_keys: dict[int, object] = field(default_factory=dict)
    # the input's own modeler options (a folder's extradeep.toml, a saved experiment's), modeled with first
    options: dict = field(default_factory=dict)
    # (open_source, path, dataset, token of this opening): how the modeling process opens it again
    reopen: tuple | None = None

    @property
    def metrics(self) -> list[str]:
        order = {"time": 0, "visits": 1, "bytes": 2}
        return sorted(self.regions[METRIC].unique(), key=lambda m: (order.get(m, 9), m))

    def rows_for_metric(self, metric: str) -> pd.DataFrame:
        return self.regions[self.regions[METRIC] == metric]

    def cutoff(self, n_eval: int) -> float:
        """Largest value of the first parameter used for modeling when `n_eval` values are held out."""
        return modeling_cutoff(self.param_grid[self.params[0]], n_eval)


def open_source(report, path: str | Path, dataset=None) -> Workspace:
    """Read any supported input; raises InputError with one line when it is not one. `dataset`
    (extradeep.aggregate.experiment.Dataset) makes values per epoch, as the CLI's dataset options do."""
    ws = _open_source(report, Path(path), dataset)
    ws.reopen = (open_source, Path(path), dataset, uuid.uuid4().hex)  # a new token: the file may have changed since
    return ws


def _open_source(report, path: Path, dataset) -> Workspace:
    if not path.exists():
        raise InputError(path, "no such file or folder")
    if path.is_dir():
        return _open_folder(report, path, dataset)
    from extradeep.io.formats import KINETO, format_by_name

    if format_by_name(path) == KINETO:  # one PyTorch profiler trace, read as a folder holding it
        return _open_folder(report, path, dataset)
    if path.suffix.lower() == ".txt":
        from extradeep.modeling.extrap_text import read_extrap_text

        report(0, 0, f"Reading Extra-P text {path.name}")
        table = read_extrap_text(path)
        params = list(table.attrs.get("params") or _params_of(table))
        return workspace_from_steps(table.assign(phase="train"), params, path, "extrap")
    from extradeep.aggregate.experiment import Experiment

    report(0, 0, f"Opening experiment {path.name}")
    exp = Experiment.load(path)
    if dataset is not None:
        from extradeep.aggregate.experiment import dataset_dict

        exp.settings.dataset = dataset_dict(dataset)
    ws = workspace_from_experiment(exp, path, "experiment")
    from extradeep.analysis.saved import effective_options

    ws.options = effective_options(exp)  # what `extradeep model --save` was given (--min-points 4, ...)
    return ws


def _open_folder(report, path: Path, dataset) -> Workspace:
    """Read a profiles folder (or one trace file, with its folder's settings) exactly as
    `extradeep model PATH` does: with the settings of the folder's `extradeep.toml` (dataset sizes,
    step patterns, ...); `dataset`, when given, replaces its sizes."""
    import extradeep

    try:  # the same options object the CLI fills, from the folder's settings file
        options = extradeep.Options.resolve(folder=path if path.is_dir() else path.parent)
    except InputError as exc:  # a bad value the file did not set (a file's own values name it and its key)
        raise InputError(path / CONFIG_NAME, str(exc)) if exc.source is None else exc from None
    arguments = options.load_arguments()
    if dataset is not None:
        arguments["dataset"] = dataset
    report(0, 0, f"Reading profiles in {path.name}")
    exp = extradeep.load_experiment([path], progress=_ingest_progress(report), **arguments)
    ws = workspace_from_experiment(exp, path, "profiles")
    ws.options = {"min_points": int(options.min_points)}
    if ((path if path.is_dir() else path.parent) / CONFIG_NAME).is_file():
        ws.notes.insert(
            0,
            f"settings from {CONFIG_NAME}"
            + (" (dataset sizes from the Dataset dialog)" if dataset is not None else ""),
        )
    return ws


def _ingest_progress(report):
    def progress(done, total, path):
        report(done, total, f"Reading exports ({done}/{total}): {Path(str(path)).name}")

    return progress


def _params_of(table: pd.DataFrame) -> list[str]:
    known = set(KEY) | {"value", "rep", "phase", "callpath", "unit"}
    return [c for c in table.columns if c not in known and pd.api.types.is_numeric_dtype(table[c])]


def workspace_from_experiment(exp, path: Path, source_kind: str) -> Workspace:
    """List the experiment's regions now; their step values are made per chunk by `steps_for`."""
    from extradeep.analysis.core import per_unit

    params = list(exp.params)
    if not params:
        raise InputError(path, "the experiment has no modeled parameters")
    # Regions measured in training or validation steps, as `extradeep model` models them (work between
    # steps is reported by the reader but is not part of a step).
    points = exp.points[(exp.points[KIND] != TOTAL_KIND) & exp.points[PHASE].isin(["train", "val"])]
    rows = _region_rows(points, path)
    index = pd.MultiIndex.from_frame(rows[KEY])

    def steps_for(wanted: list[int]) -> pd.DataFrame:
        """Per-step values of some regions: extradeep.analysis.core.region_step_values of the sub-experiment."""
        from extradeep.analysis.fitting import region_step_values

        chosen = rows.loc[wanted]

        def subset(frame):
            return frame[frame[REGION].isin(chosen[REGION]) & frame[METRIC].isin(chosen[METRIC])]

        steps = region_step_values(replace(exp, values=subset(exp.values), points=subset(exp.points)))
        steps = steps.assign(row=_row_ids(index, steps))
        steps = steps[np.isin(steps["row"].to_numpy(), wanted)]
        return steps[["row", PHASE, *params, REP, VALUE]]

    train = points[points[PHASE] == "train"] if (points[PHASE] == "train").any() else points
    rows["share"] = _shares(rows, train.assign(row=_row_ids(index, train)), params)
    grid = {p: np.unique(exp.points[p].to_numpy(float)) for p in params}
    notes = [] if exp.dataset is not None else ["no dataset sizes: values are per training step"]
    notes += list(exp.settings.notes)
    return Workspace(
        path,
        source_kind,
        params,
        rows,
        grid,
        steps_for,
        exp,
        exp.dataset,
        exp.fixed_params,
        per_unit(exp.dataset),
        notes,
        list(exp.problems),
    )


def workspace_from_steps(steps: pd.DataFrame, params: list[str], path: Path, source_kind: str) -> Workspace:
    """A workspace over a tidy per-step table (region keys, phase, params, rep, value), e.g. Extra-P text."""
    if not params:
        raise InputError(path, "no numeric parameter columns to model against")
    steps = steps.copy()
    for col, default in (("kind", ""), ("category", "other"), ("metric", "time"), ("rep", 0), ("phase", "train")):
        if col not in steps.columns:
            steps[col] = default
    rows = _region_rows(steps, path)
    steps["row"] = _row_ids(pd.MultiIndex.from_frame(rows[KEY]), steps)
    steps = steps[["row", PHASE, *params, REP, VALUE]].sort_values(["row", *params]).reset_index(drop=True)
    rows["share"] = _shares(rows, steps, params)
    by_row = steps.groupby("row", sort=False).indices

    def steps_for(wanted: list[int]) -> pd.DataFrame:
        idx = [by_row[r] for r in wanted if r in by_row]
        return steps.iloc[np.concatenate(idx)] if idx else steps.iloc[:0]

    grid = {p: np.unique(steps[p].to_numpy(float)) for p in params}
    return Workspace(path, source_kind, list(params), rows, grid, steps_for)


def _region_rows(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    if frame.empty:
        raise InputError(path, "no measured values")
    rows = frame[KEY].drop_duplicates().reset_index(drop=True)
    rows[REGION_GROUP] = [group_of(c, k) for c, k in zip(rows[CATEGORY], rows[KIND])]
    for col, empty in (
        ("formula", ""),
        ("growth", ""),
        ("growth_rank", np.nan),
        ("smape", np.nan),
        ("reason", "not modeled yet"),
        ("n_points", 0),
    ):
        rows[col] = empty
    return rows


def _row_ids(index: pd.MultiIndex, frame: pd.DataFrame) -> np.ndarray:
    """Row id of each line of `frame` in the region `index` (-1 for regions not in it)."""
    return index.get_indexer(pd.MultiIndex.from_frame(frame[KEY]))


def _shares(rows: pd.DataFrame, frame: pd.DataFrame, params: list[str]) -> np.ndarray:
    """Share of each region in its group and metric at the largest measured point (median value)."""
    last = frame.sort_values(params).groupby(["row", *params], sort=False)[VALUE].median()
    last = last.groupby(level="row").last().reindex(rows.index).fillna(0.0).to_numpy()
    totals = pd.Series(last).groupby([rows[REGION_GROUP].to_numpy(), rows[METRIC].to_numpy()]).transform("sum")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals.to_numpy() > 0, last / totals.to_numpy(), np.nan)


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


def modeling_cutoff(values: np.ndarray, n_eval: int) -> float:
    """Largest of `values` left when the `n_eval` largest distinct ones are held out (inf: none)."""
    firsts = np.unique(values)
    if n_eval <= 0 or n_eval >= len(firsts):
        return np.inf
    return float(firsts[-n_eval - 1])


def fit_region_models(
    report,
    ws: Workspace,
    options: dict,
    n_eval: int = 0,
    metric_first: str = "time",
    first_rows: list[int] | None = None,
    ui_settled=None,
) -> int:
    """Model every region as `extradeep model` does, a chunk at a time; each chunk's points and
    models go to `report` as partial results {"points": {row: RegionPoints}, "models": {row: fields}}.

    `first_rows` form a chunk of their own so they draw at once; then regions of `metric_first`.
    That chunk is modeled here, after `ui_settled` (a threading.Event) is set, if given: its pandas
    work would otherwise make the UI thread wait for the GIL while it lays out a new region tree.
    Returns the number of regions modeled.
    """
    if ui_settled is not None:
        ui_settled.wait(UI_SETTLE_S)
    first = [r for r in (first_rows or []) if r in ws.regions.index]
    rest = _fit_order(ws.regions, metric_first, first)
    chunks = ([first] if first else []) + [rest[i : i + CHUNK] for i in range(0, len(rest), CHUNK)]
    cutoff = ws.cutoff(n_eval)
    done = 0
    for chunk in chunks:
        # The first chunk, a few selected regions, is modeled here at once: it does not wait for the
        # modeling process to finish opening the input, and it is too small to stall the UI.
        if ws.reopen is not None and not (first and chunk is chunks[0]):
            from extradeep.gui.modeling_process import run_remote

            part = run_remote(ws, model_chunk, chunk, options, cutoff)
        else:
            part = model_chunk(ws, chunk, options, cutoff)
        done += len(chunk)
        report(
            done,
            len(ws.regions),
            f"Modeling regions ({done}/{len(ws.regions)})",
            partial=part,
            wait_for_ui=chunk is chunks[0],
        )
    return done


PRIMARY_PENDING = "the time per epoch from one model: fitted with the application quantities, shown when done"


def primary_rows(ws: Workspace) -> list[int]:
    """The row of the measured step time: it shows the primary time model of the application
    quantities (extradeep.analysis.primary), not a region fit of its own, so every view gives one answer."""
    if ws.experiment is None:
        return []
    keys = ws.regions
    rows = (keys[REGION] == "step") & (keys[KIND] == "step") & (keys[METRIC] == "time")
    return [int(r) for r in keys.index[rows.to_numpy()]]


def model_chunk(ws: Workspace, chunk: list[int], options: dict, cutoff: float) -> dict:
    """Points and models of some regions: {"points": {row: RegionPoints}, "models": {row: fields}}."""
    steps = ws.steps_for(chunk)
    values = epoch_values(steps, "row", ws.params, ws.dataset, ws.fixed)
    primary = set(primary_rows(ws))
    fitted = fit_table(ws, steps[~steps["row"].isin(primary)], "row", options, cutoff)
    models = {row: fitted.get(row) or _model_fields({"reason": "no points"}) for row in chunk}
    models.update({row: _model_fields({"reason": PRIMARY_PENDING}) for row in primary & set(chunk)})
    return {"points": points_per_row(values, "row", ws.params), "models": models}


def apply_primary(ws: Workspace, model) -> list[int]:
    """Give the measured step time's row the primary time model; returns the rows that changed."""
    rows = primary_rows(ws)
    if model is None or not rows:
        return []
    return apply_models(ws, {"points": {}, "models": {row: _model_fields({"model": model}) for row in rows}})


def fit_table(ws: Workspace, steps: pd.DataFrame, key: str, options: dict, cutoff: float) -> dict:
    """The region models of `analyse` (extradeep.analysis.core.fit_region_models: per-phase step models
    combined into epoch models) from points up to `cutoff` of the first parameter; {key value: model fields}."""
    from extradeep.analysis.fitting import fit_region_models

    fitted = fit_region_models(steps, ws.params, ws.dataset, ws.fixed, options, upto=cutoff, keys=[key])
    return {r[key]: _model_fields(r) for r in fitted.to_dict("records")}


def _fit_order(rows: pd.DataFrame, metric_first: str, first: list[int]) -> list[int]:
    rank = np.where(rows[METRIC].to_numpy() == metric_first, 1, 2)
    order = rows.index.to_numpy()[np.argsort(rank, kind="stable")].tolist()
    seen = set(first)
    return [r for r in order if r not in seen]


def _model_fields(record: dict) -> dict:
    model = record.get("model")
    if model is None or (isinstance(model, float) and np.isnan(model)):
        return {
            "model": None,
            "formula": "",
            "growth": "",
            "growth_key": None,
            "smape": np.nan,
            "reason": record.get("reason") or "no model",
        }
    return {
        "model": model,
        "formula": model.formula(),
        "growth": model.growth(),
        "growth_key": model.growth_key(),
        "smape": float(model.smape),
        "reason": "",
    }


def apply_models(ws: Workspace, part: dict) -> list[int]:
    """Store a chunk's points and models in the workspace; returns the rows that changed.
    (Call `rank_growth` once all chunks are in: ranking after every chunk would be quadratic.)"""
    ws.points.update(part["points"])
    results = part["models"]
    rows = [r for r in results if r in ws.regions.index]
    if not rows:
        return []
    for col in ("formula", "growth", "smape", "reason"):
        ws.regions.loc[rows, col] = [results[r][col] for r in rows]
    ws.regions.loc[rows, "n_points"] = [len(ws.points[r].value) if r in ws.points else 0 for r in rows]
    for r in rows:
        ws.models[r] = results[r]["model"]
        ws.growth_keys[r] = results[r]["growth_key"]
    return rows


def rank_growth(ws: Workspace) -> None:
    """Turn growth keys (comparable, maybe tuples) into one float column to sort on (NaN: no model)."""
    known = {r: k for r, k in ws.growth_keys.items() if k is not None}
    rank = {k: float(i) for i, k in enumerate(sorted(set(known.values())))}
    ws.regions["growth_rank"] = np.nan
    if known:
        ws.regions.loc[list(known), "growth_rank"] = [rank[k] for k in known.values()]
