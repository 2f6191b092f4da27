"""The analysis options of the modeling commands (model, budget, evaluate, report, plan) as one typed
value: how profiles are read (:class:`extradeep.pipeline.Options`), how they are modeled, where
predictions go and what they cost.

Building an :class:`AnalysisOptions` checks every value once, before anything is read; a bad value
fails in one line naming the option by its field (``level``), which the CLI shows as its flag
(``--level``) and the GUI as its widget. Each command's options extend it with their own fields.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from extradeep.errors import InputError
from extradeep.pipeline import Options

SCALINGS = ("strong", "weak")
NONNEGATIVE = (True, False, "auto")  # the modeler's signs of the terms (extradeep.modeling.PMNFModeler)


def field_error(name: str, problem: str) -> InputError:
    """The error about option `name` (the library's field name; front ends show their own label)."""
    return InputError(None, field=name, problem=problem)


@contextmanager
def named(name: str):
    """Errors of the parsers in :mod:`extradeep.analysis.points`, which name the command-line flag
    (``--max-time``), as errors about the field `name` (``max_time``)."""
    try:
        yield
    except InputError as exc:
        if exc.source == "--" + name.replace("_", "-"):
            raise field_error(name, exc.problem) from None
        raise


def values_of(given, name: str) -> list[float]:
    """Numbers from text like "16,32" or "8:64:8", or given as numbers; an error names `name`."""
    from extradeep.analysis.points import parse_values

    if not isinstance(given, str):
        return [float(v) for v in given]
    with named(name):
        return parse_values(given, "--" + name.replace("_", "-"))


@dataclass(frozen=True)
class AnalysisOptions:
    """How profiles are read (`reading`), modeled, predicted and costed.

    `config`: the settings file the reading options came from (never written over). `predict`:
    values of the ranks parameter to predict at ("16,32,64", "8:64:8" or a list; default 2x, 4x, 8x
    the largest measured); `at`: values of the other parameters ("PARAM=VALUE" items or a dict);
    `scaling`: "strong" or "weak" (default: weak with a weak-scaling dataset); `ranks_param`: the
    parameter that counts ranks; `level`: of the prediction intervals. Modeler: `exponents_i`,
    `exponents_j` ("0,1/2,1"), `terms`, `nonnegative` (True, False or "auto"; None: not given),
    `refit`. Cost (paper Eq. 14):
    `cores_per_rank` ... `cost_formula`. Derived when built: `predict_values`, `modeler` (the
    modeler's options) and `cost` (:class:`extradeep.analysis.cost.CostSettings`)."""

    reading: Options = field(default_factory=Options)
    config: str | None = None
    predict: object = None
    at: tuple = ()
    scaling: str | None = None
    ranks_param: str | None = None
    level: float = 0.95
    exponents_i: object = None
    exponents_j: object = None
    terms: int | None = None
    nonnegative: bool | str | None = None
    refit: bool = False
    cores_per_rank: float = 1.0
    gpus_per_rank: float = 1.0
    gpus_per_node: float | None = None
    price_per_core_hour: float | None = None
    price_per_gpu_hour: float | None = None
    currency: str | None = None
    cost_formula: str | None = None
    predict_values: list | None = field(init=False, compare=False, repr=False)
    modeler: dict = field(init=False, compare=False, repr=False)
    cost: object = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.reading, Options):
            raise field_error("reading", "must be an extradeep.Options (how profiles are read)")
        object.__setattr__(
            self,
            "at",
            tuple(f"{k}={v}" for k, v in self.at.items()) if isinstance(self.at, dict) else tuple(self.at or ()),
        )
        if isinstance(self.level, bool) or not isinstance(self.level, (int, float)) or not 0 < self.level < 1:
            raise field_error("level", f"must be between 0 and 1, got {self.level}")
        if self.nonnegative not in (None, *NONNEGATIVE):
            raise field_error("nonnegative", f"must be true, false or auto, got {self.nonnegative!r}")
        if self.scaling not in (None, *SCALINGS):
            raise field_error("scaling", f"must be strong or weak, got {self.scaling!r}")
        self._check_counts()
        object.__setattr__(self, "predict_values", rank_values(self.predict, "predict"))
        rank_values(getattr(self, "candidates", None), "candidates")
        self.fixed(None)
        object.__setattr__(self, "modeler", self._modeler())
        object.__setattr__(self, "cost", self._cost())

    def _check_counts(self) -> None:
        """Counts: at least 1 (regions shown: 0; a model needs two configurations at least)."""
        for option in ("top", "min_points", "terms"):
            value = self.reading.min_points if option == "min_points" else getattr(self, option, None)
            least = {"top": 0, "min_points": 2}.get(option, 1)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise field_error(option, f"must be at least {least}, got {value}")

    def given_params(self) -> list[str] | None:
        """The modeled parameters named by the reading options (aliases applied), or None."""
        if not self.reading.param:
            return None
        return [self.reading.aliases.get(p, p) for p in self.reading.param]

    def fixed(self, analysis) -> dict[str, float]:
        """`at` as {param: value}; checked against the modeled parameters (of `analysis`, else of the
        reading options when they name them) and refused for the ranks parameter, which `predict` varies."""
        from extradeep.analysis.core import ranks_parameter
        from extradeep.analysis.points import parse_fixed

        items = list(self.at) or None
        params = analysis.params if analysis is not None else self.given_params()
        if params is None:  # before reading and without parameters: check the syntax only
            params = [item.partition("=")[0].strip() for item in self.at]
        with named("at"):
            fixed = parse_fixed(items, params)
        if analysis is None and self.given_params() is None:
            return fixed
        ranks = analysis.ranks_param if analysis is not None else ranks_parameter(params, self.ranks_param)
        if ranks in fixed:
            raise field_error("at", f"{ranks} is the parameter predictions vary; give its values with --predict")
        return fixed

    def _modeler(self) -> dict:
        """The modeler options given; those left out come from the experiment (a saved file's own,
        :func:`extradeep.analysis.saved.effective_options`)."""
        options = {}
        if self.reading.given("min_points"):
            options["min_points"] = int(self.reading.min_points)
        for name in ("exponents_i", "exponents_j"):
            value = getattr(self, name)
            if value is not None:
                options[name] = exponents(value, name)
        if self.terms is not None:
            options["n_terms"] = self.terms
        if self.nonnegative is not None:
            options["nonnegative"] = self.nonnegative
        return options

    def _cost(self):
        """CostSettings; a bad price or formula fails here, before any reading."""
        from extradeep.analysis.cost import CostSettings

        if self.cost_formula is not None:
            check_formula(self.cost_formula, self.given_params())
        return CostSettings(
            cores_per_rank=self.cores_per_rank,
            gpus_per_rank=self.gpus_per_rank,
            gpus_per_node=self.gpus_per_node,
            price_per_core_hour=self.price_per_core_hour,
            price_per_gpu_hour=self.price_per_gpu_hour,
            formula=self.cost_formula,
            currency=self.currency,
        )

    def prediction_grid(self, analysis):
        """(analysis rebased to the other parameters' values, grid): `predict` along the ranks
        parameter (default 2x, 4x, 8x the largest measured), others from `at` or the baseline."""
        from extradeep.analysis.workflows import prediction_grid

        return prediction_grid(analysis, self.predict_values, self.fixed(analysis))


def rank_values(given, name: str) -> list[float] | None:
    """Values of the ranks parameter (text like "16,32" or "8:64:8", or numbers), refused in one line
    unless they are whole rank counts; None when not given."""
    if given is None or (isinstance(given, str) and not given):
        return None
    values = values_of(given, name)
    bad = [v for v in values if v % 1]
    if bad:
        raise field_error(name, f"{bad[0]:g} is not a whole number: it counts ranks (processes)")
    return values


def exponents(given, name: str) -> tuple[str, ...]:
    """The parts of an exponent list ("0, 1/2; 1" or numbers), each checked to be a non-negative
    number or fraction; a list given empty is refused (leave it out for the default set)."""
    from extradeep.modeling.terms import as_fraction

    parts = given.replace(";", ",").split(",") if isinstance(given, str) else [str(p) for p in given]
    parts = tuple(part.strip() for part in parts if part.strip())
    if not parts:
        raise field_error(name, "needs at least one exponent")
    for part in parts:
        try:
            value = as_fraction(part)
        except (ValueError, ZeroDivisionError):
            raise field_error(name, f"{part!r} is not a number or fraction like 1/2") from None
        if value < 0:
            raise field_error(name, f"{part!r} is negative; exponents must be >= 0")
    return parts


def check_formula(text: str, params: list[str] | None) -> None:
    """Parse the cost formula (known variables when the parameters are named) and try it on typical
    values, so `T/0` fails before any reading rather than after it."""
    from extradeep.analysis.cost import cost_variables
    from extradeep.analysis.expression import parse_expression

    try:
        expr = parse_expression(text, None if params is None else cost_variables(params))
    except InputError as exc:  # the parser says "formula"; the option is cost_formula
        raise field_error("cost_formula", exc.problem) from None
    if not set(expr.variables) <= cost_variables(params or []):
        return  # a name that may be a parameter of the inputs: checked (and named if unknown) once they are read
    values = {name: 3600.0 if name == "T" else 5.5 for name in expr.variables}
    if (expr(**values) < 0).any():
        raise field_error("cost_formula", f"{text!r} gives a negative cost")
