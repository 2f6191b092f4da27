"""From models to answers: epoch models, speedup, efficiency, cost, bottlenecks and budgets.

Pure functions over Experiments and model tables that return pandas DataFrames; see
docs/analysis.md for the definitions.
"""
