"""The layout model: it recovers known coefficients from step totals and from per-part
observations, it beats the published baselines on the held-out vTrain models and Megatron-LM's
table, its intervals cover the held-out truth, and it labels estimates and extrapolations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from extradeep.columns import METRIC, PART, STEP_TIME, VALUE, WORKLOAD
from extradeep.errors import InputError
from extradeep.layouts.hardware import GPU_PRESETS
from extradeep.layouts.memory import MemoryModel
from extradeep.layouts.model import STEP_PARTS, LayoutModel
from extradeep.layouts.parts import NAMES, PRIOR, compose, nominal_features
from extradeep.layouts.validation import VTRAIN_CLUSTER, megatron_check

# Published errors on the vTrain multi-node rows, per left-out model (issue 23): a six-coefficient
# least-squares sketch and Calculon run uncalibrated. Mean absolute % error and Spearman's rho.
BASELINES = {
    "3.6B": {"sketch": (20.6, 0.77), "calculon": (14.6, 0.95)},
    "18.4B": {"sketch": (7.9, 0.69), "calculon": (11.8, 0.60)},
    "39.1B": {"sketch": (11.6, 0.35), "calculon": (12.9, 0.44)},
}
# This model's figures on the same rows (docs/performance.md): mean absolute % error and rho.
RECORDED = {"3.6B": (7.2, 0.97), "18.4B": (3.9, 0.84), "39.1B": (6.6, 0.80)}
TRUTH = PRIOR * np.array(
    [0.9, 1.2, 0.8, 1.1, 0.7, 1.5, 2.0, 1.0, 1.5, 1.2, 0.5, 3.0, 1.5, 0.8, 0.0, 0.4]
)  # the optional layer overhead off; a softmax that fuses more shapes than Megatron's


def synthetic(frame: pd.DataFrame) -> pd.DataFrame:
    """Real layouts with step times made by the composition at known coefficients (TRUTH)."""
    step = compose(nominal_features(frame, VTRAIN_CLUSTER), TRUTH)["step"]
    return frame.assign(**{STEP_TIME: step})


def test_step_totals_recover_known_coefficients(vtrain):
    layouts = pd.concat(vtrain, ignore_index=True)
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None, prior_weight=1e-8).fit(synthetic(layouts))
    predicted = model.predict(layouts)[STEP_TIME]
    assert np.allclose(predicted, synthetic(layouts)[STEP_TIME], rtol=2e-3)
    leaned_on = ("gemm", "memory", "host_floor", "tp8", "network", "unfused_softmax")  # by these layouts most
    for name in leaned_on:
        assert model.coef_[name] == pytest.approx(TRUTH[NAMES.index(name)], rel=0.05), name


def test_the_optional_layer_overhead_is_off_unless_asked_for_and_then_recovered(vtrain):
    layouts = pd.concat(vtrain, ignore_index=True)
    truth = TRUTH.copy()
    truth[NAMES.index("layer_overhead")] = 2e-3
    observed = layouts.assign(**{STEP_TIME: compose(nominal_features(layouts, VTRAIN_CLUSTER), truth)["step"]})
    options = {"hardware": VTRAIN_CLUSTER, "interval": None, "prior_weight": 1e-8}
    model = LayoutModel(**options, optional=("layer_overhead",)).fit(observed)
    assert model.coef_["layer_overhead"] == pytest.approx(2e-3, rel=0.1)
    assert LayoutModel(**options).fit(observed).coef_["layer_overhead"] == 0.0
    with pytest.raises(InputError, match="optional"):
        LayoutModel(**options, optional=("no_such_part",)).fit(observed)


def test_per_part_observations_calibrate_their_parts(vtrain):
    """Profiles give parts: fitted on the parts alone, the model predicts the parts and steps of
    other layouts, and says the parts were measured."""
    frame = vtrain[1]
    truth = compose(nominal_features(frame, VTRAIN_CLUSTER), TRUTH)
    rows = []
    for part in (*STEP_PARTS, "step"):
        rows.append(frame.drop(columns=[STEP_TIME]).assign(**{PART: part, METRIC: "time", VALUE: truth[part]}))
    memory_truth = MemoryModel(activation_scale=1.2, overhead=3 * 2**30)
    rows.append(
        frame.drop(columns=[STEP_TIME]).assign(**{PART: "memory", METRIC: "bytes", VALUE: memory_truth.peak(frame)})
    )
    observed = pd.concat(rows, ignore_index=True)
    calibration = observed[observed[WORKLOAD] != "39.1B"]
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None, prior_weight=1e-8).fit(None, parts=calibration)
    held = frame[WORKLOAD] == "39.1B"
    predicted = model.predict(frame[held])
    assert np.allclose(predicted[STEP_TIME], truth["step"][held], rtol=0.02)
    assert np.allclose(predicted["compute"], truth["compute"][held], rtol=0.02)
    assert np.allclose(predicted["peak_memory"], memory_truth.peak(frame[held]), rtol=1e-3)
    status = model.part_status().set_index("coefficient")["calibrated_by"]
    assert status["gemm"] == "parts" and status["network"] == "parts" and status["activation_scale"] == "parts"


def test_held_out_models_beat_the_published_baselines(held_out):
    """Calibrated on the single-node runs and two multi-node models, each third model is predicted
    better than the least-squares sketch and Calculon, in mean error and in ranking, and no worse
    than the figures recorded in docs/performance.md (with a point of mean error and 0.03 of rho
    to spare)."""
    rows, summary = held_out
    for r in summary.itertuples():
        sketch, calculon = BASELINES[r.workload]["sketch"], BASELINES[r.workload]["calculon"]
        assert r.mean_error_pct < min(sketch[0], calculon[0], RECORDED[r.workload][0] + 1), r
        assert r.spearman > max(sketch[1], calculon[1], RECORDED[r.workload][1] - 0.03), r
        assert r.coverage >= 0.85, r  # the 95% interval holds most of the held-out truth
    for workload, group in rows.groupby(WORKLOAD):
        chosen = group.loc[group["predicted"].idxmin(), STEP_TIME]
        assert chosen <= 1.10 * group[STEP_TIME].min(), workload  # the search's pick is within 10% of the best


def test_megatron_table_from_its_smallest_row(published, vtrain):
    """Calibrated on vTrain's tables and on the 1.7B row, Megatron-LM's teraFLOP/s per GPU up to 1T
    parameters and 3,072 GPUs come within 10%."""
    table = megatron_check(published(), calibration=pd.concat(vtrain, ignore_index=True))
    assert table["calibrated"].iloc[0] and not table["calibrated"].iloc[1:].any()
    assert (table["error_pct"].abs().iloc[1:] < 10).all(), table


def test_other_gpus_are_estimates_with_wider_intervals(vtrain_model, vtrain):
    model = LayoutModel(hardware=VTRAIN_CLUSTER).fit(vtrain[1])
    layouts = vtrain[1].drop(columns=[STEP_TIME])
    here = model.predict(layouts)
    h100 = model.predict(layouts, hardware="h100-sxm")
    assert not here["estimate"].any() and h100["estimate"].all()
    assert ((h100["step_time_high"] / h100["step_time_low"]) > (here["step_time_high"] / here["step_time_low"])).all()
    speedup = here[STEP_TIME] / h100[STEP_TIME]
    peak_ratio = GPU_PRESETS["h100-sxm"].peak_flops / GPU_PRESETS["a100-80gb"].peak_flops
    assert (speedup > 1).all() and (speedup < peak_ratio).all()  # faster, but host and network do not speed up


def test_predictions_say_what_they_extrapolate(vtrain_model, vtrain):
    layouts = vtrain[1].drop(columns=[STEP_TIME]).head(3)
    seen = vtrain_model.predict(layouts)
    assert (seen["extrapolated"] == "").all()
    unseen = vtrain_model.predict(layouts.assign(recompute="selective", zero=1))
    assert unseen["extrapolated"].str.contains("zero=1").all()
    assert unseen["extrapolated"].str.contains("recompute=selective").all()
    bigger = layouts.drop(columns=["gpus", "micro_batches"]).assign(
        dp=layouts["dp"] * 16, global_batch=layouts["global_batch"] * 16
    )
    bigger = vtrain_model.predict(bigger)
    assert bigger["extrapolated"].str.contains("gpus").all()


def test_physics_alone_is_labelled_prior(vtrain):
    model = LayoutModel(hardware=VTRAIN_CLUSTER).fit(None)
    status = model.part_status().set_index("coefficient")["calibrated_by"]
    assert (status.drop("layer_overhead") == "prior").all() and status["layer_overhead"] == "off"
    predicted = model.predict(vtrain[1].drop(columns=[STEP_TIME]).head(4))
    assert (predicted["step_time_low"] < predicted[STEP_TIME]).all() and (
        predicted[STEP_TIME] < predicted["step_time_high"]
    ).all()
    assert "step = (m + (p - 1) / v) * work" in model.formula()


def test_user_errors_are_one_line(vtrain):
    with pytest.raises(InputError, match="not fitted"):
        LayoutModel().predict(vtrain[1])
    with pytest.raises(InputError, match="between 0 and 1"):
        LayoutModel(dp_overlap=2.0).fit(vtrain[1])
    with pytest.raises(InputError, match="no step_time column"):
        LayoutModel().fit(vtrain[1].drop(columns=[STEP_TIME]))
    with pytest.raises(InputError, match="unknown 'mesh'"):
        LayoutModel(collective_algorithm="mesh").fit(vtrain[1])
    with pytest.raises(InputError, match="unknown coefficient 'gem'"):
        LayoutModel(fixed={"gem": 1.0}).fit(vtrain[1])
    with pytest.raises(InputError, match="finite number >= 0"):
        LayoutModel(fixed={"gemm": -1.0}).fit(vtrain[1])


def test_fixed_coefficients_stay_and_are_labelled(vtrain):
    """A fixed coefficient keeps its value through the fit and says so; the others still move."""
    single = vtrain[0].sample(200, random_state=0)
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None, fixed={"collective_latency": 0.0}).fit(single)
    status = model.part_status().set_index("coefficient")
    assert model.coef_["collective_latency"] == 0.0 and status.loc["collective_latency", "calibrated_by"] == "fixed"
    assert model.coef_["gemm"] != PRIOR[list(NAMES).index("gemm")]
    # the memory rows are in the units people read: a scale, and GiB (not 2.1e9 bytes beside a scale)
    assert status.loc["memory_overhead_gib", "prior"] == 2.0
    shown = status.loc["memory_overhead_gib", "value"]
    assert shown == pytest.approx(model.memory_.overhead / 2**30, abs=5e-4) and shown == round(shown, 3)  # to the MiB


def test_how_collectives_cross_nodes_is_learned_only_from_collectives_that_crossed(vtrain):
    """Runs whose data-parallel collectives cross nodes tell the two algorithms apart (the truth's
    is recovered); runs that span nodes with only pipeline transfers between them cannot, so the
    model assumes the hierarchical form, says so, and its interval spans the other form too."""
    single, multi = vtrain

    def observed(frame):
        step = compose(nominal_features(frame, VTRAIN_CLUSTER, "nccl"), TRUTH)["step"]
        return frame.assign(**{STEP_TIME: step})

    options = {"hardware": VTRAIN_CLUSTER, "prior_weight": 1e-8}
    crossing = LayoutModel(**options, interval=None).fit(observed(multi))
    assert crossing.algorithm_measured_ and crossing.algorithm_ == "nccl"
    # 8 GPUs per stage, two stages on two nodes: only the pipeline's transfers cross
    piped = single[(single["dp"] == 1) & (single["tp"] * single["pp"] == 8)]
    piped = piped[piped["layers"] % (2 * piped["pp"] * piped["chunks"]) == 0]
    piped = piped.assign(pp=piped["pp"] * 2, gpus=piped["gpus"] * 2)
    assert len(piped) and (piped["gpus"] > VTRAIN_CLUSTER.system.gpus_per_node).all()
    calibration = pd.concat([single.sample(150, random_state=1), piped], ignore_index=True)
    model = LayoutModel(**options).fit(observed(calibration))
    assert not model.algorithm_measured_ and model.algorithm_ == "hierarchical"
    assert "assumed: no measured collective crossed nodes" in model.formula()
    predicted = model.predict(multi.drop(columns=[STEP_TIME]))
    nccl = compose(nominal_features(multi, VTRAIN_CLUSTER, "nccl"), model.coef_.to_numpy())["step"]
    assert (predicted["step_time_low"] <= nccl * (1 + 1e-9)).all()
    assert (nccl <= predicted["step_time_high"] * (1 + 1e-9)).all()
    # the other form lies beyond the held-out errors' width for some layouts: the span is what covers it
    assert (np.abs(np.log(nccl / predicted[STEP_TIME])) > model.half_width_).any()


FIT_THREADS_PROBE = """
import sys
from pathlib import Path
from threadpoolctl import threadpool_info
import extradeep.layouts.model as layout_model
from extradeep.layouts.validation import VTRAIN_CLUSTER, vtrain_tables

seen = set()
solve = layout_model.least_squares

def counting(*args, **kwargs):
    seen.update(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
    return solve(*args, **kwargs)

layout_model.least_squares = counting
single_node = vtrain_tables(Path(sys.argv[1]))[0]
layout_model.LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(single_node)
print(sorted(seen))
"""


def test_calibration_runs_blas_on_one_thread_in_a_process_that_started_with_more(published):
    """A notebook imports NumPy before extradeep, so BLAS keeps its threads; the calibration (small
    SVDs, where BLAS threads only spin against other work) lowers them for its own call."""
    import os
    import subprocess
    import sys

    folder = published("vtrain_single_node.csv").parent
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "VECLIB_MAXIMUM_THREADS"}
    argv = [sys.executable, "-c", FIT_THREADS_PROBE, str(folder)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[1]"


def test_collectives_that_crossed_nodes_in_no_observation_are_flagged(vtrain, vtrain_model):
    """Calibrated on one node, the network's share of a data-parallel group across nodes is physics
    alone: predictions say so; calibrated on the multi-node runs too, they do not."""
    one_node = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(vtrain[0])
    layouts = pd.concat(vtrain, ignore_index=True).drop(columns=[STEP_TIME])
    crosses = ((layouts["dp"] > 1) & (layouts["tp"] * layouts["dp"] > 8)).to_numpy()  # ranks tp, dp, pp
    assert crosses.any() and (~crosses).any()
    flagged = one_node.predict(layouts)["extrapolated"].str.contains("dp across nodes").to_numpy()
    assert (flagged == crosses).all()
    assert not vtrain_model.predict(layouts)["extrapolated"].str.contains("across nodes").any()


def test_gemms_narrower_than_any_observed_are_flagged(vtrain):
    """Calibrated on vTrain's layouts with t <= 4, the t = 8 layouts' GEMMs (hidden / t) narrower than
    any observed say so: thin_width's effect on them is an extrapolation."""
    layouts = pd.concat(vtrain, ignore_index=True)
    narrow = (layouts["tp"] > 4).to_numpy()
    assert narrow.any() and (~narrow).any()
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(layouts[~narrow])
    notes = model.predict(layouts.drop(columns=[STEP_TIME]))["extrapolated"]
    width = (layouts["hidden"] / layouts["tp"]).to_numpy()
    assert (notes.str.contains("h/t=").to_numpy() == (width < width[~narrow].min())).all()
    assert notes[narrow].str.contains("h/t=").any() and not notes[~narrow].str.contains("h/t=").any()


def test_one_shape_of_crossing_collective_cannot_tell_the_algorithms_apart(vtrain):
    """The network coefficient scales every inter-node time alike, so collectives that all cross
    nodes the same way (one group shape: here one two-node layout, its data-parallel group 4 GPUs
    per node) fit every algorithm equally well at some coefficient: the model assumes the
    hierarchical form and says so. A second group shape (8 GPUs per node) tells them apart."""
    single, multi = vtrain

    def observed(frame):
        step = compose(nominal_features(frame, VTRAIN_CLUSTER, "nccl"), TRUTH)["step"]
        return frame.assign(**{STEP_TIME: step})

    options = {"hardware": VTRAIN_CLUSTER, "prior_weight": 1e-8, "interval": None}
    inside = single.sample(150, random_state=1)
    one_shape = multi[(multi["tp"] == 2) & (multi["pp"] == 1)].head(1)
    assert len(one_shape) and (one_shape["dp"] * one_shape["tp"] > 8).all()
    model = LayoutModel(**options).fit(observed(pd.concat([inside, one_shape], ignore_index=True)))
    assert not model.algorithm_measured_ and model.algorithm_ == "hierarchical"
    # and every layout whose DP collectives cross nodes says that their form is assumed (those whose
    # TP group spans nodes say 'tp across nodes': no observed TP collective crossed)
    targets = multi.drop(columns=[STEP_TIME])
    notes = model.predict(targets)["extrapolated"]
    crosses = ((targets["dp"] > 1) & (targets["tp"] * targets["dp"] > 8) & (targets["tp"] <= 8)).to_numpy()
    assert crosses.any() and (notes.str.contains("algorithm assumed").to_numpy() == crosses).all()
    assert notes[(targets["tp"] > 8).to_numpy()].str.contains("tp across nodes").all()
    other_shape = multi[(multi["tp"] == 1) & (multi["pp"] == 1)].head(1)
    assert len(other_shape)
    both = pd.concat([inside, one_shape, other_shape], ignore_index=True)
    model = LayoutModel(**options).fit(observed(both))
    assert model.algorithm_measured_ and model.algorithm_ == "nccl"
    assert not model.predict(targets)["extrapolated"].str.contains("algorithm assumed").any()
