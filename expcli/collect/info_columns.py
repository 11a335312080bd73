"""``--infos``: which info keys become ``infos/<key>`` tensors, and each step's columns.

An env's infos are whatever it likes, so nothing here may fail a run: a key is stored once
one of its values is a number (a bool, int or float, or a 0-d numeric array), however
many steps it was None, text or an array before; a value that is not a number is stored as
NaN, and an int too large for a float64 as +-inf. A key that cannot name a tensor (not a
string, empty, a ``.`` or empty part between ``/``, a NUL, or a name that another key's
tensor lies under) or that never held a number is skipped, and ``skipped()`` says why,
once, for the run's summary (``notes()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from expcli.spec import INFO_PREFIX

__all__ = ["InfoColumns"]

_BOOKKEEPING = frozenset(
    {"ended_state", "reset", "reset_info", "env_error", "final_obs", "final_info"}
)
"""Keys the env runners add themselves: never stored."""

_NUMBER_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


class InfoColumns:
    """The info keys of a run: those stored, in the order met, and those skipped."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._decided: set[Any] = set(_BOOKKEEPING)  # stored, or skipped for good
        self._unfit: dict[Any, str] = {}  # key -> why it cannot name a tensor
        self._not_numbers: dict[Any, set[str]] = {}  # key -> types seen, never a number
        self._huge: set[str] = set()  # stored keys that had a value too large for float64

    def new_keys(self, infos: Sequence[dict[Any, Any]]) -> list[str]:
        """The keys to store from this step on (first seen with a number now)."""
        decided, found = self._decided, []
        for info in infos:
            if not info.keys() - decided:
                continue
            for key, value in info.items():
                if key in decided:
                    continue
                if not _is_number(value):
                    self._not_numbers.setdefault(key, set()).add(_kind(value))
                    continue
                decided.add(key)
                self._not_numbers.pop(key, None)
                problem = _name_problem(key, self.keys)
                if problem is not None:
                    self._unfit[key] = problem
                    continue
                self.keys.append(key)
                found.append(key)
        return found

    def columns(self, infos: Sequence[dict[Any, Any]]) -> dict[str, np.ndarray]:
        """Each stored key's ``(N, 1)`` float64 column of this step (NaN where not a number)."""
        return {INFO_PREFIX + key: self._column(infos, key) for key in self.keys}

    def _column(self, infos: Sequence[dict[Any, Any]], key: str) -> np.ndarray:
        column = np.full((len(infos), 1), np.nan)
        for i, info in enumerate(infos):
            value = info.get(key)
            if value is not None and _is_number(value):
                try:
                    column[i, 0] = float(value)
                except OverflowError:  # an int beyond float64's range
                    column[i, 0] = np.inf if value > 0 else -np.inf
                    self._huge.add(key)
        return column

    def notes(self) -> dict[str, str]:
        """What became of the keys not stored as they came, by ``repr`` of the key."""
        notes = {repr(key): f"not stored: {why}" for key, why in self._unfit.items()}
        for key, kinds in self._not_numbers.items():
            notes[repr(key)] = f"not stored: never a number ({', '.join(sorted(kinds))})"
        for key in sorted(self._huge):
            notes[repr(key)] = "stored, as +-inf where a value was too large for a float64"
        return notes


def _is_number(value: Any) -> bool:
    if isinstance(value, _NUMBER_TYPES):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf"


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape}"
    return type(value).__name__


def _name_problem(key: Any, stored: list[str]) -> str | None:
    """Why ``infos/<key>`` cannot name a tensor in every format, or None."""
    if not isinstance(key, str):
        return f"a key of type {type(key).__name__}, not text"
    parts = key.split("/")
    if "\x00" in key or any(part in ("", ".") for part in parts):
        return "not a tensor name (empty, a '.' or empty part between '/', or a NUL)"
    for other in stored:
        if key.startswith(other + "/") or other.startswith(key + "/"):
            return f"its tensor and infos/{other} would lie inside one another"
    return None
