"""A small, safe arithmetic language for user cost formulas.

Formulas such as ``T/3600 * gpus * 2.5 + nodes * 0.1`` are parsed with :mod:`ast`, checked
against a whitelist (numbers, variables, ``+ - * / **``, unary minus, ``min max ceil floor``)
and compiled into a tree of NumPy closures. Nothing is ever passed to ``eval``/``exec`` or
compiled to Python code, so a formula can only do arithmetic on the variables it is given.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from extradeep.errors import InputError

MAX_LENGTH = 500
MAX_NODES = 200
MAX_CONSTANT_EXPONENT = 16.0
MAX_CONSTANT = 1e15

_BINARY = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Pow: np.power,
}
_FUNCTIONS: dict[str, tuple[Callable, int, int | None]] = {
    # name: (vectorised function, min args, max args)
    "min": (lambda *a: np.minimum.reduce(np.broadcast_arrays(*a)), 2, None),
    "max": (lambda *a: np.maximum.reduce(np.broadcast_arrays(*a)), 2, None),
    "ceil": (np.ceil, 1, 1),
    "floor": (np.floor, 1, 1),
}

Evaluator = Callable[[dict], np.ndarray]


@dataclass(frozen=True)
class Expression:
    """A parsed, validated formula; call it with arrays (or scalars) for its variables."""

    text: str
    variables: frozenset[str]
    _evaluate: Evaluator = field(repr=False, compare=False)

    def __call__(self, **values) -> np.ndarray:
        missing = sorted(self.variables - values.keys())
        if missing:
            raise InputError("formula", f"{self.text!r} needs values for {', '.join(missing)}")
        arrays = {k: np.asarray(v, dtype=float) for k, v in values.items()}
        with np.errstate(all="ignore"):
            result = np.asarray(self._evaluate(arrays), dtype=float)
        inputs_finite = all(np.all(np.isfinite(arrays[k])) for k in self.variables)
        if inputs_finite and not np.all(np.isfinite(result)):
            raise InputError("formula", f"{self.text!r} gives a non-finite value (division by zero or overflow)")
        return result


def parse_expression(text: str, variables: set[str] | frozenset[str] | None) -> Expression:
    """Parse ``text`` into an :class:`Expression` over the allowed ``variables`` (None: any
    plain name, to check a formula before the variables are known).

    Raises InputError (one line, naming the offending part) for anything outside the language.
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError("formula", "is empty")
    if len(text) > MAX_LENGTH:
        raise InputError("formula", f"is {len(text)} characters long; the limit is {MAX_LENGTH}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise InputError("formula", f"{text!r} is not a valid formula ({_reason(exc)})") from None
    n_nodes = sum(1 for _ in ast.walk(tree))
    if n_nodes > MAX_NODES:
        raise InputError("formula", f"{text!r} is too complex ({n_nodes} parts; limit {MAX_NODES})")
    used: set[str] = set()
    evaluate = _compile(tree.body, text, None if variables is None else frozenset(variables), used)
    return Expression(text=text.strip(), variables=frozenset(used), _evaluate=evaluate)


def _reason(exc: Exception) -> str:
    return getattr(exc, "msg", None) or type(exc).__name__


def _reject(text: str, what: str) -> InputError:
    return InputError(
        "formula", f"{text!r}: {what} is not allowed (only numbers, variables, + - * / **, min, max, ceil, floor)"
    )


def _compile(node: ast.AST, text: str, allowed: frozenset[str] | None, used: set[str]) -> Evaluator:
    if isinstance(node, ast.Constant):
        return _constant(node, text)
    if isinstance(node, ast.Name):
        if allowed is not None and node.id not in allowed:
            names = ", ".join(sorted(allowed))
            raise InputError("formula", f"{text!r}: unknown variable {node.id!r} (known: {names})")
        used.add(node.id)
        name = node.id
        return lambda env: env[name]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _compile(node.operand, text, allowed, used)
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        return lambda env: sign * operand(env)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        if isinstance(node.op, ast.Pow):
            _check_exponent(node.right, text)
        left = _compile(node.left, text, allowed, used)
        right = _compile(node.right, text, allowed, used)
        op = _BINARY[type(node.op)]
        return lambda env: op(left(env), right(env))
    if isinstance(node, ast.Call):
        return _call(node, text, allowed, used)
    raise _reject(text, _describe(node))


def _constant(node: ast.Constant, text: str) -> Evaluator:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _reject(text, f"the constant {value!r}")
    if not np.isfinite(float(value)) or abs(value) > MAX_CONSTANT:
        raise InputError("formula", f"{text!r}: the number {value!r} is out of range (|x| <= {MAX_CONSTANT:g})")
    constant = float(value)
    return lambda env: constant


def _check_exponent(node: ast.AST, text: str) -> None:
    # Constant exponents are bounded so `2**9999` is refused up front rather than overflowing.
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if abs(node.value) > MAX_CONSTANT_EXPONENT:
            raise InputError(
                "formula", f"{text!r}: exponent {node.value!r} is too large (|exponent| <= {MAX_CONSTANT_EXPONENT:g})"
            )
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        raise InputError("formula", f"{text!r}: chained powers (a ** b ** c) are not allowed")


def _call(node: ast.Call, text: str, allowed: frozenset[str] | None, used: set[str]) -> Evaluator:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        raise _reject(text, f"calling {_describe(node.func)}")
    name = node.func.id
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise _reject(text, f"keyword or starred arguments to {name}()")
    func, lo, hi = _FUNCTIONS[name]
    if len(node.args) < lo or (hi is not None and len(node.args) > hi):
        wanted = f"{lo}" if lo == hi else f"at least {lo}"
        raise InputError("formula", f"{text!r}: {name}() takes {wanted} argument(s), got {len(node.args)}")
    args = [_compile(a, text, allowed, used) for a in node.args]
    return lambda env: func(*(a(env) for a in args))


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r}"
    if isinstance(node, ast.Attribute):
        return f"attribute access '.{node.attr}'"
    if isinstance(node, ast.Constant):
        return f"the constant {node.value!r}"
    return f"'{type(node).__name__}'"
