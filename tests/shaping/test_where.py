"""``--where`` against numpy: random conditions, written as text and computed directly, agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from expcli.errors import ConfigError, InvalidValueError
from expcli.shaping.where import parse_where

Table = dict[str, np.ndarray]
NUMBERS = ("return", "length", "env", "index", "infos/a.b-c")
CONDITIONS = ("terminated", "truncated", "complete")
FIELDS = (*NUMBERS, *CONDITIONS)
LITERALS = ("0", "1", "2.5", ".5", "3.", "1e3", "1E-2", "inf")

# (text, precedence level of its top operator, the numpy computation, fields it reads);
# the levels, loosest first: or 1, and 2, not 3, comparison 4, + - 5, * / 6, minus 7, atom 8
Expr = tuple[str, int, Callable[[Table], Any], frozenset[str]]


def _wrap(expr: Expr, level: int) -> str:
    return expr[0] if expr[1] >= level else f"({expr[0]})"


def _maybe_parens(draw: st.DrawFn, expr: Expr) -> Expr:
    return (f"( {expr[0]} )", 8, expr[2], expr[3]) if draw(st.booleans()) else expr


def _number_at(t: Table, name: str) -> np.ndarray:
    return t[name].astype(np.float64)


@st.composite
def numbers(draw: st.DrawFn, depth: int = 3) -> Expr:
    kind = draw(st.integers(0, 3 if depth else 0))
    if kind == 0:
        if draw(st.booleans()):
            name = draw(st.sampled_from(NUMBERS))
            return name, 8, lambda t: _number_at(t, name), frozenset([name])
        text = draw(st.sampled_from(LITERALS))
        return text, 8, lambda t: np.float64(text), frozenset()
    if kind == 1:
        inner = draw(numbers(depth - 1))
        return f"-{_wrap(inner, 7)}", 7, lambda t: np.negative(inner[2](t)), inner[3]
    left, right = draw(numbers(depth - 1)), draw(numbers(depth - 1))
    op = draw(st.sampled_from(["+", "-"] if kind == 2 else ["*", "/"]))
    ufunc = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op]
    level = 5 if kind == 2 else 6
    expr: Expr = (
        f"{_wrap(left, level)} {op} {_wrap(right, level + 1)}",
        level,
        lambda t: ufunc(left[2](t), right[2](t)),
        left[3] | right[3],
    )
    return _maybe_parens(draw, expr)


ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": lambda a, b: ~np.isnan(a) & ~np.isnan(b) & np.not_equal(a, b),
}


@st.composite
def conditions(draw: st.DrawFn, depth: int = 3) -> Expr:
    kind = draw(st.integers(0, 4 if depth else 1))
    expr: Expr
    if kind == 0:
        if draw(st.booleans()):
            name = draw(st.sampled_from(CONDITIONS))
            return name, 8, lambda t: t[name].astype(bool), frozenset([name])
        text = draw(st.sampled_from(["true", "false"]))
        return text, 8, lambda t: np.bool_(text == "true"), frozenset()
    if kind == 1:  # a comparison, chained or not
        operands = [draw(numbers(min(depth, 2))) for _ in range(draw(st.integers(2, 3)))]
        ops = [draw(st.sampled_from(sorted(ORDER))) for _ in operands[1:]]
        text = f" {ops[0]} ".join([_wrap(operands[0], 5), _wrap(operands[1], 5)])
        if len(ops) == 2:
            text += f" {ops[1]} {_wrap(operands[2], 5)}"

        def compare(t: Table) -> Any:
            values = [o[2](t) for o in operands]
            met = [ORDER[op](a, b) for op, a, b in zip(ops, values, values[1:], strict=False)]
            return np.logical_and(met[0], met[1]) if len(met) > 1 else met[0]

        expr = (text, 4, compare, frozenset().union(*(o[3] for o in operands)))
    elif kind == 2:
        inner = draw(conditions(depth - 1))
        expr = (f"not {_wrap(inner, 3)}", 3, lambda t: np.logical_not(inner[2](t)), inner[3])
    elif kind == 3:
        left, right = draw(conditions(depth - 1)), draw(conditions(depth - 1))
        word = draw(st.sampled_from(["and", "or"]))
        level = 2 if word == "and" else 1
        combine = np.logical_and if word == "and" else np.logical_or
        expr = (
            f"{_wrap(left, level)} {word} {_wrap(right, level + 1)}",
            level,
            lambda t: combine(left[2](t), right[2](t)),
            left[3] | right[3],
        )
    else:  # two conditions compared
        left, right = draw(conditions(depth - 1)), draw(conditions(depth - 1))
        op = draw(st.sampled_from(["==", "!="]))
        same = np.equal if op == "==" else np.not_equal
        expr = (
            f"{_wrap(left, 5)} {op} {_wrap(right, 5)}",
            4,
            lambda t: same(left[2](t), right[2](t)),
            left[3] | right[3],
        )
    return _maybe_parens(draw, expr)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    n = draw(st.integers(0, 12))
    floats = st.one_of(
        st.integers(-3, 3).map(float), st.sampled_from([np.nan, np.inf, -np.inf, 0.5, 1e3])
    )
    return {
        "return": draw(arrays(np.float64, n, elements=floats)),
        "infos/a.b-c": draw(arrays(np.float32, n, elements=floats)),
        "length": draw(arrays(np.int64, n, elements=st.integers(0, 5))),
        "env": draw(arrays(np.int32, n, elements=st.integers(0, 3))),
        "index": np.arange(n),
        "terminated": draw(arrays(bool, n)),
        "truncated": draw(arrays(bool, n)),
        "complete": draw(arrays(np.uint8, n, elements=st.integers(0, 1))),  # 0/1 reads as bool
    }


@settings(max_examples=100, deadline=None)
@given(expr=conditions(), table=tables())
def test_random_conditions_agree_with_numpy(expr: Expr, table: Table) -> None:
    text, _, compute, fields = expr
    parsed = parse_where(text, FIELDS)
    assert parsed.fields == fields
    with np.errstate(all="ignore"):
        expected = np.broadcast_to(compute(table), len(table["index"]))
    mask = parsed.evaluate(table)
    assert mask.dtype == bool and mask.shape == (len(table["index"]),)
    np.testing.assert_array_equal(mask, expected, err_msg=text)


def test_precedence_and_chains_read_as_python() -> None:
    table = {"return": np.array([1.0, 5.0, 9.0]), "length": np.array([1, 2, 3])}
    cases = {
        "return - 5 - 3 > 0": [False, False, True],  # (5 - 5) - 3, not 5 - (5 - 3)
        "2 * return - 1 > 8.5": [False, True, True],  # (2 * 5) - 1, not 2 * (5 - 1)
        "-return * -1 == return": [True, True, True],
        "1 < return < 9": [False, True, False],
        "1 < return <= 9 != 5": [False, True, True],
        "1 < return <= 9 == 5": [False, False, False],
        "not return > 4 and length > 1": [False, False, False],
        "return < 2 or return > 8 and length < 3": [True, False, False],
        "return / length > 2": [False, True, True],
    }
    for text, expected in cases.items():
        assert parse_where(text, table).evaluate(table).tolist() == expected, text


def test_nan_never_matches_and_division_by_zero_does_not_warn() -> None:
    table = {"return": np.array([np.nan, 0.0, -1.0, 2.0])}
    assert parse_where("return != 1", table).evaluate(table).tolist() == [False, True, True, True]
    assert parse_where("return / 0 > 0", table).evaluate(table).tolist() == [0, 0, 0, 1]
    assert parse_where("1 / 0 == inf", table).evaluate(table).tolist() == [1, 1, 1, 1]
    assert parse_where("-(return / 0) == -inf", table).evaluate(table).tolist() == [0, 0, 0, 1]


def test_reads_only_its_fields_and_checks_the_columns_it_reads() -> None:
    parsed = parse_where("infos/x.y >= 1 and terminated", ["return", "infos/x.y", "terminated"])
    assert parsed.fields == {"infos/x.y", "terminated"}
    table = {"infos/x.y": np.array([1.0, 2.0, 0.0]), "terminated": np.array([1, 0, 1])}
    assert parsed.evaluate(table).tolist() == [True, False, False]
    with pytest.raises(InvalidValueError, match="no column 'terminated'"):
        parsed.evaluate({"infos/x.y": np.zeros(3)})
    with pytest.raises(InvalidValueError, match="differ in length"):
        parsed.evaluate({**table, "terminated": np.ones(4, bool)})
    with pytest.raises(InvalidValueError, match="'terminated' holds float64, expected bools"):
        parsed.evaluate({**table, "terminated": np.ones(3)})
    with pytest.raises(InvalidValueError, match="'infos/x.y' holds <U1, expected numbers"):
        parsed.evaluate({**table, "infos/x.y": np.array(["a", "b", "c"])})


def test_a_constant_condition_covers_every_episode() -> None:
    table = {"return": np.zeros(4)}
    assert parse_where("true", table).evaluate(table).tolist() == [True] * 4
    assert parse_where("2 < 1", table).evaluate(table).tolist() == [False] * 4
    assert parse_where("true", table).evaluate({"return": np.zeros(0)}).shape == (0,)


def test_the_caller_says_which_fields_are_conditions() -> None:
    table = {"ok": np.array([True, False]), "return": np.array([1.0, 2.0])}
    parsed = parse_where("ok and return > 0", table, conditions={"ok"})
    assert parsed.evaluate(table).tolist() == [True, False]
    with pytest.raises(ConfigError, match="'ok' at column 1 is a number, not a condition"):
        parse_where("ok", table, conditions=())


ALL = [*FIELDS, "infos/speed"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "retrun >= 200",
            "unknown field 'retrun' at column 1; did you mean 'return'? (fields: "
            "return, length, terminated, truncated, env, index, complete, infos/a.b-c, infos/speed)"
            "; in: retrun >= 200",
        ),
        ("return >= ", "expected a value after '>=' at column 8; in: return >= "),
        ("return > 1 and", "expected a value after 'and' at column 12"),
        ("return > * 2", "expected a value at column 10, got '*'"),
        ("return > 1 and or", "expected a value at column 16, got 'or'"),
        ("return", "'return' at column 1 is a number, not a condition"),
        ("terminated and return + 1", "'return + 1' at column 16 is a number, not a condition"),
        ("not length", "'length' at column 5 is a number, not a condition"),
        ("terminated > 0", "'terminated' at column 1 is a condition, not a number"),
        ("-truncated < 1", "'truncated' at column 2 is a condition, not a number"),
        ("terminated == 1", "'==' at column 12 compares a condition with a number"),
        ("(return > 1", "'(' at column 1 is never closed"),
        ("return > 1)", "unmatched ')' at column 11"),
        ("return 200", "expected an operator at column 8, got '200'"),
        ("(return > 1 2)", "expected ')' or an operator at column 13, got '2'"),
        ("return = 2", "'=' at column 8: compare with '=='"),
        ("return > 1 && true", "'&&' at column 12: write 'and'"),
        ("return > 1 || true", "'||' at column 12: write 'or'"),
        ("!terminated", "'!' at column 1: write 'not'"),
        ("return ≥ 1", "unexpected character '≥' at column 8"),
        ("return >= nan", "'nan' at column 11 is not a value"),
        ("return > 1e", "'1e' at column 10 is not a number"),
        ("return > 12abc", "'12abc' at column 10 is not a number"),
        ("Return > 1", "unknown field 'Return' at column 1; did you mean 'return'?"),
        ("return > 1 AND true", "'AND' at column 12: keywords are lowercase ('and')"),
        ("True", "'True' at column 1: keywords are lowercase ('true')"),
        ("infos/speed-1 > 0", "put spaces around '-' to compute: 'infos/speed - 1'"),
        ("infos/speed/2 > 0", "put spaces around '/' to compute: 'infos/speed / 2'"),
        ("__import__('os')", 'unexpected character "\'" at column 12'),
        ("", "--where: empty condition"),
        ("(" * 60 + "true" + ")" * 60, "nested deeper than 50 levels at column 51"),
        ("-" * 60 + "1 > 0", "nested deeper than 50 levels at column 51"),
    ],
)
def test_errors_name_the_column_and_the_token(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_where(text, ALL)
    assert str(caught.value).startswith("--where: ")
    assert message in str(caught.value)
    assert caught.value.exit_code == 2


def test_an_error_is_one_line_whatever_the_text() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_where("return >=\n\t200 and", ALL)
    assert str(caught.value) == (
        "--where: expected a value after 'and' at column 16; in: return >=  200 and"
    )
