"""The extradeep desktop GUI (PySide6): region models, speedup, efficiency, cost, budgets and the predictor.

Built only on extradeep's public API. Start it with `extradeep gui [PROFILES | exp.sqlite | extrap.txt]`
or `python -m extradeep.gui`.
"""
