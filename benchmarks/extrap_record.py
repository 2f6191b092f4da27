"""Record Extra-P 4.2.5's chosen models on noise-free inputs as a test fixture (no Extra-P in CI).

    python benchmarks/extrap_record.py [--extrap-python /tmp/extrap-venv/bin/python]

Writes the deterministic inputs (`make_inputs`: every (i, j) pair of Extra-P's default search
space, 1 parameter, and every pair on each parameter of 2-parameter sums and products), runs
Extra-P on them through benchmarks/extrap_run.py and writes its answers (terms, coefficients,
formula per region) with the Extra-P version, the command and each input's sha256 to
tests/modeling/data/extrap_4.2.5_noise_free.json, and the inputs themselves to
tests/modeling/data/extrap_inputs/ (the last float bits of regenerated inputs differ between
machines). tests/modeling/test_modeling_extrap_agreement.py compares extradeep's models on the
stored inputs with these answers, and the regenerated inputs with the stored ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from extradeep.modeling import EXTRAP_PAIRS, write_extrap_text
from extradeep.modeling.terms import factor_values

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "modeling" / "data" / "extrap_4.2.5_noise_free.json"
INPUTS = FIXTURE.parent / "extrap_inputs"
P = np.array([4.0, 8, 16, 32, 64])
N = np.array([10.0, 20, 40, 80, 160])
SHIFT = 11  # the n factor of 2-parameter region k is pair k + SHIFT, so every pair meets several others


def _scaled(x: np.ndarray, pair) -> np.ndarray:
    """The factor scaled to 30 at its largest point, so every term is clearly visible."""
    values = factor_values(x, pair)
    return 30.0 * values / values.max()


def one_parameter_frame() -> pd.DataFrame:
    """One region per default pair (constant 20 + k + term) and one constant region; 2 equal repetitions."""
    frames = [
        pd.DataFrame(
            {"p": np.repeat(P, 2), "value": np.repeat(20.0 + k + _scaled(P, f), 2), "region": f"r{k}", "metric": "time"}
        )
        for k, f in enumerate(EXTRAP_PAIRS)
    ]
    frames.append(pd.DataFrame({"p": P, "value": 5.0, "region": "const", "metric": "time"}))
    return pd.concat(frames, ignore_index=True)


def two_parameter_frame() -> pd.DataFrame:
    """Per default pair k: 10 + f_k(p) + g(n) (k even) or 10 + f_k(p) * g(n) / 30 (k odd), g = pair k + SHIFT."""
    X = np.array([[p, n] for p in P for n in N])
    frames = []
    for k, f in enumerate(EXTRAP_PAIRS):
        fp, gn = _scaled(X[:, 0], f), _scaled(X[:, 1], EXTRAP_PAIRS[(k + SHIFT) % len(EXTRAP_PAIRS)])
        y = 10.0 + (fp + gn if k % 2 == 0 else fp * gn / 30.0)
        frames.append(pd.DataFrame(X, columns=["p", "n"]).assign(value=y, region=f"r{k}", metric="time"))
    for name, col in (("p_only", 0), ("n_only", 1)):  # one parameter without influence
        y = 10.0 + _scaled(X[:, col], EXTRAP_PAIRS[18])
        frames.append(pd.DataFrame(X, columns=["p", "n"]).assign(value=y, region=name, metric="time"))
    return pd.concat(frames, ignore_index=True)


def make_inputs(folder: Path) -> dict[str, Path]:
    """Write the two Extra-P text inputs into `folder`; returns {"one": path, "two": path}."""
    paths = {"one": Path(folder) / "one.txt", "two": Path(folder) / "two.txt"}
    write_extrap_text(paths["one"], one_parameter_frame(), ["p"])
    write_extrap_text(paths["two"], two_parameter_frame(), ["p", "n"])
    return paths


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_extrap(python: Path, path: Path) -> list[dict]:
    out = subprocess.run(
        [str(python), str(REPO / "benchmarks" / "extrap_run.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(out.stdout)["models"]


def extrap_version(python: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('extrap'))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--extrap-python", default="/tmp/extrap-venv/bin/python", help="python of a venv with extrap==4.2.5 installed"
    )
    parser.add_argument("--out", default=str(FIXTURE), help="fixture file to write")
    args = parser.parse_args()
    python = Path(args.extrap_python)
    version = extrap_version(python)
    record = {
        "extrap_version": version,
        "command": "python benchmarks/extrap_record.py --extrap-python " + args.extrap_python,
        "inputs": {},
    }
    INPUTS.mkdir(parents=True, exist_ok=True)
    for name, path in make_inputs(INPUTS).items():
        print(f"Extra-P {version} on {name}.txt", file=sys.stderr)
        models = sorted(run_extrap(python, path), key=lambda m: m["region"])
        record["inputs"][name] = {
            "sha256": sha256(path),
            "models": [{k: m[k] for k in ("region", "metric", "formula", "terms", "coefficients")} for m in models],
        }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
