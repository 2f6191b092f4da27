"""`extradeep model FILE --json` on 2,000 Extra-P regions against Extra-P on the same file, same run.

    python benchmarks/bench_json.py [--regions 2000] [--params 1] [--repeat 3] [--no-extrap]

Writes an Extra-P text file with known truth (benchmarks/bench_modeling.py's inputs: 5 points x 5
repetitions per region, 1% noise), then times, each in a fresh interpreter:
  - `extradeep model FILE --json OUT` end to end (import, read, model, JSON), best of --repeat;
  - Extra-P 4.2.5 reading and modeling the same file (benchmarks/extrap_run.py in /tmp/extrap-venv).
Prints wall and CPU seconds of both and their ratio (Extra-P / extradeep; the goal is >= 20), and
the JSON-writing step alone with orjson and with the standard library, in this process.
On a shared machine CPU time is the steadier figure; both tools run under the same load.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EXTRAP_PYTHON = Path("/tmp/extrap-venv/bin/python")


def timed(command: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one command run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def write_input(folder: Path, regions: int, params: int) -> Path:
    sys.path.insert(0, str(HERE))
    from bench_modeling import measurements, truth_table

    from extradeep.modeling import write_extrap_text

    path = folder / f"extrap_{regions}_{params}p.txt"
    names = ["p", "n"][:params]
    write_extrap_text(path, measurements(truth_table(regions, params, 7), params, 0.01, 7), names)
    return path


def json_step(path: Path) -> dict:
    """Seconds to build and write the JSON document alone, with orjson and with the standard library."""
    import json

    from extradeep.analysis.core import analyse_table
    from extradeep.modeling import read_extrap_text
    from extradeep.report import jsonout

    table = read_extrap_text(path)
    analysis = analyse_table(table, table.attrs["params"], {}, None, None)
    out = {}
    start = time.perf_counter()
    document = jsonout.models_document(analysis, None, None, None, 0.95)
    out["document"] = time.perf_counter() - start
    start = time.perf_counter()
    data = jsonout.dumps(document)
    out["orjson"] = time.perf_counter() - start
    start = time.perf_counter()
    json.dumps(jsonout._clean(document), indent=1, allow_nan=False)
    out["stdlib json"] = time.perf_counter() - start
    out["MB"] = len(data) / 1e6
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regions", type=int, default=2000)
    parser.add_argument("--params", type=int, default=1, choices=(1, 2))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-extrap", action="store_true", help="skip Extra-P")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_input(Path(tmp), args.regions, args.params)
        out = Path(tmp) / "models.json"
        runs = [
            timed([sys.executable, "-m", "extradeep", "model", str(path), "--json", str(out)])
            for _ in range(args.repeat)
        ]
        wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
        print(
            f"extradeep model --json, {args.regions} regions, {args.params} parameter(s): "
            f"wall {wall:.2f} s, CPU {cpu:.2f} s (best of {args.repeat}); JSON {out.stat().st_size / 1e6:.1f} MB"
        )
        steps = json_step(path)
        print(
            f"  JSON step alone: document {steps['document']:.3f} s, orjson {steps['orjson']:.3f} s, "
            f"standard library {steps['stdlib json']:.3f} s ({steps['MB']:.1f} MB)"
        )
        if args.no_extrap or not EXTRAP_PYTHON.exists():
            print(
                f"Extra-P skipped ({EXTRAP_PYTHON} absent: python -m venv /tmp/extrap-venv && "
                "/tmp/extrap-venv/bin/pip install extrap==4.2.5)"
            )
            return 0
        e_wall, e_cpu = timed([str(EXTRAP_PYTHON), str(HERE / "extrap_run.py"), str(path)])
        print(f"Extra-P 4.2.5 on the same file: wall {e_wall:.1f} s, CPU {e_cpu:.1f} s")
        print(f"ratio Extra-P / extradeep: wall {e_wall / wall:.1f}x, CPU {e_cpu / cpu:.1f}x (goal >= 20x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
