"""Checks of what an env's ``step`` and ``reset`` return, before anything is stored.

numpy would store a None observation as NaN, spread a scalar over a whole observation,
cut a float into an int slot or read ``"1.5"`` as a number, all without a word; and a
string it cannot read escapes as a bare ``ValueError``. Every backend steps its envs
through ``EnvGroup``, which asks this module, so every mode refuses the same results with
the same ``EnvError``.

The per-step cost is a few type tests (``ResultCheck.fits``, inlined by ``EnvGroup``).
Anything else is looked at once by ``ResultCheck.problem``; when it is acceptable after
all (a float64 observation for a float32 Box, a numpy integer reward), its type is
remembered so that the next one passes the quick test.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BadResult", "ResultCheck"]

_REALS = (float, int, np.float64, np.float32, np.int64, np.int32)
_FLAGS = (bool, np.bool_)


class BadResult(Exception):
    """An env returned something that does not fit its spaces (the message says what)."""


class _AnythingBut:
    """A set of every type but one: the observation types a non-array space accepts."""

    def __init__(self, excluded: type) -> None:
        self.excluded = excluded

    def __contains__(self, kind: object) -> bool:
        return kind is not self.excluded

    def add(self, kind: type) -> None:
        del kind  # already in


class ResultCheck:
    """What one group's envs may return, and why a result is refused.

    Args:
        space_text: The observation space, as messages show it.
        fixed: Shape and dtype of the observation slots, when observations are stored in
            an array (None: a list that holds any object but None).

    The attributes are the quick test ``EnvGroup`` inlines: an observation passes when
    it is an ndarray of ``shape`` with a dtype in ``obs_dtypes`` or its type is in
    ``obs_types``; a reward when its type is in ``reward_types``; a flag likewise.
    """

    def __init__(self, space_text: str, fixed: tuple[tuple[int, ...], np.dtype[Any]] | None):
        self.space_text = space_text
        self.shape: tuple[int, ...] | None = None
        self.dtype: np.dtype[Any] | None = None
        self.obs_dtypes: set[np.dtype[Any]] = set()
        self.obs_types: Any = _AnythingBut(type(None))
        if fixed is not None:
            self.shape, self.dtype = fixed
            self.obs_dtypes = {fixed[1]}
            self.obs_types = set(_scalar_types(fixed[1])) if fixed[0] == () else set()
        self.reward_types: set[type] = set(_REALS)
        self.flag_types: set[type] = set(_FLAGS)

    def fits(self, obs: Any, reward: Any, terminated: Any, truncated: Any, info: Any) -> bool:
        """The quick test (what ``EnvGroup.step`` inlines)."""
        return (
            reward.__class__ in self.reward_types
            and terminated.__class__ in self.flag_types
            and truncated.__class__ in self.flag_types
            and info.__class__ is dict
            and self.fits_observation(obs)
        )

    def fits_observation(self, obs: Any) -> bool:
        """The quick test of an observation alone."""
        return (
            obs.__class__ is np.ndarray and obs.dtype in self.obs_dtypes and obs.shape == self.shape
        ) or obs.__class__ in self.obs_types

    def problem(
        self, obs: object, reward: object, terminated: object, truncated: object, info: object
    ) -> str | None:
        """What is wrong with one step's results, or None (then they pass quickly from now)."""
        return (
            self._reward(reward)
            or self._flag(terminated, "terminated")
            or self._flag(truncated, "truncated")
            or (None if isinstance(info, dict) else f"an info {_short(info)} (expected a dict)")
            or self.observation_problem(obs)
        )

    def observation_problem(self, obs: object) -> str | None:
        """What is wrong with an observation, or None (its type then passes quickly)."""
        if obs is None:
            return f"None as the observation (expected {self.space_text})"
        if self.shape is None or self.dtype is None:
            return None
        if isinstance(obs, (str, bytes)):
            return f"a {type(obs).__name__} observation {_short(obs)} (expected {self.space_text})"
        try:
            array = np.asarray(obs)
        except Exception as e:  # ragged lists and other things numpy cannot read
            return f"an observation numpy cannot read ({e}) (expected {self.space_text})"
        if array.dtype.kind not in "biuf":
            return (
                f"an observation of {array.dtype} values {_short(obs)} (expected {self.space_text})"
            )
        if array.shape != self.shape:
            return f"an observation of shape {array.shape} (expected {self.space_text})"
        if not np.can_cast(array.dtype, self.dtype, "same_kind"):
            return f"an observation of dtype {array.dtype} (expected {self.space_text})"
        if isinstance(obs, np.ndarray):
            self.obs_dtypes.add(obs.dtype)
        elif self.shape == () and isinstance(obs, (int, float, np.generic)):
            self.obs_types.add(type(obs))
        return None

    def _reward(self, reward: Any) -> str | None:
        kind = type(reward)
        if kind in self.reward_types:
            return None
        if isinstance(reward, (int, float, np.integer, np.floating)) or (
            isinstance(reward, np.ndarray) and reward.shape == () and reward.dtype.kind in "biuf"
        ):
            self.reward_types.add(kind)
            return None
        shape = f" of shape {reward.shape}" if isinstance(reward, np.ndarray) else ""
        return f"a reward of type {kind.__name__}{shape} {_short(reward)} (expected a number)"

    def _flag(self, value: Any, name: str) -> str | None:
        kind = type(value)
        if kind in self.flag_types:
            return None
        if isinstance(value, (bool, np.bool_)):
            self.flag_types.add(kind)
            return None
        return f"{name}={_short(value)} of type {kind.__name__} (expected a bool)"


def _scalar_types(dtype: np.dtype[Any]) -> tuple[type, ...]:
    """Python and numpy scalar types that store into ``dtype`` without losing their kind."""
    if dtype.kind == "f":
        return (float, int, np.float64, np.float32, np.int64)
    if dtype.kind in "iu":
        return (int, np.int64, np.int32)
    return (bool, np.bool_)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
