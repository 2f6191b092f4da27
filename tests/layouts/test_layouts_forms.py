"""Which form of the step the layout model keeps (extradeep.layouts.forms): how ZeRO 0-1 reduce
gradients (after the backward pass, or bucket by bucket during it) and how collectives cross nodes,
learned where observations can tell and assumed, with an interval that reaches the other forms,
where they cannot. Truth: vTrain's real layouts with step times composed at known coefficients."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from shared_data import GPT_TINY

from extradeep.columns import PART_DP, STEP_TIME
from extradeep.errors import InputError
from extradeep.io.parallel.parts import layout_parts, part_observations
from extradeep.layouts.model import LayoutModel
from extradeep.layouts.parts import NAMES, PRIOR, compose, nominal_features
from extradeep.layouts.validation import VTRAIN_CLUSTER

KNOWN = np.where(np.array(NAMES) == "layer_overhead", 0.0, PRIOR)  # the optional layer overhead off


def composed(frame: pd.DataFrame, overlap: bool, algorithm: str = "hierarchical") -> pd.Series:
    return pd.Series(compose(nominal_features(frame, VTRAIN_CLUSTER, algorithm, overlap), KNOWN)["step"])


@pytest.mark.parametrize("overlap, name", [(True, "buckets"), (False, "none")])
def test_how_gradients_are_reduced_is_learned_from_runs_that_reduce_them(vtrain, overlap, name):
    """vTrain's multi-node layouts reduce ZeRO 0 gradients over 8-512 GPUs: the step totals tell
    the two forms apart (they differ by up to several percent) and the model keeps the true one."""
    multi = vtrain[1]
    differ = np.abs(composed(multi, True) / composed(multi, False) - 1)
    assert differ.max() > 0.02
    truth = multi.assign(**{STEP_TIME: composed(multi, overlap).to_numpy()})
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None, prior_weight=1e-8, grad_overlap="select").fit(truth)
    assert model.grad_overlap_ == name and model.forms_measured_["grad_overlap"]
    assert np.allclose(model.predict(multi)[STEP_TIME], truth[STEP_TIME], rtol=5e-3)


def test_without_such_runs_the_overlap_is_assumed_and_the_interval_reaches_it(vtrain):
    """Runs without data parallelism cannot tell how gradients are reduced: the model keeps the
    cautious form (after the backward pass), says so, and the interval of every layout reaches the
    bucketed form's prediction too."""
    single, multi = vtrain
    calibration = single[single["dp"] == 1].sample(120, random_state=2)
    truth = calibration.assign(**{STEP_TIME: composed(calibration, True).to_numpy()})
    model = LayoutModel(hardware=VTRAIN_CLUSTER, prior_weight=1e-8, grad_overlap="select").fit(truth)
    assert model.grad_overlap_ == "none" and not model.forms_measured_["grad_overlap"]
    assert "assumed: no profile of a ZeRO 0-1 run with d > 1" in model.formula()
    predicted = model.predict(multi)
    bucketed = compose(nominal_features(multi, VTRAIN_CLUSTER, model.algorithm_, True), model.coef_.to_numpy())
    assert (predicted["step_time_low"] <= bucketed["step"] * (1 + 1e-9)).all()
    assert (predicted["step_time_low"] < predicted[STEP_TIME]).all()


def test_buckets_hide_all_but_the_last_one(vtrain):
    """With many buckets and a long backward pass, the step waits for the last bucket's reduction
    alone; a model whose stage fits one bucket hides nothing."""
    multi = vtrain[1]
    rows = multi[(multi["pp"] == 1) & (multi["dp"] > 1)].head(3)
    assert len(rows)
    for layers, hidden, heads in ((rows["layers"], rows["hidden"], rows["heads"]), (2, 512, 8)):
        frame = rows.assign(layers=layers, hidden=hidden, heads=heads)
        full = compose(nominal_features(frame, VTRAIN_CLUSTER, "hierarchical", False), KNOWN)[PART_DP]
        features = nominal_features(frame, VTRAIN_CLUSTER, "hierarchical", True)
        waited = compose(features, KNOWN)[PART_DP]
        if np.isscalar(layers):  # one bucket: it closes as the pass ends
            assert (features["last_bucket_share"] == 1).all() and np.allclose(waited, full)
        else:
            assert (features["last_bucket_share"] < 0.5).all()
            assert np.allclose(waited, features["last_bucket_share"] * full, rtol=0.02)


def test_by_default_step_totals_leave_the_reduction_after_the_backward_pass_assumed(vtrain):
    """'select' chose the bucketed form on simulated studies where the other predicted better
    (docs/performance.md), so by default ('auto') step totals do not choose: even on bucketed truth
    the form is 'none', and the formula says it is assumed."""
    multi = vtrain[1]
    truth = multi.assign(**{STEP_TIME: composed(multi, True).to_numpy()})
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(truth)
    assert model.grad_overlap_ == "none" and not model.forms_measured_["grad_overlap"]
    assert "ZeRO 0-1 gradient reduction: charged in full after the backward pass, assumed" in model.formula()


def test_by_default_the_profiles_say_how_gradients_are_reduced(gpt_studies):
    """The simulator reduces ZeRO 0-1 gradient buckets from the autograd thread, during the backward
    pass: its profiled runs with d > 1 make 'auto' choose 'buckets', measured; without them it is
    'none', assumed."""
    study = gpt_studies["megatron"]
    paths = sorted(p for p in study.files["path"] if p.endswith(".pt.trace.json.gz"))
    observations = part_observations(layout_parts(paths), model=GPT_TINY)
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(None, observations)
    assert model.grad_overlap_ == "buckets" and model.forms_measured_["grad_overlap"]
    assert "assumed: no profile" not in model.formula()
    alone = observations[(observations["dp"] == 1) | (observations["zero"] >= 2)]
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(None, alone)
    assert model.grad_overlap_ == "none" and not model.forms_measured_["grad_overlap"]


def test_an_unknown_form_is_a_user_error(vtrain):
    with pytest.raises(InputError, match="grad_overlap"):
        LayoutModel(hardware=VTRAIN_CLUSTER, grad_overlap="always").fit(vtrain[1])


def test_deepspeeds_reduction_after_the_backward_pass_reads_as_none(gpt_studies):
    """DeepSpeed's engine reduces ZeRO 0-1 gradients at the accumulation boundary, after autograd
    returns: the simulated DeepSpeed run (ZeRO 1, d = 2) launches none of them from the autograd
    thread, and 'auto' reads 'none' from it, measured."""
    from extradeep.columns import IN_BACKWARD

    study = gpt_studies["deepspeed"]
    paths = sorted(p for p in study.files["path"] if p.endswith(".pt.trace.json.gz"))
    parts = layout_parts(paths)
    shares = parts[parts["metric"] == IN_BACKWARD]["value"]
    assert len(shares) and (shares == 0.0).all()
    model = LayoutModel(hardware=VTRAIN_CLUSTER, interval=None).fit(None, part_observations(parts, model=GPT_TINY))
    assert model.grad_overlap_ == "none" and model.forms_measured_["grad_overlap"]
