"""Record which regions Extra-P 4.2.5 models in each of its own text-format test inputs.

    python benchmarks/extrap_record_text.py [--extrap-python /tmp/extrap-venv/bin/python]

Runs Extra-P (benchmarks/extrap_run.py, from its own venv) on every file under
tests/modeling/data/extrap_text_inputs/ (Extra-P's test inputs, see the MANIFEST.md there) and
writes, per file, the regions and metrics it modeled and its formulas to extrap_4.2.5_models.json
beside them. tests/modeling/test_modeling_extrap_inputs.py checks that extradeep models the same
regions of every file that Extra-P models.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extrap_record import extrap_version, run_extrap  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
INPUTS = REPO / "tests" / "modeling" / "data" / "extrap_text_inputs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extrap-python", default="/tmp/extrap-venv/bin/python")
    args = parser.parse_args()
    python = Path(args.extrap_python)
    record = {"extrap_version": extrap_version(python), "files": {}}
    for path in sorted(INPUTS.rglob("*.txt")):
        name = path.relative_to(INPUTS).as_posix()
        print(f"Extra-P on {name}", file=sys.stderr)
        models = run_extrap(python, path)
        record["files"][name] = sorted(
            ({"region": m["region"], "metric": m["metric"], "formula": m["formula"]} for m in models),
            key=lambda m: (m["region"], m["metric"]),
        )
    (INPUTS / "extrap_4.2.5_models.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
