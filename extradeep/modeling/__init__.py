"""PMNF performance models (Extra-P style): batched hypothesis search with leave-one-out SMAPE.

`fit_models(df, params)` models every region/metric of a tidy table; `PMNFModeler` fits one;
`read_extrap_text` / `model_extrap_text` read and model Extra-P text inputs.
"""

from extradeep.modeling.extrap_text import model_extrap_text, read_extrap_text, write_extrap_text
from extradeep.modeling.model import Model
from extradeep.modeling.modeler import PMNFModeler, fit_models
from extradeep.modeling.terms import DEFAULT_I, DEFAULT_J, EXTRAP_PAIRS, SHORT_NAMES

__all__ = [
    "DEFAULT_I",
    "DEFAULT_J",
    "EXTRAP_PAIRS",
    "SHORT_NAMES",
    "Model",
    "PMNFModeler",
    "fit_models",
    "model_extrap_text",
    "read_extrap_text",
    "write_extrap_text",
]
