"""The safe expression evaluator: what it computes, what it refuses, and Optuna's constraint signs."""

from __future__ import annotations

import math

import pytest

from autotune.errors import AutotuneError
from autotune.expr import STRICT_EPSILON, Expression


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 // 2 + 7 % 2", 4),
        ("7 / 2", 3.5),
        ("2 ** 10", 1024),
        ("-x + +y", 1),
        ("x * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2", 2 * (64 * 32 + 32 * 128) * 2),
        ("min(x, y, 1) + max(x, y)", 4),
        ("abs(x - y) + log2(BLOCK_M) + ceil(2.1) + floor(2.9)", 1 + 6 + 3 + 2),
    ],
)
def test_arithmetic(text: str, expected: float) -> None:
    variables = {"x": 2, "y": 3, "BLOCK_M": 64, "BLOCK_K": 32, "BLOCK_N": 128}
    assert Expression(text).evaluate(variables) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x <= 3", True),
        ("x < 2", False),
        ("1 < x <= 2 < y", True),
        ("1 < x < 2", False),  # chained: both comparisons must hold
        ("x == 2 and y != 2", True),
        ("x > 5 or y >= 3", True),
        ("not x", False),
        ("precision == 'bf16'", True),
        ("True and x", 2),  # and/or return an operand, as in Python
        ("0 or y", 3),
    ],
)
def test_comparisons_and_logic(text: str, expected: object) -> None:
    assert Expression(text).evaluate({"x": 2, "y": 3, "precision": "bf16"}) == expected


def test_names_are_the_variables_not_the_functions() -> None:
    expression = Expression("max(num_stages, 2) * BLOCK_M <= limit")
    assert expression.names == frozenset({"num_stages", "BLOCK_M", "limit"})
    assert expression.text == "max(num_stages, 2) * BLOCK_M <= limit"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("__import__('os')", "__import__"),
        ("os.system('rm -rf /')", "os.system"),
        ("(1).__class__", "attribute access"),
        ("x.real", "attribute access"),
        ("lambda: 1", "lambda"),
        ("[x for x in y]", "comprehension"),
        ("{x: 1 for x in y}", "comprehension"),
        ("sum(x for x in y)", "sum"),
        ("x[0]", "subscript"),
        ("1 if x else 2", "conditional"),
        ("x in y", "'in'"),
        ("x | y", "'|'"),
        ("None", "None"),
        ("open('f')", "open"),
        ("min(x=1, y=2)", "keyword"),
        ("abs(1, 2)", "abs() takes 1"),
        ("1 +", "invalid syntax"),
        ("", "non-empty"),
    ],
)
def test_rejects_anything_outside_the_whitelist(text: str, named: str) -> None:
    with pytest.raises(AutotuneError, match="expression") as caught:
        Expression(text)
    assert named in str(caught.value)


def test_missing_name_is_named() -> None:
    with pytest.raises(AutotuneError, match="unknown name 'peak_mem_gib'"):
        Expression("peak_mem_gib <= 70").evaluate({"throughput": 1.0})


@pytest.mark.parametrize("text", ["1 / x", "log2(x)", "10 ** 10 ** 10", "'a' * 3", "'a' < 1", "(-8) ** 0.5"])
def test_math_errors_are_autotune_errors(text: str) -> None:
    with pytest.raises(AutotuneError, match="cannot be evaluated"):
        Expression(text).evaluate({"x": 0})


@pytest.mark.parametrize(
    ("text", "variables", "expected"),
    [
        ("peak_mem_gib <= 70", {"peak_mem_gib": 60.0}, -10.0),
        ("peak_mem_gib <= 70", {"peak_mem_gib": 72.5}, 2.5),
        ("peak_mem_gib <= 70", {"peak_mem_gib": 70}, 0.0),  # equality satisfies <=
        ("peak_mem_gib < 70", {"peak_mem_gib": 70}, STRICT_EPSILON),  # ... but violates <
        ("peak_mem_gib < 70", {"peak_mem_gib": 69}, -1.0),
        ("throughput >= 1000", {"throughput": 1200}, -200.0),
        ("throughput >= 1000", {"throughput": 900}, 100.0),
        ("throughput > 1000", {"throughput": 1000}, STRICT_EPSILON),
        ("70 >= peak_mem_gib", {"peak_mem_gib": 75}, 5.0),
        ("2 * a <= b + 1", {"a": 3, "b": 1}, 4.0),
        ("a == 1", {"a": 1}, 0.0),  # not an ordering: 0 when true, 1 when false
        ("a == 1", {"a": 2}, 1.0),
        ("0 < a <= 4", {"a": 5}, 1.0),  # chained: truthiness
        ("a <= 1 and b <= 1", {"a": 0, "b": 2}, 1.0),
        ("a <= 1", {"a": math.nan}, 1.0),  # NaN never satisfies
    ],
)
def test_violation_signs(text: str, variables: dict[str, float], expected: float) -> None:
    assert Expression(text).violation(variables) == pytest.approx(expected)


def test_violation_is_positive_exactly_when_the_expression_is_false() -> None:
    for text in ("x <= 3", "x < 3", "x >= 3", "x > 3", "x != 3"):
        expression = Expression(text)
        for x in (2, 3, 4, 2.5, 3.0):
            assert (expression.violation({"x": x}) > 0) == (not expression.evaluate({"x": x})), (text, x)


def test_expressions_compare_by_text() -> None:
    assert Expression(" x <= 1 ") == Expression("x <= 1")
    assert len({Expression("x <= 1"), Expression("x <= 1")}) == 1
