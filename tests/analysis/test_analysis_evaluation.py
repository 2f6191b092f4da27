import numpy as np
import pandas as pd
import pytest

from extradeep.analysis.core import analyse, measured_points, subset_experiment
from extradeep.analysis.evaluation import error_summary, prediction_errors


def test_errors_at_modeling_and_held_out_points(synthetic):
    make, _, dataset = synthetic
    experiment = make([2, 4, 6, 8, 10, 20, 40], dataset)
    points = experiment.points[["ranks"]].drop_duplicates()
    analysis = analyse(subset_experiment(experiment, points[points.ranks <= 10]))
    held_app, held_regions = measured_points(subset_experiment(experiment, points[points.ranks > 10]), dataset)
    errors = pd.concat(
        [
            prediction_errors(analysis, analysis.application_points, analysis.region_points, "modeling"),
            prediction_errors(analysis, held_app, held_regions, "evaluation"),
        ],
        ignore_index=True,
    )
    epoch = errors[(errors.model_type == "application") & (errors.name == "epoch time")].set_index("ranks")
    assert list(epoch.index) == [2, 4, 6, 8, 10, 20, 40]
    assert (epoch.loc[[20, 40], "role"] == "evaluation").all()
    # the error column is what it says: |model - measured| / measured
    row = epoch.loc[40]
    assert row["error_pct"] == pytest.approx(abs(row["predicted"] - row["value"]) / row["value"] * 100)
    assert epoch["error_pct"].max() < 3.0
    summary = error_summary(errors[errors.model_type == "region"], ["ranks"], by="kind")
    kernels = summary[(summary.kind == "kernel") & (summary.role == "evaluation") & (summary.ranks == 40)]
    assert kernels["models"].iloc[0] == 2  # gemm and ncclAllReduce
    expected = errors[(errors.kind == "kernel") & (errors.role == "evaluation") & (errors.ranks == 40)]["error_pct"]
    assert kernels["mpe_pct"].iloc[0] == pytest.approx(np.median(expected))
