"""EnvGroup: a slice of envs stepped in one place, the unit every backend is made of.

The dummy backend runs one group in process, each subproc worker runs one group writing
into shared memory, and each Ray actor runs one. A group writes step results into per-env
slots of its ``Slots`` buffers and turns any exception of an env into an ``ErrorRecord``
(picklable, with the traceback text) or, with ``restart_on_error``, rebuilds that env.

What an env returns is checked before it is stored (``step_checks``), and the group
says which env it is calling (``busy``) so that a hung one can be found (``watchdog``).
"""

from __future__ import annotations

import contextlib
import threading
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from expcli.envs.step_checks import BadResult, ResultCheck
from expcli.envs.watchdog import Abandon, StepInterrupted
from expcli.errors import EnvError

_ENV_FAILURES = (Exception, SystemExit, Abandon)
"""What an env's call may raise that is its failure: ``sys.exit()`` in an env included (it
would otherwise end a dummy-mode run without saving)."""

__all__ = ["EnvGroup", "ErrorRecord", "GroupError", "Slots", "fixed_shape"]

_AUTORESET = "in the reset that followed the end of its episode"


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
        if self.type_name == BadResult.__name__:
            text = f"{self.method}() returned {self.message}"
        elif self.type_name == Abandon.__name__:
            text = self.message
        else:
            text = f"{self.method}() raised {self.type_name}: {self.message}"
        return EnvError(text, index=self.index, remote_traceback=self.traceback)

    @classmethod
    def capture(cls, index: int, method: str, error: BaseException) -> ErrorRecord:
        """Record the exception being handled (a refused result needs no traceback)."""
        trace = "" if isinstance(error, BadResult) else traceback.format_exc()
        return cls(index, method, type(error).__name__, str(error), trace)


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
        busy: One int64 (e.g. in shared memory) where the group writes the global index
            of the env it is calling, -1 between commands; private when None.

    Attributes:
        tick: Commands run so far; with ``busy``, what tells a hung env from a busy group.
        method: The env method the current (or last) command calls.
        thread: Ident of the thread running the current (or last) command.

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
        busy: memoryview | None = None,
    ) -> None:
        self.factories = list(factories)
        self.offset = offset
        self.restart_on_error = restart_on_error
        self.no_warning = no_warning
        self.busy = busy if busy is not None else memoryview(bytearray(8)).cast("q")
        self.busy[0] = -1
        self.tick, self.method, self.thread = 0, "", 0
        self.envs: list[gym.Env[Any, Any]] = []
        with self._silence():
            for i in range(len(self.factories)):
                self.envs.append(self._build(i))
        space = self.envs[0].observation_space
        self.slots = slots or Slots.allocate(len(self.envs), space)
        self.check = ResultCheck(_describe(space), fixed_shape(space))
        self.episode_steps = [0] * len(self.envs)
        self.restarts = 0

    def _build(self, i: int) -> gym.Env[Any, Any]:
        try:
            env = self.factories[i]()
        except (Exception, SystemExit) as e:
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
            GroupError: An env failed, or returned what its spaces do not allow, and
                ``restart_on_error`` is off.
            StepInterrupted: ``interrupt()`` gave up on an env's call.
        """
        slots, envs, check, counts = self.slots, self.envs, self.check, self.episode_steps
        obs_slots, rewards, terminated, truncated = (
            slots.obs,
            slots.rewards,
            slots.terminated,
            slots.truncated,
        )
        # The quick test of ResultCheck.fits, inlined: it runs for every env at every step.
        reward_types, flag_types = check.reward_types, check.flag_types
        obs_dtypes, obs_types, shape, dtype, ndarray = (
            check.obs_dtypes,
            check.obs_types,
            check.shape,
            check.dtype,
            np.ndarray,
        )
        infos: dict[int, dict[str, Any]] = {}
        restarted: list[int] = []
        if isinstance(local, np.ndarray):
            local = local.tolist()  # Python ints index lists and arrays much faster
        busy, offset = self.busy, self.offset
        self.tick += 1
        self.method, self.thread = "step", threading.get_ident()
        try:
            with self._silence():
                for j, i in enumerate(local):
                    env = envs[i]
                    busy[0] = offset + i
                    try:
                        obs, reward, term, trunc, info = env.step(actions[j])
                        counts[i] += 1
                        if not (
                            reward.__class__ in reward_types
                            and term.__class__ in flag_types
                            and trunc.__class__ in flag_types
                            and info.__class__ is dict
                            and (
                                (
                                    obs.__class__ is ndarray
                                    and (obs.dtype is dtype or obs.dtype in obs_dtypes)
                                    and obs.shape == shape
                                )
                                or obs.__class__ in obs_types
                            )
                        ):
                            self._refuse(check.problem(obs, reward, term, trunc, info), i)
                        if autoreset and (term or trunc):
                            info = {**info, "ended_state": obs, "reset": True}
                            obs, reset_info = env.reset()
                            counts[i] = 0
                            if not check.fits_observation(obs):
                                self._refuse(check.observation_problem(obs), i, _AUTORESET)
                            if reset_info:
                                info["reset_info"] = reset_info
                        obs_slots[i] = obs
                        rewards[i] = reward
                        terminated[i] = term
                        truncated[i] = trunc
                    except _ENV_FAILURES as e:
                        obs, info = self._failed(i, "step", e)
                        obs_slots[i] = obs
                        rewards[i], terminated[i], truncated[i] = 0.0, False, True
                        restarted.append(i)
                    if info:
                        infos[i] = info
        except Abandon as e:
            raise self._given_up(e) from None
        finally:
            busy[0] = -1
        return infos, restarted

    def _given_up(self, error: Abandon) -> BaseException:
        """What to raise for a call given up on just as it returned (between two calls)."""
        if error.interrupted:
            return StepInterrupted(str(error))
        index = int(self.busy[0])
        return GroupError(ErrorRecord(index, self.method, Abandon.__name__, str(error), ""))

    def _refuse(self, problem: str | None, i: int, where: str | None = None) -> None:
        """Raise ``BadResult`` for ``problem`` (nothing when there is none)."""
        if problem is not None:
            if where is None:
                where = f"at step {self.episode_steps[i]} of its episode"
            raise BadResult(f"{problem} {where}".rstrip())

    def _failed(self, i: int, method: str, error: BaseException) -> tuple[Any, dict[str, Any]]:
        """An env's call failed: raise, or rebuild it (``restart_on_error``, in ``step``)."""
        if isinstance(error, Abandon) and error.interrupted:
            raise StepInterrupted(str(error)) from None
        record = ErrorRecord.capture(self.offset + i, method, error)
        if not (self.restart_on_error and method == "step"):
            raise GroupError(record) from error
        return self._rebuild(i, record)

    def _rebuild(self, i: int, record: ErrorRecord) -> tuple[Any, dict[str, Any]]:
        try:
            self.envs[i].close()
        except Exception:  # the env is broken already; its close may be too
            pass
        try:
            self.envs[i] = self._build(i)
            obs, info = self.envs[i].reset()
            if not self.check.fits_observation(obs):
                self._refuse(self.check.observation_problem(obs), i, "")
        except Exception as e:
            raise GroupError(ErrorRecord.capture(self.offset + i, "restart", e)) from e
        self.episode_steps[i] = 0
        self.restarts += 1
        return obs, {**info, "env_error": record.to_error().detail, "reset": True}

    # ----------------------------------------------------------------- other

    def reset(
        self,
        local: Sequence[int] | np.ndarray,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
    ) -> list[dict[str, Any]]:
        """Reset local envs, observations into the slots; their infos."""
        infos = []
        self._begin("reset")
        try:
            with self._silence():
                for j, i in enumerate(local):
                    infos.append(self._guard(i, "reset", self._reset_one, i, seeds[j], options))
        except Abandon as e:
            raise self._given_up(e) from None
        finally:
            self.busy[0] = -1
        return infos

    def _reset_one(self, i: int, seed: int | None, options: dict[str, Any] | None) -> Any:
        obs, info = self.envs[i].reset(seed=seed, options=options)
        if not self.check.fits_observation(obs):
            self._refuse(self.check.observation_problem(obs), i, "")
        self.slots.obs[i] = obs
        self.episode_steps[i] = 0
        return info

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
        self._begin(method)
        try:
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
                with self._silence():
                    results.append(self._guard(i, method, fn, **kwargs[j]))
        except Abandon as e:
            raise self._given_up(e) from None
        finally:
            self.busy[0] = -1
        return results

    def close(self) -> None:
        """Close every env, ignoring errors of envs already broken."""
        for env in self.envs:
            try:
                env.close()
            except Exception:  # closing is best effort
                pass
        self.envs = []

    def _begin(self, method: str) -> None:
        self.tick += 1
        self.method, self.thread = method, threading.get_ident()

    def _guard(self, i: int, method: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(...)``, an env's call, with its failure as a ``GroupError``."""
        self.busy[0] = self.offset + i
        try:
            return fn(*args, **kwargs)
        except _ENV_FAILURES as e:
            if isinstance(e, Abandon) and e.interrupted:
                raise StepInterrupted(str(e)) from None
            raise GroupError(ErrorRecord.capture(self.offset + i, method, e)) from e

    def _silence(self) -> contextlib.AbstractContextManager[Any]:
        if self.no_warning:
            return warnings.catch_warnings(action="ignore")
        return contextlib.nullcontext()


def _describe(space: gym.Space[Any]) -> str:
    from expcli.envs.catalog import describe_space

    return describe_space(space)


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
