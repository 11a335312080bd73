"""What the selectors ask of an episode table: its length, a column, and its field names.

An episode table maps a field name to a 1-d array with one entry per episode, all of one
length. The verbs build it; the selectors only read it.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

import numpy as np

from expcli.errors import InvalidValueError

EPISODE_FIELDS = ("return", "length", "terminated", "truncated", "env", "index", "complete")
"""The fields every episode table has, in the order messages list them; ``infos/<name>`` follow."""

_LISTED = 30  # a message names this many fields at most


def episode_count(table: Mapping[str, np.ndarray]) -> int:
    """How many episodes ``table`` holds: the one length of its 1-d columns.

    Raises:
        InvalidValueError: The table has no column, a column is not 1-d, or lengths differ.
    """
    lengths: dict[int, str] = {}
    for name, column in table.items():
        if np.ndim(column) != 1:
            raise InvalidValueError(
                f"episode table column {name!r} has shape {np.shape(column)}, expected 1-d"
            )
        lengths.setdefault(len(column), name)
    if len(lengths) != 1:
        found = ", ".join(f"{name!r} {n}" for n, name in lengths.items())
        raise InvalidValueError(f"episode table columns differ in length ({found or 'no column'})")
    return next(iter(lengths))


def numbers(table: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """Column ``name`` as it is, checked to hold numbers (booleans count as 0 and 1).

    Raises:
        InvalidValueError: The table has no such column, or it holds no numbers.
    """
    column = np.asarray(_column(table, name))
    if column.dtype.kind not in "biuf":
        raise InvalidValueError(
            f"episode table column {name!r} holds {column.dtype}, expected numbers"
        )
    return column


def did_you_mean(name: str, fields: Collection[str]) -> str:
    """``; did you mean 'return'?`` for the field closest to ``name``, or nothing."""
    close = difflib.get_close_matches(name, list(fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def field_list(fields: Collection[str]) -> str:
    """``fields: return, length, ...``: the standard fields in their order, then the rest sorted."""
    rank = {name: i for i, name in enumerate(EPISODE_FIELDS)}
    ordered = sorted(fields, key=lambda f: (rank.get(f, len(rank)), f))
    more = len(ordered) - _LISTED
    shown = ", ".join(ordered[:_LISTED]) + (f" and {more} more" if more > 0 else "")
    return f"fields: {shown or 'none'}"


def _column(table: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    try:
        return table[name]
    except KeyError:
        raise InvalidValueError(f"the episode table has no column {name!r}") from None
