"""The tokens of ``--where`` (``where``): numbers, names, operators, and one-line errors."""

from __future__ import annotations

import re
from dataclasses import dataclass

from expcli.errors import ConfigError, clipped, printable, quoted

__all__ = ["Token", "tokenize", "where_error"]

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
      | (?P<name>infos/[A-Za-z0-9_/.\-]*|[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op><=|>=|==|!=|[<>+\-*/()])
    """,
    re.VERBOSE,
)
_LETTER = re.compile(r"[A-Za-z_]")
_MISTAKES = {
    "&&": "write 'and'",
    "||": "write 'or'",
    "&": "write 'and'",
    "|": "write 'or'",
    "!": "write 'not', or '!=' to compare",
    "=": "compare with '=='",
}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "number", "name", "op" or "end"
    text: str
    start: int  # offset in the text; messages say ``start + 1``, the column


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise where_error(text, _mistake(text, at))
        kind = match.lastgroup
        if kind == "number" and _LETTER.match(text, match.end()):
            end = match.end()
            while end < len(text) and (text[end].isalnum() or text[end] in "_."):
                end += 1
            raise where_error(text, f"{quoted(text[at:end])} at column {at + 1} is not a number")
        if kind in ("number", "name", "op"):
            tokens.append(Token(kind, match.group(), at))
        at = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


def _mistake(text: str, at: int) -> str:
    for wrong, fix in _MISTAKES.items():
        if text.startswith(wrong, at):
            return f"{quoted(wrong)} at column {at + 1}: {fix}"
    return f"unexpected character {quoted(text[at])} at column {at + 1}"


def where_error(text: str, what: str) -> ConfigError:
    """``--where: <what>; in: <text>``, on one line whatever the text holds."""
    shown = printable(clipped(re.sub(r"\s", " ", text)))  # one character each: columns match
    return ConfigError(f"--where: {what}; in: {shown}" if shown.strip() else f"--where: {what}")
