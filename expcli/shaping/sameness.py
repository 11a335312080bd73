"""Whether datasets can be merged: the same tensors and spaces, and the differences allowed.

Tensors (names, dtypes, feature shapes) and the observation and action spaces must match:
episodes of different shapes cannot share a tensor. The env id and its spec (kwargs, time
limit) may differ when the user says so (``Allowance``), and each such difference is
recorded in the output's lineage.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from expcli.errors import ConfigError, quoted
from expcli.formats.dataset import Dataset

__all__ = ["Allowance", "first_difference"]


class Allowance(StrEnum):
    """A difference between merged datasets that the user allows."""

    ENV_ID = "env-id"
    ENV_SPEC = "env-spec"

    @classmethod
    def parse(cls, value: str | Allowance) -> Allowance:
        """The allowance spelled ``value``."""
        try:
            return cls(value)
        except ValueError:
            raise ConfigError(
                f"--allow {quoted(value)}: expected one of {', '.join(a.value for a in cls)}"
            ) from None


class _Opened(Protocol):
    @property
    def path(self) -> Any: ...
    @property
    def dataset(self) -> Dataset: ...


_SPACES = ("observation_space", "action_space")
_ALLOWABLE = {"env_id": Allowance.ENV_ID, "env_spec": Allowance.ENV_SPEC}


def first_difference(first: _Opened, other: _Opened, allowed: set[Allowance]) -> list[str]:
    """The allowed differences of ``other`` from ``first``, as lines for the lineage.

    Raises:
        ConfigError: A difference that is not allowed: the first one, in one line.
    """
    a, b = first.dataset, other.dataset
    where = f"{other.path} differs from {first.path}"
    names_a, names_b = set(a.tensors), set(b.tensors)
    if names_a != names_b:
        only = sorted(names_a ^ names_b)[0]
        side = first.path if only in names_a else other.path
        raise ConfigError(
            f"{where}: tensor {only!r} is only in {side} (drop it with `expcli filter --drop`)"
        )
    for name in sorted(names_a):
        x, y = a.tensors[name], b.tensors[name]
        if np.dtype(x.dtype) != np.dtype(y.dtype):
            raise ConfigError(f"{where}: tensor {name!r} is {y.dtype}, expected {x.dtype}")
        if tuple(x.shape[2:]) != tuple(y.shape[2:]):
            raise ConfigError(
                f"{where}: tensor {name!r} has rows of shape {tuple(y.shape[2:])}, "
                f"expected {tuple(x.shape[2:])}"
            )
    for key in _SPACES:
        if _canonical(a.metadata.get(key)) != _canonical(b.metadata.get(key)):
            raise ConfigError(f"{where}: its {key.replace('_', ' ')} is another")
    found = []
    for key, allowance in _ALLOWABLE.items():
        mine, theirs = a.metadata.get(key), b.metadata.get(key)
        if _canonical(mine) == _canonical(theirs):
            continue
        if allowance not in allowed:
            raise ConfigError(
                f"{where}: {key} {_short(theirs)} against {_short(mine)} "
                f"(--allow {allowance.value} merges them anyway)"
            )
        found.append(f"{other.path}: {key} {_short(theirs)} (first source: {_short(mine)})")
    return found


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."
