"""Small, safe expressions for constraints and feasibility rules (``peak_mem_gib <= 70``).

The text is parsed with :mod:`ast` and only a whitelist of node types is accepted; evaluation
walks the tree itself, so no user text ever reaches ``eval`` or ``exec``. Allowed: numbers,
strings and booleans; variable names; ``+ - * / // % **``; unary ``- + not``; ``and``/``or``;
comparisons (chained too: ``0 < x <= 8``); and calls to ``min``, ``max``, ``abs``, ``log2``,
``ceil`` and ``floor``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from autotune.errors import AutotuneError

__all__ = ["FUNCTIONS", "Expression"]

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "log2": math.log2,
    "ceil": math.ceil,
    "floor": math.floor,
}
# (fewest, most) positional arguments of each function
_ARITY = {"min": (2, None), "max": (2, None), "abs": (1, 1), "log2": (1, 1), "ceil": (1, 1), "floor": (1, 1)}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
}  # fmt: skip
_MAX_BITS = 1 << 16  # an int power larger than this is an error: 10 ** 10 ** 10 would hang the process
# Returned by violation() for ``a < b`` when a == b: equality must count as violated (> 0).
STRICT_EPSILON = 1e-9


_CONSTRUCTS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "a subscript x[...]",
    ast.Lambda: "a lambda",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.IfExp: "a conditional expression (x if c else y)",
    ast.NamedExpr: "assignment (:=)",
    ast.List: "a list",
    ast.Tuple: "a tuple",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.JoinedStr: "an f-string",
    ast.Starred: "*unpacking",
}
_OTHER_OPERATORS: dict[type[ast.AST], str] = {
    ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
    ast.Invert: "~", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}  # fmt: skip


def _describe(node: ast.AST) -> str:
    """A human name for a disallowed construct: ``attribute access``, ``a lambda``, ``operator '|'``..."""
    if type(node) in _OTHER_OPERATORS:
        return f"operator {_OTHER_OPERATORS[type(node)]!r}"
    return _CONSTRUCTS.get(type(node), type(node).__name__)


class _Validator(ast.NodeVisitor):
    """Rejects every node outside the whitelist and collects the variable names."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names: set[str] = set()

    def fail(self, what: str, hint: str = "") -> AutotuneError:
        return AutotuneError(f"expression {self.text!r}: {what} is not allowed{hint}")

    def generic_visit(self, node: ast.AST) -> None:
        raise self.fail(_describe(node))

    def visit_Expression(self, node: ast.Expression) -> None:
        self.visit(node.body)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, bool | int | float | str):
            raise self.fail(f"constant {node.value!r}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__"):
            raise self.fail(f"name {node.id!r}")
        self.names.add(node.id)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if type(node.op) not in _BINARY:
            raise self.fail(_describe(node.op))
        self.visit(node.left)
        self.visit(node.right)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if type(node.op) not in _UNARY:
            raise self.fail(_describe(node.op))
        self.visit(node.operand)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        for value in node.values:
            self.visit(value)

    def visit_Compare(self, node: ast.Compare) -> None:
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise self.fail(_describe(op))
        self.visit(node.left)
        for comparator in node.comparators:
            self.visit(comparator)

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in FUNCTIONS:
            raise self.fail(f"calling {ast.unparse(node.func)!r}", f" (functions: {', '.join(FUNCTIONS)})")
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise self.fail(f"{name}() with keyword or * arguments")
        fewest, most = _ARITY[name]
        if len(node.args) < fewest or (most is not None and len(node.args) > most):
            takes = f"at least {fewest}" if most is None else str(fewest)
            raise AutotuneError(f"expression {self.text!r}: {name}() takes {takes} argument(s), got {len(node.args)}")
        for arg in node.args:
            self.visit(arg)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float)  # bool is an int: True + 1 == 2, as in Python


class Expression:
    """A parsed, validated expression.

    >>> Expression("2 * x <= 8").evaluate({"x": 3})
    True
    >>> Expression("peak_mem_gib <= 70").violation({"peak_mem_gib": 72.5})
    2.5
    """

    __slots__ = ("_tree", "names", "text")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise AutotuneError(f"expression {text!r}: expected a non-empty string")
        self.text = text.strip()
        try:
            self._tree = ast.parse(self.text, mode="eval")
        except SyntaxError as exc:
            detail = "" if exc.msg == "invalid syntax" else f" ({exc.msg})"
            raise AutotuneError(f"expression {self.text!r}: invalid syntax{detail}") from None
        except (ValueError, RecursionError) as exc:
            raise AutotuneError(f"expression {self.text!r}: cannot be parsed ({exc})") from None
        validator = _Validator(self.text)
        try:
            validator.visit(self._tree)
        except RecursionError:
            raise AutotuneError(f"expression {self.text[:40]!r}...: nested too deeply") from None
        self.names: frozenset[str] = frozenset(validator.names)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def evaluate(self, variables: Mapping[str, Any]) -> Any:
        """The value of the expression; a missing variable or a math error raises AutotuneError."""
        missing = sorted(self.names - variables.keys())
        if missing:
            have = ", ".join(sorted(variables)) or "none"
            raise AutotuneError(f"expression {self.text!r}: unknown name {missing[0]!r} (known: {have})")
        try:
            return self._eval(self._tree.body, variables)
        except (ArithmeticError, TypeError, ValueError, RecursionError) as exc:
            raise AutotuneError(f"expression {self.text!r} cannot be evaluated: {exc}") from None

    def violation(self, variables: Mapping[str, Any]) -> float:
        """Optuna's constraint value: ``<= 0`` when satisfied, ``> 0`` by how much it is violated.

        A single ``a <= b`` / ``a < b`` gives ``a - b`` and ``a >= b`` / ``a > b`` gives ``b - a``
        (a strict comparison that holds with equality gives :data:`STRICT_EPSILON`); any other
        expression gives 0.0 when true and 1.0 when false. NaN counts as violated (1.0).
        """
        holds = self.evaluate(variables)  # reports missing names and math errors
        body = self._tree.body
        if isinstance(body, ast.Compare) and len(body.ops) == 1 and type(body.ops[0]) in _ORDER_SIGN:
            left = self._eval(body.left, variables)
            right = self._eval(body.comparators[0], variables)
            if _is_number(left) and _is_number(right):
                return _signed_gap(type(body.ops[0]), float(left), float(right))
        return 0.0 if holds else 1.0

    def _eval(self, node: ast.expr, variables: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return variables[node.id]
        if isinstance(node, ast.BinOp):
            return self._binary(node, variables)
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, variables))
        if isinstance(node, ast.BoolOp):
            return self._boolean(node, variables)
        if isinstance(node, ast.Compare):
            return self._compare(node, variables)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # the validator saw to it
        return FUNCTIONS[node.func.id](*(self._eval(arg, variables) for arg in node.args))

    def _binary(self, node: ast.BinOp, variables: Mapping[str, Any]) -> Any:
        left, right = self._eval(node.left, variables), self._eval(node.right, variables)
        symbol = _SYMBOLS[type(node.op)]
        if not (_is_number(left) and _is_number(right)):
            raise TypeError(f"{symbol} needs numbers, got {left!r} {symbol} {right!r}")
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        return _BINARY[type(node.op)](left, right)

    def _boolean(self, node: ast.BoolOp, variables: Mapping[str, Any]) -> Any:
        value: Any = None
        for child in node.values:
            value = self._eval(child, variables)
            if isinstance(node.op, ast.And) != bool(value):  # `and` stops at false, `or` at true
                return value
        return value

    def _compare(self, node: ast.Compare, variables: Mapping[str, Any]) -> bool:
        left = self._eval(node.left, variables)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self._eval(comparator, variables)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True


def _power(base: int | float, exponent: int | float) -> int | float:
    if isinstance(base, int) and isinstance(exponent, int) and base.bit_length() * exponent > _MAX_BITS:
        raise ValueError(f"{base} ** {exponent} is too large")
    result = base**exponent
    if isinstance(result, complex):
        raise ValueError(f"{base} ** {exponent} is not a real number")
    return result


# +1: ``a <= b`` holds when a - b <= 0; -1: ``a >= b`` holds when b - a <= 0.
_ORDER_SIGN: dict[type[ast.cmpop], int] = {ast.Lt: 1, ast.LtE: 1, ast.Gt: -1, ast.GtE: -1}


def _signed_gap(op: type[ast.cmpop], left: float, right: float) -> float:
    gap = (left - right) * _ORDER_SIGN[op]
    if math.isnan(gap):
        return 1.0
    if gap == 0 and op in (ast.Lt, ast.Gt):
        return STRICT_EPSILON
    return gap
