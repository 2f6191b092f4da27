"""From models to answers: epoch models, speedup, efficiency, cost, bottlenecks and budgets.

Pure functions over Experiments and model tables that return pandas DataFrames; see
docs/analysis.md for the definitions.
"""

from extradeep.analysis.core import Analysis, analyse, prediction_table
from extradeep.analysis.workflows import Evaluation, evaluate, plan_budget, prediction_grid

__all__ = ["Analysis", "Evaluation", "analyse", "evaluate", "plan_budget", "prediction_grid", "prediction_table"]
