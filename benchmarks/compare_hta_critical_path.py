"""extradeep's critical path against HolisticTraceAnalysis's on the real Kineto traces (a dev check,
not a test: HTA is not a dependency of extradeep).

For every real trace in ../shared/real_kineto (env EXTRADEEP_REAL_KINETO) with GPU work, and each
`ProfilerStep` instance that HTA's parser keeps (the whole trace where there is none), it prints
extradeep's breakdown of the step (`predict(..., settings={"warmup_steps": 0})`, so that the first
step is analysed too) and HTA's `critical_path_analysis` of the same instance: HTA's path length,
its `bound_by` seconds and, for both, the outermost range (user annotation or operator) that owns
the most path time (for HTA: the range around each edge's event, or around a kernel's launch; an
autograd-thread event inside the main thread's annotation belongs to that annotation).

HTA 0.5 (PyPI) needs pandas < 3; run it in a separate environment:
    python -m venv /tmp/hta && /tmp/hta/bin/pip install "pandas<3" HolisticTraceAnalysis scipy matplotlib \
        sqlite-utils orjson
    PYTHONPATH=. /tmp/hta/bin/python benchmarks/compare_hta_critical_path.py
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.errors import InputError
from extradeep.predictor import predict
from extradeep.predictor.owners import path_owners

REPO = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("EXTRADEEP_REAL_KINETO", REPO.parent / "shared" / "real_kineto"))
GPU_BOUND = ("gpu_compute_bound", "gpu_communication_bound")


def ours(path: Path) -> dict:
    """Per ProfilerStep number (None: the whole trace): span, class seconds and the top owner."""
    from extradeep.predictor.trace import load_trace

    settings = {"warmup_steps": 0}
    pred = predict([path], settings=settings)
    ranges = load_trace([path], jobs=1, settings=settings).ranges
    number = pred.steps.drop_duplicates("step_id").set_index("step_id")["step"]
    out = {}
    for step_id, row in pred.breakdown.set_index("step_id").iterrows():
        pieces = path_owners(pred.graph, pred.critical_path[pred.critical_path["step_id"] == step_id], ranges)
        top = pieces.assign(owner=pieces["chain"].str[0]).groupby("owner")["seconds"].sum().sort_values()
        out[int(number[step_id]) if step_id >= 0 else None] = {
            "span": row["span"],
            "gpu": row["compute"] + row["communication"] + row["memory"],
            "cpu": row["cpu_overhead"],
            "idle": row["idle"],
            "top": (top.index[-1], top.iloc[-1] / row["span"]) if len(top) else ("-", 0.0),
        }
    return out


def hta(path: Path) -> dict:
    """HTA's critical path per ProfilerStep instance (or the whole trace): start (us) -> figures."""
    from hta.trace_analysis import TraceAnalysis

    folder = tempfile.mkdtemp()
    os.symlink(path, os.path.join(folder, path.name))
    ta = TraceAnalysis(trace_dir=folder)
    rank = next(iter(ta.t.traces))
    df = ta.t.get_trace(rank)
    names = ta.t.symbol_table.sym_table
    ids = {v for k, v in ta.t.symbol_table.get_sym_id_map().items() if k.startswith("ProfilerStep#")}
    steps = df[df["name"].isin(ids)].sort_values("ts")
    windows = [(i, int(names[int(r.name)].split("#")[1]), r.dur) for i, r in enumerate(steps.itertuples())]
    out = {}
    for instance, number, dur in windows or [(0, None, None)]:
        annotation = "ProfilerStep" if number is not None else ""
        graph, ok = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
        if not ok:
            continue
        edges = graph.get_critical_path_breakdown()
        bound = edges.groupby("bound_by")["duration"].sum()
        owner = _hta_owners(df, names, edges)
        total = float(edges["duration"].sum())
        out[number] = {
            "path": total,
            "window": dur,
            "cpu": float(bound.get("cpu_bound", 0.0)),
            "gpu": float(sum(bound.get(k, 0.0) for k in GPU_BOUND)),
            "comm": float(bound.get("gpu_communication_bound", 0.0)),
            "gaps": float(bound.get("gpu_kernel_kernel_overhead", 0.0)),
            "top": (owner.index[-1], owner.iloc[-1] / total) if len(owner) and total else ("-", 0.0),
        }
    return out


def _hta_owners(df: pd.DataFrame, names, edges: pd.DataFrame) -> pd.Series:
    """HTA path seconds per outermost CPU range around each edge's event (a kernel: its launch)."""
    ev = df.set_index("index")
    idx = edges["event_idx"].dropna().astype(int)
    rows = ev.loc[idx]
    launch = rows["index_correlation"].where(rows["stream"] >= 0, rows.index.to_series().to_numpy())
    anchor = ev.loc[launch.astype(int)]
    t, tid = anchor["ts"].to_numpy(), anchor["tid"].to_numpy()
    cpu = df[(df["stream"] < 0) & df["cat"].map(lambda c: names[int(c)] in ("cpu_op", "user_annotation"))]
    cpu = cpu[~cpu["name"].map(lambda n: names[int(n)].startswith("ProfilerStep#"))]
    owner = np.full(len(t), "-", dtype=object)
    for k, (when, thread) in enumerate(zip(t, tid)):
        around = cpu[(cpu["ts"] <= when) & (cpu["ts"] + cpu["dur"] > when)]
        mine = around[around["tid"] == thread]
        pick = around if len(around) else mine
        if len(pick):
            owner[k] = names[int(pick.sort_values("ts").iloc[0]["name"])]
    return pd.Series(edges.loc[idx.index, "duration"].to_numpy(), index=owner).groupby(level=0).sum().sort_values()


def main() -> None:
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(
        "| trace | steps | extradeep: span, GPU / CPU / idle, top owner | HTA: path / window, GPU / CPU / kernel gaps, top owner |"
    )
    print("|---|---|---|---|")
    for path in sorted(REAL.glob("*.json.gz")):
        try:
            mine = ours(path)
        except InputError as exc:
            print(f"| {path.name} | - | {exc.problem[:50]} | - |")
            continue
        try:
            theirs = hta(path)
        except Exception as exc:  # HTA's own failures are reported, not fatal
            theirs, error = {}, f"HTA failed: {type(exc).__name__}: {str(exc)[:60]}"
        else:
            error = ""
        keys = [k for k in mine if k in theirs]
        print(_row(path.name.removeprefix("HTA__")[:40], mine, theirs, keys, error))


def _row(label, mine, theirs, keys, error) -> str:
    if not keys:
        return f"| {label} | 0 matched | - | {error or 'no common step'} |"
    m = pd.DataFrame([mine[k] for k in keys])
    h = pd.DataFrame([theirs[k] for k in keys])
    span, path = m["span"].sum(), h["path"].sum()
    window = h["window"].sum() if h["window"].notna().all() else float("nan")
    ours_text = (
        f"{span:.4f} s, {100 * m['gpu'].sum() / span:.0f} / {100 * m['cpu'].sum() / span:.0f} / "
        f"{100 * m['idle'].sum() / span:.0f} %, {_top(m)}"
    )
    hta_text = (
        f"{path / 1e6:.4f} / {window / 1e6:.4f} s, {100 * h['gpu'].sum() / path:.0f} / {100 * h['cpu'].sum() / path:.0f} / "
        f"{100 * h['gaps'].sum() / path:.0f} %, {_top(h)}"
    )
    return f"| {label} | {len(keys)} | {ours_text} | {hta_text} |"


def _top(frame: pd.DataFrame) -> str:
    name, share = max(frame["top"], key=lambda t: t[1])
    return f"{str(name)[:40]} ({100 * share:.0f} %)"


if __name__ == "__main__":
    main()
