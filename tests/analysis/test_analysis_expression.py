import numpy as np
import pytest

from extradeep.analysis.expression import parse_expression
from extradeep.errors import InputError

VARS = {"T", "ranks", "gpus", "nodes", "batch"}


def test_arithmetic_matches_numpy_elementwise():
    expr = parse_expression("T / 3600 * gpus * 2.5 + nodes * 0.1 - -1", VARS)
    T = np.array([3600.0, 7200.0])
    got = expr(T=T, gpus=np.array([4, 8]), nodes=np.array([1, 2]), ranks=0, batch=0)
    np.testing.assert_allclose(got, T / 3600 * np.array([4, 8]) * 2.5 + np.array([1, 2]) * 0.1 + 1)
    assert expr.variables == {"T", "gpus", "nodes"}


def test_functions_and_power():
    expr = parse_expression("max(ceil(ranks / 4), 1) * min(T, 100) + floor(2.7) ** 2", VARS)
    got = expr(ranks=np.array([1, 5, 8]), T=np.array([50.0, 500.0, 100.0]))
    np.testing.assert_allclose(got, [50 + 4, 2 * 100 + 4, 2 * 100 + 4])


def test_scalar_inputs_give_scalar_result():
    assert float(parse_expression("2 * T", VARS)(T=3)) == 6.0


@pytest.mark.parametrize(
    "text, words",
    [
        ("__import__('os').system('true')", "calling"),
        ("T.__class__", "attribute"),
        ("().__class__.__bases__", "attribute"),
        ("open('x')", "calling"),
        ("exit()", "calling"),
        ("lambda: 1", "Lambda"),
        ("[x for x in range(9)]", "ListComp"),
        ("{1: 2}", "Dict"),
        ("'abc'", "constant"),
        ("T if T else 1", "IfExp"),
        ("T < 1", "Compare"),
        ("T and 1", "BoolOp"),
        ("2 ** 9999", "exponent"),
        ("T ** 10 ** 10", "chained"),
        ("1e400", "out of range"),
        ("True + 1", "constant"),
        ("secret", "unknown variable"),
        ("min(T)", "at least 2"),
        ("ceil(T, 2)", "takes 1"),
        ("max(*T)", "starred"),
        ("T +", "not a valid formula"),
        ("", "empty"),
        ("1+" * 400 + "1", "characters long"),
        ("-" * 300 + "1", "too complex"),
        ("T // 2", "BinOp"),
        ("T % 2", "BinOp"),
        ("T @ T", "BinOp"),
        ("~T", "UnaryOp"),
        ("(T := 3)", "NamedExpr"),
    ],
)
def test_hostile_or_invalid_input_gives_one_line_input_error(text, words):
    with pytest.raises(InputError) as info:
        parse_expression(text, VARS)
    message = str(info.value)
    assert "\n" not in message and message.startswith("formula:")
    assert words in message


def test_division_by_zero_and_overflow_are_reported_not_returned():
    with pytest.raises(InputError, match="non-finite"):
        parse_expression("T / (ranks - 2)", VARS)(T=1.0, ranks=np.array([1, 2]))
    with pytest.raises(InputError, match="non-finite"):
        parse_expression("ranks ** T", VARS)(T=1e6, ranks=10)


def test_missing_variable_value_is_reported():
    with pytest.raises(InputError, match="needs values for ranks"):
        parse_expression("T * ranks", VARS)(T=1)


def test_deep_parentheses_are_fine_within_the_length_limit():
    assert float(parse_expression("(" * 100 + "T" + ")" * 100, VARS)(T=2)) == 2.0
