"""The commands' options as typed values (extradeep/workflows/options.py and its subclasses): every
value checked once, when built, before anything is read; an error names the option by its field."""

import pytest

from extradeep import (
    AnalysisOptions,
    BudgetOptions,
    EvaluationOptions,
    ModelOptions,
    Options,
    PlanOptions,
    ReportOptions,
)
from extradeep.errors import InputError


@pytest.mark.parametrize(
    "kind, values, field, problem",
    [
        (AnalysisOptions, {"level": 1.5}, "level", "must be between 0 and 1, got 1.5"),
        (AnalysisOptions, {"scaling": "sideways"}, "scaling", "must be strong or weak"),
        (AnalysisOptions, {"terms": 0}, "terms", "must be at least 1, got 0"),
        (AnalysisOptions, {"exponents_i": "0,-1"}, "exponents_i", "'-1' is negative"),
        (AnalysisOptions, {"exponents_j": "x"}, "exponents_j", "'x' is not a number"),
        (AnalysisOptions, {"exponents_j": " , "}, "exponents_j", "needs at least one exponent"),
        (AnalysisOptions, {"nonnegative": "maybe"}, "nonnegative", "must be true, false or auto"),
        (AnalysisOptions, {"cost_formula": "T * -1"}, "cost_formula", "gives a negative cost"),
        (AnalysisOptions, {"reading": Options(min_points=1)}, "min_points", "must be at least 2, got 1"),
        (ModelOptions, {"top": -1}, "top", "must be at least 0, got -1"),
        (ModelOptions, {"top": "many"}, "top", "must be at least 0, got many"),
        (AnalysisOptions, {"level": "high"}, "level", "must be between 0 and 1, got high"),
        (PlanOptions, {"max_ranks": 8}, "target", "is needed"),
        (BudgetOptions, {"max_time": 10, "epochs": -2}, "epochs", "must be a positive number"),
        (BudgetOptions, {"max_time": "10 fortnights"}, "max_time", "unknown unit"),
        (AnalysisOptions, {"predict": "8,12.5"}, "predict", "12.5 is not a whole number"),
        (BudgetOptions, {"max_cost": 5, "candidates": "8:4"}, "candidates", "needs start <= stop"),
        (AnalysisOptions, {"at": ["ranks"]}, "at", "must be PARAM=VALUE"),
        (ModelOptions, {"reading": Options(param=["ranks"]), "at": ["ranks=4"]}, "at", "ranks is the parameter"),
        (EvaluationOptions, {"eval_points": "x"}, "eval_points", "'x' is not a number"),
        (PlanOptions, {"target": "64,", "max_ranks": 8}, "target", "'' is not a number"),
        (ReportOptions, {"plan_target": "-4"}, "plan_target", "must be a positive number"),
    ],
)
def test_a_bad_value_is_named_by_its_field(kind, values, field, problem):
    with pytest.raises(InputError) as caught:
        kind(**values)
    assert caught.value.field == field and problem in caught.value.problem


@pytest.mark.parametrize(
    "kind, values, message",
    [
        (BudgetOptions, {}, "give --max-time and/or --max-cost"),
        (EvaluationOptions, {}, "give --eval-points"),
        (EvaluationOptions, {"eval_points": "4", "eval_dir": "x"}, "not both"),
    ],
)
def test_a_bad_combination_fails_in_one_line(kind, values, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        kind(**values)


def test_derived_values_are_what_the_library_takes():
    options = ModelOptions(
        reading=Options(param=["ranks"], min_points=4),
        predict="8:16:4",
        at={},
        exponents_i="0, 1/2 ,1",
        terms=2,
        nonnegative=True,
        price_per_gpu_hour=2.5,
    )
    assert options.predict_values == [8.0, 12.0, 16.0]
    assert options.modeler == {"min_points": 4, "exponents_i": ("0", "1/2", "1"), "n_terms": 2, "nonnegative": True}
    assert options.cost.price_per_gpu_hour == 2.5 and options.top == 10
    assert AnalysisOptions(at={"batch": 64}).at == ("batch=64",)
    # the GUI's signs of the terms: any sign (False) is given too; left out, the input's own hold
    assert AnalysisOptions(nonnegative=False, exponents_j="0; 1").modeler == {
        "nonnegative": False,
        "exponents_j": ("0", "1"),
    }
    assert AnalysisOptions().modeler == {}
    # optional here, required for the commands of their own
    report = ReportOptions(plot_formats="PNG, svg")
    assert report.limits is None and report.eval_values is None and report.formats == ["png", "svg"]
    assert BudgetOptions(max_time="2h", epochs=3).limits.max_time == 7200
    assert PlanOptions(target="64,128", max_ranks=8).target_values == [64.0, 128.0]
