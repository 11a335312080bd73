"""``--where``: a small condition language over per-episode fields, parsed, never run as Python.

``expcli filter --where 'return >= 200 and not truncated'`` keeps the episodes for which the
condition holds. A tokenizer and a recursive-descent parser read the text into a small tree,
checked against the table's fields and for types (numbers and conditions), which numpy then
evaluates over the whole episode table at once: one boolean per episode.

The grammar, loosest binding first, as Python's::

    condition  := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)*
    sum        := product (("+" | "-") product)*
    product    := unary (("*" | "/") unary)*
    unary      := "-" unary | atom
    atom       := NUMBER | "inf" | "true" | "false" | FIELD | "(" condition ")"

A field is a name of the table: ``return``, ``length``, ``env``, ``index``, the conditions
``terminated``, ``truncated`` and ``complete``, and ``infos/<name>`` (letters, digits and
``_ / . -``; so ``infos/x-1`` is a name, and ``infos/x - 1`` a subtraction). Chained
comparisons mean "and": ``100 <= length < 400``. ``and``, ``or`` and ``not`` take conditions,
``< <= > >=`` and arithmetic take numbers, ``==`` and ``!=`` two of a kind.

Arithmetic runs in float64 with numpy's rules (``x / 0`` is ``inf`` or ``nan``) and never
warns. A comparison with NaN is false, ``!=`` included (unlike IEEE), so an episode without a
value for a field never matches a condition on it; ``nan`` is not a literal.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from expcli.errors import ConfigError, InvalidValueError, quoted
from expcli.shaping._table import did_you_mean, episode_count, field_list, numbers
from expcli.shaping._where_tokens import Token, tokenize, where_error

__all__ = ["CONDITION_FIELDS", "Expression", "parse_where"]

CONDITION_FIELDS = frozenset({"terminated", "truncated", "complete"})
"""The fields that are conditions (booleans); every other field is a number."""

_MAX_DEPTH = 50  # nested parentheses, ``not`` and minus signs: deeper is refused, not a crash

_Kind = Literal["number", "condition"]
_Value = np.ndarray | np.generic | float | bool

_KEYWORDS = ("and", "or", "not", "true", "false", "inf")
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass(frozen=True, slots=True)
class _Node:
    kind: _Kind
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Constant(_Node):
    value: float | bool


@dataclass(frozen=True, slots=True)
class _Field(_Node):
    name: str


@dataclass(frozen=True, slots=True)
class _Negative(_Node):
    operand: _Node


@dataclass(frozen=True, slots=True)
class _Arithmetic(_Node):
    """``first (op operand)*``, folded left to right: a long sum is a list, not a deep tree."""

    first: _Node
    rest: tuple[tuple[str, _Node], ...]


@dataclass(frozen=True, slots=True)
class _Comparison(_Node):
    operands: tuple[_Node, ...]
    operators: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Not(_Node):
    operand: _Node


@dataclass(frozen=True, slots=True)
class _Logic(_Node):
    operator: Literal["and", "or"]
    operands: tuple[_Node, ...]


class Expression:
    """A parsed ``--where`` condition; :func:`parse_where` makes one.

    Attributes:
        text: The condition as the user wrote it.
        fields: The fields it reads, so that a caller builds only those columns.
    """

    __slots__ = ("_conditions", "_root", "fields", "text")

    def __init__(
        self, text: str, root: _Node, fields: frozenset[str], conditions: frozenset[str]
    ) -> None:
        self.text = text
        self.fields = fields
        self._root = root
        self._conditions = conditions

    def evaluate(self, table: Mapping[str, np.ndarray]) -> npt.NDArray[np.bool_]:
        """Which episodes of ``table`` meet the condition: a new bool array, one per episode.

        ``table`` maps field names to 1-d arrays of one length; it needs the columns in
        :attr:`fields` (others are ignored but their lengths must agree). Conditions may be
        bool or integer columns (non-zero is true); numbers are read as float64.

        Raises:
            InvalidValueError: A column is missing, not 1-d, of another length, or of a
                dtype that does not fit its field.
        """
        count = episode_count(table)
        columns = {name: _read(table, name, name in self._conditions) for name in self.fields}
        with np.errstate(all="ignore"):
            value = _evaluate(self._root, columns)
        return np.broadcast_to(np.asarray(value, dtype=bool), (count,)).copy()

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def parse_where(
    text: str, fields: Collection[str], *, conditions: Collection[str] = CONDITION_FIELDS
) -> Expression:
    """Parse the ``--where`` condition ``text`` over the episode table's ``fields``.

    Args:
        text: The condition, e.g. ``"return >= 200 and not truncated"``.
        fields: The names the table has (``infos/<name>`` included); any other name is an
            error here, before a column is read.
        conditions: Which of the fields are conditions (booleans); the rest are numbers.

    Raises:
        ConfigError: The text is not a condition over ``fields``; the one-line message
            names the column (1-based) and the token at fault.
    """
    parser = _Parser(text, frozenset(fields), frozenset(conditions))
    root = parser.parse()
    used = frozenset(parser.used)
    return Expression(text, root, used, used & frozenset(conditions))


def _read(table: Mapping[str, np.ndarray], name: str, condition: bool) -> np.ndarray:
    if not condition:
        return numbers(table, name).astype(np.float64, copy=False)
    column = np.asarray(numbers(table, name))
    if column.dtype.kind == "b":
        return column
    if column.dtype.kind in "iu":
        return column.astype(bool)
    raise InvalidValueError(
        f"episode table column {quoted(name)} holds {column.dtype}, expected bools"
    )


_ARITHMETIC: dict[str, Callable[[_Value, _Value], _Value]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
}
_ORDER: dict[str, Callable[[_Value, _Value], _Value]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": lambda a, b: np.less(a, b) | np.greater(a, b),  # false with NaN, as the rest
}


def _evaluate(node: _Node, columns: Mapping[str, np.ndarray]) -> _Value:
    """The value of ``node``: an array per episode, or a scalar when it reads no field."""
    match node:
        case _Constant(value=value):
            return value
        case _Field(name=name):
            return columns[name]
        case _Negative(operand=operand):
            return np.negative(_evaluate(operand, columns))
        case _Arithmetic(first=first, rest=rest):
            total = _evaluate(first, columns)
            for operator, operand in rest:
                total = _ARITHMETIC[operator](total, _evaluate(operand, columns))
            return total
        case _Comparison(operands=operands, operators=operators):
            values = [_evaluate(operand, columns) for operand in operands]
            result: _Value = True
            for i, operator in enumerate(operators):
                a, b = values[i], values[i + 1]
                if operands[i].kind == "condition" and operator == "!=":
                    met = np.not_equal(a, b)
                else:
                    met = _ORDER[operator](a, b)
                result = np.logical_and(result, met)
            return result
        case _Not(operand=operand):
            return np.logical_not(_evaluate(operand, columns))
        case _Logic(operator=operator, operands=operands):
            combine = np.logical_and if operator == "and" else np.logical_or
            result = _evaluate(operands[0], columns)
            for operand in operands[1:]:
                result = combine(result, _evaluate(operand, columns))
            return result
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


class _Parser:
    """Recursive descent over the tokens, one method per level of the grammar."""

    def __init__(self, text: str, fields: frozenset[str], conditions: frozenset[str]) -> None:
        self.text = text
        self.fields = fields
        self.conditions = conditions
        self.tokens = tokenize(text)
        self.at = 0
        self.depth = 0
        self.used: set[str] = set()

    def parse(self) -> _Node:
        if self.tokens[0].kind == "end":
            raise self.error("empty condition; write one such as 'return >= 200'")
        root = self.condition()
        token = self.peek()
        if token.text == ")":
            raise self.error(f"unmatched ')' at column {token.start + 1}")
        if token.text.lower() in _KEYWORDS and token.text not in _KEYWORDS:
            raise self.error(self.lowercase(token.text, token.start))
        if token.kind != "end":
            raise self.error(
                f"expected an operator at column {token.start + 1}, got {quoted(token.text)}"
            )
        return self.require(root, "condition")

    # the grammar, loosest first

    def condition(self) -> _Node:
        return self.logic("or", self.conjunction)

    def conjunction(self) -> _Node:
        return self.logic("and", self.negation)

    def logic(self, keyword: Literal["and", "or"], operand: Callable[[], _Node]) -> _Node:
        operands = [operand()]
        while self.peek().text == keyword and self.peek().kind == "name":
            self.advance()
            operands.append(operand())
        if len(operands) == 1:
            return operands[0]
        checked = tuple(self.require(o, "condition") for o in operands)
        return _Logic("condition", checked[0].start, checked[-1].end, keyword, checked)

    def negation(self) -> _Node:
        return self.prefix("not", "condition", self.negation, self.comparison, _Not)

    def comparison(self) -> _Node:
        operands = [self.arithmetic(self.product, ("+", "-"))]
        operators: list[Token] = []
        while self.peek().kind == "op" and self.peek().text in _COMPARISONS:
            operators.append(self.advance())
            operands.append(self.arithmetic(self.product, ("+", "-")))
        if not operators:
            return operands[0]
        for i, token in enumerate(operators):
            left, right = operands[i], operands[i + 1]
            if token.text in ("==", "!=") and left.kind != right.kind:
                raise self.error(
                    f"{quoted(token.text)} at column {token.start + 1} compares a {left.kind} "
                    f"with a {right.kind}"
                )
            if token.text not in ("==", "!="):
                self.require(left, "number")
                self.require(right, "number")
        return _Comparison(
            "condition",
            operands[0].start,
            operands[-1].end,
            tuple(operands),
            tuple(t.text for t in operators),
        )

    def product(self) -> _Node:
        return self.arithmetic(self.unary, ("*", "/"))

    def arithmetic(self, operand: Callable[[], _Node], operators: tuple[str, ...]) -> _Node:
        first = operand()
        rest: list[tuple[str, _Node]] = []
        while self.peek().kind == "op" and self.peek().text in operators:
            operator = self.advance().text
            rest.append((operator, self.require(operand(), "number")))
        if not rest:
            return first
        self.require(first, "number")
        return _Arithmetic("number", first.start, rest[-1][1].end, first, tuple(rest))

    def unary(self) -> _Node:
        return self.prefix("-", "number", self.unary, self.atom, _Negative)

    def prefix(
        self,
        sign: str,
        kind: _Kind,
        operand: Callable[[], _Node],
        otherwise: Callable[[], _Node],
        node: Callable[[_Kind, int, int, _Node], _Node],
    ) -> _Node:
        """``sign operand`` (``not x``, ``-x``) if ``sign`` comes next, else ``otherwise``."""
        token = self.peek()
        if token.text != sign:  # no field is named "not": the text is the keyword
            return otherwise()
        self.advance()
        self.enter(token)
        inner = self.require(operand(), kind)
        self.depth -= 1
        return node(kind, token.start, inner.end, inner)

    def atom(self) -> _Node:
        token = self.peek()
        if token.kind == "end":
            raise self.error(self.expected_value())
        if token.kind == "number":
            self.advance()
            return _Constant(
                "number", token.start, token.start + len(token.text), float(token.text)
            )
        if token.text == "(":
            self.advance()
            self.enter(token)
            inner = self.condition()
            self.depth -= 1
            closing = self.peek()
            if closing.kind == "end":
                raise self.error(f"'(' at column {token.start + 1} is never closed")
            if closing.text != ")":
                raise self.error(
                    f"expected ')' or an operator at column {closing.start + 1}, "
                    f"got {quoted(closing.text)}"
                )
            self.advance()
            return inner
        if token.kind == "name" and token.text not in ("and", "or", "not"):
            self.advance()
            return self.name(token)
        raise self.error(f"expected a value at column {token.start + 1}, got {quoted(token.text)}")

    def name(self, token: Token) -> _Node:
        name, start, end = token.text, token.start, token.start + len(token.text)
        if name in ("true", "false"):
            return _Constant("condition", start, end, name == "true")
        if name == "inf":
            return _Constant("number", start, end, float("inf"))
        if name == "nan":
            raise self.error(
                f"'nan' at column {start + 1} is not a value: a comparison with NaN is false"
            )
        if name in self.fields:
            self.used.add(name)
            kind: _Kind = "condition" if name in self.conditions else "number"
            return _Field(kind, start, end, name)
        if name.lower() in _KEYWORDS:
            raise self.error(self.lowercase(name, start))
        raise self.error(
            f"unknown field {quoted(name)} at column {start + 1}{self.name_hint(name)} "
            f"({field_list(self.fields)})"
        )

    def name_hint(self, name: str) -> str:
        """``infos/x-1`` that meant ``infos/x - 1``: say so, else the closest field."""
        prefixes = [f for f in self.fields if name.startswith(f) and name[len(f) : len(f) + 1]]
        for field in sorted(prefixes, key=len, reverse=True):
            sign = name[len(field)]
            if sign in "-/":
                spaced = f"{field} {sign} {name[len(field) + 1 :]}"
                return f"; put spaces around {quoted(sign)} to compute: {quoted(spaced)}"
        return did_you_mean(name, self.fields)

    # helpers

    def peek(self) -> Token:
        return self.tokens[self.at]

    def advance(self) -> Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def enter(self, token: Token) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error(f"nested deeper than {_MAX_DEPTH} levels at column {token.start + 1}")

    def lowercase(self, name: str, start: int) -> str:
        return (
            f"{quoted(name)} at column {start + 1}: keywords are lowercase ({quoted(name.lower())})"
        )

    def expected_value(self) -> str:
        before = self.tokens[self.at - 1]  # the text ended: the token it ended after
        return f"expected a value after {quoted(before.text)} at column {before.start + 1}"

    def require(self, node: _Node, kind: _Kind) -> _Node:
        if node.kind != kind:
            other = "number" if kind == "condition" else "condition"
            raise self.error(
                f"{quoted(self.text[node.start : node.end])} at column {node.start + 1} is a "
                f"{other}, not a {kind}"
            )
        return node

    def error(self, what: str) -> ConfigError:
        return where_error(self.text, what)
