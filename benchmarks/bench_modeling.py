"""Benchmark the PMNF modeler against Extra-P 4.2.5 on Extra-P text inputs with known truth.

Generates inputs (1 parameter: 5 points x 5 repetitions; 2 parameters: 5 x 5 points x 5
repetitions; truth classes constant, log p, p, p log p, sqrt p, p^(1/3) log p, p^2, p^1.5;
multiplicative Gaussian noise), models them with extradeep and, when its venv exists, Extra-P,
and prints wall time, peak memory, exponents recovered and the extrapolation error at 4x the
largest point (median, p90, max).

    python benchmarks/bench_modeling.py                      # full table (Extra-P from /tmp/extrap-venv)
    python benchmarks/bench_modeling.py --regions 200 --no-extrap -o tie_tolerance=0.1

Extra-P runs in its own venv (python -m venv /tmp/extrap-venv; pip install extrap==4.2.5) through
benchmarks/extrap_run.py; it is skipped with a message when that interpreter is missing.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
EXTRAP_PYTHON = Path("/tmp/extrap-venv/bin/python")
CLASSES = [(0, 0), (0, 1), (1, 0), (1, 1), (Fraction(1, 2), 0), (Fraction(1, 3), 1), (2, 0), (Fraction(3, 2), 0)]
CLASS_NAMES = ["constant", "log p", "p", "p log p", "sqrt p", "p^(1/3) log p", "p^2", "p^1.5"]
POINTS = {"p": [4, 8, 16, 32, 64], "n": [8, 16, 32, 64, 128]}
REPS = 5


def factor(x, cls):
    i, j = cls
    return np.asarray(x, float) ** float(i) * np.log2(np.asarray(x, float)) ** float(j)


def truth_table(n_regions: int, n_params: int, seed: int) -> pd.DataFrame:
    """Per region: the class of each parameter, the form and the coefficients."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n_regions):
        cls = [CLASSES[r % 8]] + ([CLASSES[(r // 8) % 8]] if n_params == 2 else [])
        c0 = float(np.exp(rng.uniform(np.log(1), np.log(1000))))
        # each term reaches 0.25x..4x of the constant at the largest point, so it is identifiable
        share = np.exp(rng.uniform(np.log(0.25), np.log(4), size=2))
        rows.append(
            {
                "region": f"r{r}",
                "classes": cls,
                "c0": c0,
                "share": share,
                "multiplicative": bool(rng.integers(2)) if n_params == 2 else False,
            }
        )
    return pd.DataFrame(rows)


def true_value(row, X: np.ndarray) -> np.ndarray:
    """Truth at points X (n, m)."""
    names = list(POINTS)[: X.shape[1]]
    parts = [factor(X[:, k], c) / factor(max(POINTS[names[k]]), c) for k, c in enumerate(row.classes)]
    live = [k for k, c in enumerate(row.classes) if c != (0, 0)]
    value = np.full(len(X), row.c0)
    if row.multiplicative and len(live) == 2:
        return value + row.c0 * row.share[0] * parts[0] * parts[1]
    for k in live:
        value = value + row.c0 * row.share[k] * parts[k]
    return value


def measurements(truth: pd.DataFrame, n_params: int, noise: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed + 1)
    names = list(POINTS)[:n_params]
    grid = np.array(np.meshgrid(*[POINTS[n] for n in names], indexing="ij")).reshape(n_params, -1).T.astype(float)
    frames = []
    for row in truth.itertuples():
        y = np.repeat(true_value(row, grid), REPS)
        y = y * (1 + noise * rng.standard_normal(y.size))
        part = pd.DataFrame(np.repeat(grid, REPS, axis=0), columns=names)
        frames.append(part.assign(region=row.region, metric="time", rep=np.tile(np.arange(REPS), len(grid)), value=y))
    return pd.concat(frames, ignore_index=True)


def exponents_of(terms: list[dict], n_params: int) -> list[set]:
    """Per parameter the set of (i, j) factors used by a model's terms (dict param -> (i, j))."""
    sets = [set() for _ in range(n_params)]
    for term in terms:
        for p, (i, j) in term.items():
            if (Fraction(i), Fraction(j)) != (0, 0):
                sets[int(p)].add((Fraction(i), Fraction(j)))
    return sets


def score(truth: pd.DataFrame, found: list[list[set]], predicted: np.ndarray, far: np.ndarray) -> dict:
    right, errors = 0, []
    for row, sets, pred in zip(truth.itertuples(), found, predicted):
        want = [set() if c == (0, 0) else {(Fraction(c[0]), Fraction(c[1]))} for c in row.classes]
        right += int(sets == want)
        actual = true_value(row, far[None, :])[0]
        errors.append(abs(pred - actual) / abs(actual) * 100)
    e = np.asarray(errors)
    return {"right": right, "median": np.median(e), "p90": np.percentile(e, 90), "max": e.max()}


def run_extradeep(path: Path, far: np.ndarray, options: dict) -> tuple[dict, list, np.ndarray]:
    """End to end in a fresh interpreter (import, read, model), then the models in-process for scoring."""
    code = (
        "import resource,time,sys;t=time.perf_counter();from extradeep.modeling import model_extrap_text;"
        f"model_extrap_text(sys.argv[1],{options!r});"
        "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    inner, rss_kb = out.stdout.split()
    from extradeep.modeling import model_extrap_text

    t0 = time.perf_counter()
    table = model_extrap_text(path, options)
    warm = time.perf_counter() - t0
    table = table.set_index("region").loc[[f"r{k}" for k in range(len(table))]]
    n_params = far.size
    found, preds = [], []
    for m in table["model"]:
        found.append(exponents_of([{str(k): f for k, f in enumerate(t)} for t in m.terms], n_params))
        preds.append(m.predict(far if n_params > 1 else far[0]))
    return (
        {"wall": wall, "inner": float(inner), "warm": warm, "peak_mb": int(rss_kb) / 1024},
        found,
        np.asarray(preds, float),
    )


def run_extrap(path: Path, far: np.ndarray):
    if not EXTRAP_PYTHON.exists():
        return None
    start = time.perf_counter()
    out = subprocess.run(
        [str(EXTRAP_PYTHON), str(HERE / "extrap_run.py"), str(path), "--at", json.dumps([far.tolist()]), "--rss"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if out.returncode:
        print(f"  Extra-P failed: {out.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    result = json.loads(out.stdout)
    found = [exponents_of(m["terms"], far.size) for m in result["models"]]
    preds = np.array([m["predict"][0] for m in result["models"]])
    return (
        {"wall": wall, "inner": result["seconds"], "warm": result["seconds"], "peak_mb": result["peak_kb"] / 1024},
        found,
        preds,
    )


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word such as extrap


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regions", type=int, nargs="+", default=[200, 2000], help="region counts")
    parser.add_argument("--params", type=int, nargs="+", default=[1, 2], help="parameter counts (1, 2)")
    parser.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.05], help="relative noise levels")
    parser.add_argument("--seed", type=int, default=7, help="random seed")
    parser.add_argument("--no-extrap", action="store_true", help="skip Extra-P")
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        help="extradeep modeler option key=value (Python literal), e.g. tie_tolerance=0.1",
    )
    args = parser.parse_args(argv)
    options = {k: _literal(v) for k, v in (o.split("=", 1) for o in args.option)}
    if not args.no_extrap and not EXTRAP_PYTHON.exists():
        print(
            f"Extra-P skipped: {EXTRAP_PYTHON} not found (python -m venv /tmp/extrap-venv && "
            "/tmp/extrap-venv/bin/pip install extrap==4.2.5)",
            file=sys.stderr,
        )
    print(f"options {options or 'defaults'}")
    print(
        f"{'tool':9} {'par':>3} {'regions':>7} {'noise':>5} {'wall s':>7} {'model s':>7} {'warm s':>7} "
        f"{'peak MB':>7} {'right':>9} {'ext med%':>8} {'p90%':>7} {'max%':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n_params in args.params:
            far = np.array([4.0 * max(POINTS[n]) for n in list(POINTS)[:n_params]])
            for n_regions in args.regions:
                for noise in args.noise:
                    truth = truth_table(n_regions, n_params, args.seed)
                    path = Path(tmp) / f"bench_{n_params}p_{n_regions}_{noise}.txt"
                    from extradeep.modeling import write_extrap_text

                    write_extrap_text(path, measurements(truth, n_params, noise, args.seed), list(POINTS)[:n_params])
                    tools = [("extradeep", run_extradeep(path, far, options))]
                    if not args.no_extrap:
                        print(f"  running Extra-P on {path.name} ...", file=sys.stderr)
                        tools.append(("extrap", run_extrap(path, far)))
                    for name, res in tools:
                        if res is None:
                            continue
                        timing, found, preds = res
                        s = score(truth, found, preds, far)
                        print(
                            f"{name:9} {n_params:>3} {n_regions:>7} {noise:>5.2f} {timing['wall']:>7.2f} "
                            f"{timing['inner']:>7.2f} {timing['warm']:>7.3f} {timing['peak_mb']:>7.0f} "
                            f"{s['right']:>4}/{n_regions:<4} {s['median']:>8.2f} {s['p90']:>7.2f} {s['max']:>8.1f}",
                            flush=True,
                        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
