"""EnvGroup: a slice of envs stepped in one place, the unit every backend is made of.

The dummy backend runs one group in process, each subproc worker runs one group writing
into shared memory, and each Ray actor runs one. A group writes step results into per-env
slots of its ``Slots`` buffers and turns any exception of an env into an ``ErrorRecord``
(picklable, with the traceback text) or, with ``restart_on_error``, rebuilds that env.
"""

from __future__ import annotations

import contextlib
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from expcli.errors import EnvError

__all__ = ["EnvGroup", "ErrorRecord", "GroupError", "Slots", "fixed_shape"]


def fixed_shape(space: gym.Space[Any]) -> tuple[tuple[int, ...], np.dtype[Any]] | None:
    """Shape and dtype of a space whose samples are fixed-shape numeric arrays, else None."""
    if isinstance(
        space,
        (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary),
    ):
        if space.shape is not None and space.dtype is not None and space.dtype.kind in "biuf":
            return tuple(space.shape), np.dtype(space.dtype)
    return None


@dataclass
class Slots:
    """Per-env result slots of a group: arrays (possibly shared memory) or lists."""

    obs: np.ndarray | list[Any]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray

    @classmethod
    def allocate(cls, n: int, observation_space: gym.Space[Any]) -> Slots:
        """Fresh private slots for ``n`` envs."""
        fixed = fixed_shape(observation_space)
        obs: np.ndarray | list[Any] = np.zeros((n, *fixed[0]), fixed[1]) if fixed else [None] * n
        return cls(obs, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool))


@dataclass(frozen=True)
class ErrorRecord:
    """What went wrong in an env, in a form that crosses process boundaries."""

    index: int
    method: str
    type_name: str
    message: str
    traceback: str

    def to_error(self) -> EnvError:
        """The ``EnvError`` to raise in the caller, remote traceback attached as a note."""
        return EnvError(
            f"{self.method}() raised {self.type_name}: {self.message}",
            index=self.index,
            remote_traceback=self.traceback,
        )

    @classmethod
    def capture(cls, index: int, method: str, error: BaseException) -> ErrorRecord:
        """Record the exception being handled."""
        return cls(index, method, type(error).__name__, str(error), traceback.format_exc())


class GroupError(Exception):
    """An env of a group failed; carries the record."""

    def __init__(self, record: ErrorRecord) -> None:
        super().__init__(record.message)
        self.record = record


class EnvGroup:
    """Envs ``offset .. offset + len(factories) - 1``, built here from their factories.

    Args:
        factories: Zero-argument callables returning gymnasium envs.
        offset: Global index of the first env (for error messages).
        slots: Where step results go; allocated privately when None.
        restart_on_error: Rebuild and reset an env that raises in ``step`` instead of
            failing; its episode is reported truncated with ``info["env_error"]``.
        no_warning: Silence warnings the envs emit.

    Raises:
        GroupError: A factory failed.
    """

    def __init__(
        self,
        factories: Sequence[Callable[[], gym.Env[Any, Any]]],
        offset: int = 0,
        slots: Slots | None = None,
        restart_on_error: bool = False,
        no_warning: bool = True,
    ) -> None:
        self.factories = list(factories)
        self.offset = offset
        self.restart_on_error = restart_on_error
        self.no_warning = no_warning
        self.envs: list[gym.Env[Any, Any]] = []
        with self._silence():
            for i in range(len(self.factories)):
                self.envs.append(self._build(i))
        self.slots = slots or Slots.allocate(len(self.envs), self.envs[0].observation_space)
        self.restarts = 0

    def _build(self, i: int) -> gym.Env[Any, Any]:
        try:
            env = self.factories[i]()
        except Exception as e:
            raise GroupError(ErrorRecord.capture(self.offset + i, "make", e)) from e
        if not isinstance(env, gym.Env):
            raise GroupError(
                ErrorRecord(
                    self.offset + i,
                    "make",
                    "TypeError",
                    f"the factory returned {type(env).__name__}, not a gymnasium.Env",
                    "",
                )
            )
        return env

    # ------------------------------------------------------------------ step

    def step(
        self,
        local: Sequence[int] | np.ndarray,
        actions: Sequence[Any] | np.ndarray,
        autoreset: bool,
    ) -> tuple[dict[int, dict[str, Any]], list[int]]:
        """Step the local envs ``local[j]`` with ``actions[j]``, writing into the slots.

        Returns:
            The non-empty infos by local index, and the local indexes rebuilt after an error.

        Raises:
            GroupError: An env failed and ``restart_on_error`` is off.
        """
        slots, envs = self.slots, self.envs
        obs_slots, rewards, terminated, truncated = (
            slots.obs,
            slots.rewards,
            slots.terminated,
            slots.truncated,
        )
        infos: dict[int, dict[str, Any]] = {}
        restarted: list[int] = []
        if isinstance(local, np.ndarray):
            local = local.tolist()  # Python ints index lists and arrays much faster
        with self._silence():
            for j, i in enumerate(local):
                env = envs[i]
                try:
                    obs, reward, term, trunc, info = env.step(actions[j])
                    if autoreset and (term or trunc):
                        info = {**info, "ended_state": obs, "reset": True}
                        obs, reset_info = env.reset()
                        if reset_info:
                            info["reset_info"] = reset_info
                except Exception as e:
                    record = ErrorRecord.capture(self.offset + i, "step", e)
                    if not self.restart_on_error:
                        raise GroupError(record) from e
                    obs, info = self._rebuild(i, record)
                    reward, term, trunc = 0.0, False, True
                    restarted.append(i)
                obs_slots[i] = obs
                rewards[i] = reward
                terminated[i] = term
                truncated[i] = trunc
                if info:
                    infos[i] = info
        return infos, restarted

    def _rebuild(self, i: int, record: ErrorRecord) -> tuple[Any, dict[str, Any]]:
        try:
            self.envs[i].close()
        except Exception:  # noqa: S110 - the env is broken already; its close may be too
            pass
        try:
            self.envs[i] = self._build(i)
            obs, info = self.envs[i].reset()
        except Exception as e:
            raise GroupError(ErrorRecord.capture(self.offset + i, "restart", e)) from e
        self.restarts += 1
        return obs, {**info, "env_error": f"{record.type_name}: {record.message}", "reset": True}

    # ----------------------------------------------------------------- other

    def reset(
        self,
        local: Sequence[int] | np.ndarray,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
    ) -> list[dict[str, Any]]:
        """Reset local envs, observations into the slots; their infos."""
        infos = []
        with self._silence():
            for j, i in enumerate(local):
                obs, info = self._guard(
                    i, "reset", self.envs[i].reset, seed=seeds[j], options=options
                )
                self.slots.obs[i] = obs
                infos.append(info)
        return infos

    def get_attr(self, local: Sequence[int] | np.ndarray, key: str) -> list[Any]:
        """``getattr(env, key, None)`` for local envs, looked up through wrappers."""
        return [_lookup(self.envs[i], key) for i in local]

    def set_attr(self, local: Sequence[int] | np.ndarray, key: str, values: Sequence[Any]) -> None:
        """Set ``key`` on the env (the innermost wrapper or env that has it)."""
        for j, i in enumerate(local):
            _assign(self.envs[i], key, values[j])

    def call(
        self, local: Sequence[int] | np.ndarray, method: str, kwargs: Sequence[dict[str, Any]]
    ) -> list[Any]:
        """Call ``env.<method>(**kwargs[j])`` on local envs."""
        results = []
        for j, i in enumerate(local):
            fn = _lookup(self.envs[i], method)
            if not callable(fn):
                raise GroupError(
                    ErrorRecord(
                        self.offset + i,
                        method,
                        "AttributeError",
                        f"the env has no method {method!r}",
                        "",
                    )
                )
            results.append(self._guard(i, method, fn, **kwargs[j]))
        return results

    def close(self) -> None:
        """Close every env, ignoring errors of envs already broken."""
        for env in self.envs:
            try:
                env.close()
            except Exception:  # noqa: S110 - closing is best effort
                pass
        self.envs = []

    def _guard(self, i: int, method: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            with self._silence():
                return fn(*args, **kwargs)
        except Exception as e:
            raise GroupError(ErrorRecord.capture(self.offset + i, method, e)) from e

    def _silence(self) -> contextlib.AbstractContextManager[Any]:
        if self.no_warning:
            return warnings.catch_warnings(action="ignore")
        return contextlib.nullcontext()


_MISSING = object()


def _lookup(env: gym.Env[Any, Any], key: str) -> Any:
    """The attribute from the outermost wrapper or env that has it, or None."""
    current: Any = env
    while current is not None:
        value = current.__dict__.get(key, _MISSING) if hasattr(current, "__dict__") else _MISSING
        if value is not _MISSING:
            return value
        value = getattr(type(current), key, _MISSING)
        if value is not _MISSING:
            return getattr(current, key)
        current = getattr(current, "env", None) if isinstance(current, gym.Wrapper) else None
    return None


def _assign(env: gym.Env[Any, Any], key: str, value: Any) -> None:
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if key in current.__dict__:
            break
        current = current.env
    setattr(current, key, value)
