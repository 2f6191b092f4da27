"""`extradeep model` end to end on the shipped sample_profiles/ (simulated exports with truth.json)."""

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from extradeep.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_profiles"
DATASET = ["--train-samples", "50000", "--val-samples", "10000", "--batch-size", "64"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return ["--cache-dir", str(tmp_path_factory.getbasetemp() / "extradeep-cache")]


@pytest.fixture(scope="module")
def truth():
    return json.loads((SAMPLES / "truth.json").read_text())


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_readme_command_prints_epoch_time_model_and_top_kernels(capsys, cache):
    # sample_profiles/extradeep.toml holds the dataset sizes, so values are per epoch
    before = {p: _sha(p) for p in sorted(SAMPLES.glob("*.p2.*.sqlite"))}
    assert main(["model", str(SAMPLES), "--param", "ranks", *cache]) == 0
    out = capsys.readouterr().out
    assert re.search(r"epoch time\s+n_t \* \(0\.0\d+ \+", out), out[:2000]
    assert "Top regions by growth" in out and "ncclDevKernel_AllReduce" in out
    assert "Predictions per epoch" in out and "ranks=128" in out  # default: 2x, 4x, 8x the largest
    assert {p: _sha(p) for p in before} == before  # inputs are read-only


def _validate(value, schema, root, where="$"):
    """The JSON-Schema subset docs/json-schema.md uses: type, enum, required, properties,
    additionalProperties, items, $ref."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].split("/")[-1]]
    types = schema.get("type")
    if types:
        kinds = {
            "object": dict,
            "array": list,
            "string": str,
            "boolean": bool,
            "null": type(None),
            "integer": int,
            "number": (int, float),
        }
        allowed = types if isinstance(types, list) else [types]
        ok = any(
            isinstance(value, kinds[t]) and not (t in ("number", "integer") and isinstance(value, bool))
            for t in allowed
        )
        assert ok, f"{where}: {value!r} is not {allowed}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{where}: missing {key}"
        for key, item in value.items():
            if key in schema.get("properties", {}):
                _validate(item, schema["properties"][key], root, f"{where}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                _validate(item, schema["additionalProperties"], root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _validate(item, schema["items"], root, f"{where}[{i}]")


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, cache):
    """One `model` run with dataset sizes, predictions, a price, --json and --save."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("model")
    args = [
        "model",
        str(SAMPLES),
        "--param",
        "ranks",
        *DATASET,
        *cache,
        "--json",
        str(out / "m.json"),
        "--predict",
        "16,32,64",
        "--price-per-gpu-hour",
        "2.5",
        "--save",
        str(out / "exp.sqlite"),
    ]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(args) == 0
    return stdout.getvalue(), json.loads((out / "m.json").read_text()), out / "exp.sqlite"


def test_epoch_model_matches_truth_at_measured_points(full_run, truth):
    out, doc, _ = full_run
    epoch = next(a for a in doc["application"] if a["quantity"] == "epoch time")
    truth_epoch = {p["params"]["ranks"]: p["epoch_time"] for p in truth["points"]}
    for m in epoch["measured"]:
        # the simulator's noise is 2% per kernel instance; medians over steps, ranks and repetitions
        assert m["value"] == pytest.approx(truth_epoch[m["point"]["ranks"]], rel=0.03)
    assert epoch["model"]["formula"].startswith("n_t * (")
    assert "Application models per epoch" in out and "Predictions per epoch" in out


def test_json_output_follows_the_documented_schema(full_run):
    text = (REPO / "docs" / "json-schema.md").read_text()
    schema = json.loads(re.search(r"## Schema.*?```json\n(.*?)```", text, re.S).group(1))
    _, doc, _ = full_run
    _validate(doc, schema, schema)
    # every region and metric of the experiment is in the file, with its measured values
    regions = {(r["region"], r["metric"]) for r in doc["regions"]}
    assert ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "time") in regions
    assert any(metric == "visits" for _, metric in regions)
    assert {p["point"]["ranks"] for p in doc["predictions"]} == {16.0, 32.0, 64.0}
    row = next(p for p in doc["predictions"] if p["quantity"] == "epoch time" and p["point"]["ranks"] == 64)
    assert row["cost"] == pytest.approx(row["value"] / 3600 * 64 * 2.5)
    assert row["lo"] <= row["value"] <= row["hi"]
    assert {m["derived"] for m in doc["scaling_models"]} == {"speedup", "efficiency", "runtime_change_pct"}
    # speedup and efficiency of every region too, from the same baseline (ranks=2), per sample (floor()
    # in the steps per epoch must not pass for speedup): S = T(2)/T(x) * samples(x)/samples(2), E = S*2/x
    allreduce = [r for r in doc["region_predictions"] if r["region"] == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert {r["point"]["ranks"] for r in allreduce} == {16.0, 32.0, 64.0}
    for r in allreduce:
        assert r["speedup"] == pytest.approx(r["baseline_value"] / r["value"] * r["samples"] / r["samples_base"])
        assert r["efficiency"] == pytest.approx(r["speedup"] * 2 / r["point"]["ranks"])


def test_save_keeps_experiment_and_models_and_reloads(full_run, capsys):
    import sqlite3

    first, _, saved = full_run
    with sqlite3.connect(saved) as conn:
        models = pd.read_sql("SELECT * FROM models", conn)
    assert "epoch time" in set(models["name"]) and models["model_json"].notna().any()
    assert main(["model", str(saved), "--predict", "16,32,64"]) == 0
    second = capsys.readouterr()
    formula = re.search(r"epoch time\s+(n_t \* .*?)\s{2}", first).group(1)
    assert formula in second.out
    # the sample's nested layout study was left out when it was read; reloading reads no folder, so
    # the note says it comes from that reading
    notes = [line for line in second.err.splitlines() if line.startswith("extradeep: note")]
    assert any("separate study" in line for line in notes)
    assert all(line.startswith("extradeep: note (when exp.sqlite was read): ") for line in notes)


def test_extrap_text_input_is_modeled(tmp_path, capsys):
    from extradeep.modeling import write_extrap_text

    p = np.array([2.0, 4, 8, 16, 32] * 2)
    frame = pd.DataFrame({"region": "allreduce", "metric": "time", "p": p, "value": 0.5 + 0.1 * p * np.log2(p)})
    path = tmp_path / "input.txt"
    write_extrap_text(path, frame, ["p"])
    assert main(["model", str(path)]) == 0
    out = capsys.readouterr().out
    assert "allreduce" in out and "log2(p)" in out and "O(p log p)" in out


def test_hostile_cost_formula_is_one_line_error_before_any_reading(capsys, tmp_path):
    code = main(["model", str(tmp_path / "missing"), "--cost-formula", "__import__('os').system('x')"])
    err = capsys.readouterr().err
    assert code == 2 and "formula" in err and "Traceback" not in err
