"""ParallelEnv: many gymnasium envs stepped together, in process, in workers or on Ray.

The facade validates every argument before any env is touched, applies the asynchronous
mode (what happens to an env once its episode is over) and shapes the results; a backend
(dummy, subproc, ray, ray-subproc) only runs commands on sets of env ids.
"""

from __future__ import annotations

import atexit
import functools
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from expcli.envs.backend import Backend, StepBatch
from expcli.envs.env_ids import check_env_id
from expcli.envs.factories import EnvFactory, as_factory
from expcli.envs.modes import AsyncMode, EnvMode
from expcli.envs.watchdog import StepInterrupted, check_timeout
from expcli.errors import ConfigError, EnvError

__all__ = ["ParallelEnv", "StepInterrupted", "check_env_id"]

# The modes in which done envs stay done until the next reset.
_STOPPING = (AsyncMode.NONE, AsyncMode.IDLE)

Ids = int | Sequence[int] | np.ndarray | None
StepResult = tuple[Any, Any, Any, Any, Any]


class ParallelEnv:
    """A batch of gymnasium envs run together (seed API adapted to Gymnasium's 5-value step).

    Args:
        envs: ``gymnasium.Env`` instances or zero-argument factories returning them.
            Factories are built where the envs run; instances are copied there (pickled)
            by the process modes, so prefer factories or ``ParallelEnv.from_id``.
        para_mode: ``"dummy"`` (in process, sequential), ``"subproc"`` (worker processes,
            each hosting a slice of the envs, talking through shared memory), ``"ray"``
            (a Ray actor per slice) or ``"ray-subproc"`` (each Ray actor runs a subproc
            group: several machines times several cores).
        asynchronous: What happens to an env once its episode is over. ``None``: once
            any env is done every env is done, and further steps return None
            observations and rewards, ``terminated=True`` and empty infos. ``"idle"``:
            done envs return those None results while the others step on. ``"restart"``:
            a done env is reset at once; its observation is the first after the reset,
            the last one before it is in ``info["ended_state"]`` and ``info["reset"]`` is
            True. ``"continue"``: every env steps whatever its state.
        num_cpus: Worker processes (subproc), Ray actors (ray), or worker processes in
            all (ray-subproc); default: every core.
        num_gpus: GPUs for Ray to reserve (ray modes).
        no_warning: Silence the warnings envs emit.
        restart_on_error: Rebuild an env (or a dead or hung worker's envs) that fails in
            ``step`` and report its episode truncated with ``info["env_error"]``, instead
            of raising.
        address: Ray cluster to join (default: ``RAY_ADDRESS``, else a local Ray).
        step_timeout: Seconds one env's ``step`` (or ``reset``, or method call) may take
            before the env is reported hung (``EnvError``, or a restart with
            ``restart_on_error``); found within a quarter of a second more. None or 0:
            wait forever. The process modes stop a hung worker whatever it is doing;
            dummy mode can give up only on a hang in Python code (or a sleep, or a wait
            on a lock or socket) of envs stepped from the main thread.

    Every result an env returns is checked against its spaces before it is stored: a
    None or wrongly shaped observation, a reward that is not a number or a flag that is
    not a bool raises ``EnvError`` naming the env and the step, in every mode.

    Raises:
        ConfigError: An unknown mode, no envs, or a bad ``num_cpus`` or ``step_timeout``.
        EnvError: An env could not be built.
    """

    def __init__(
        self,
        envs: Iterable[gym.Env[Any, Any] | Callable[[], gym.Env[Any, Any]]],
        para_mode: EnvMode | str = EnvMode.DUMMY,
        asynchronous: AsyncMode | str | None = None,
        num_cpus: int | None = None,
        num_gpus: int | float = 0,
        no_warning: bool = True,
        *,
        restart_on_error: bool = False,
        address: str | None = None,
        step_timeout: float | None = None,
    ) -> None:
        try:
            mode = EnvMode(para_mode)
        except (ValueError, TypeError):
            raise ConfigError(
                f"unknown para_mode {para_mode!r}; expected one of {', '.join(EnvMode)}"
            ) from None
        async_mode = _async_mode(asynchronous)
        if num_cpus is not None and (
            isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1
        ):
            raise ConfigError(f"num_cpus must be a positive integer, got {num_cpus!r}")
        try:
            timeout = check_timeout(step_timeout)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        try:
            factories = [as_factory(env) for env in envs]
        except TypeError as e:
            raise ConfigError(str(e)) from e
        if not factories:
            raise ConfigError("ParallelEnv needs at least one env")
        self.para_mode = mode
        self._async = async_mode
        self._closed = True  # until the backend exists, close() has nothing to do
        self.step_timeout = timeout
        self._backend: Backend = _make_backend(
            mode, factories, num_cpus, num_gpus, no_warning, restart_on_error, address, timeout
        )
        self._closed = False
        self.num_envs = len(factories)
        self.observation_space: gym.Space[Any] = self._backend.observation_space
        self.action_space: gym.Space[Any] = self._backend.action_space
        self._done = np.zeros(self.num_envs, dtype=bool)
        self._every_id = np.arange(self.num_envs)
        self._every_id.flags.writeable = False
        self._pending_seeds: list[int | None] = [None] * self.num_envs
        self._obs: Any = None
        self._atexit = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._atexit)

    @classmethod
    def from_id(
        cls,
        env_id: str,
        num_envs: int = 1,
        para_mode: EnvMode | str = EnvMode.DUMMY,
        asynchronous: AsyncMode | str | None = None,
        seed: int | Sequence[int] | None = None,
        num_cpus: int | None = None,
        num_gpus: int | float = 0,
        no_warning: bool = True,
        *,
        restart_on_error: bool = False,
        address: str | None = None,
        step_timeout: float | None = None,
        wrappers: Sequence[str] = (),
        **make_kwargs: Any,
    ) -> ParallelEnv:
        """``num_envs`` copies of ``gym.make(env_id, **make_kwargs)``, built in the workers.

        ``seed`` seeds the first reset of env ``i`` with ``seed + i`` (or a list of seeds).
        ``wrappers``: ``MODULE:CALLABLE`` or ``file.py:CALLABLE`` specs, each called with
        the env right after ``gym.make`` (inside the workers) and returning the wrapped env.

        Raises:
            ConfigError: The env id is not registered, or another argument is invalid.
            EnvError: An env could not be built.
        """
        check_env_id(env_id)
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
        from expcli.envs.env_wrappers import portable_spec

        factory = EnvFactory(env_id, dict(make_kwargs), tuple(map(portable_spec, wrappers)))
        penv = cls(
            [factory] * num_envs,
            para_mode,
            asynchronous,
            num_cpus,
            num_gpus,
            no_warning,
            restart_on_error=restart_on_error,
            address=address,
            step_timeout=step_timeout,
        )
        if seed is not None:
            try:
                penv.seed(seed)
            except ConfigError:
                penv.close()
                raise
        return penv

    # ------------------------------------------------------------- lifecycle

    def __len__(self) -> int:
        """Number of envs."""
        return self.num_envs

    def __enter__(self) -> ParallelEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every env, worker and shared buffer; safe to call twice, runs at exit too."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit)
        self._backend.close()

    def interrupt(self) -> None:
        """Ask a call in progress to give up, e.g. from a signal handler or another thread.

        From now on, a call (``step``, ``reset``, ...) that has not returned within a
        second raises ``StepInterrupted`` (a ``KeyboardInterrupt``) and closes everything;
        calls that return in time are not affected. ``Collector.collect`` takes it as a
        stop. Dummy mode gives up only on calls made from the main thread.
        """
        if not self._closed:
            self._backend.interrupt()

    @property
    def closed(self) -> bool:
        """True once ``close`` ran (or an env failure closed everything)."""
        return self._closed

    @property
    def asynchronous(self) -> AsyncMode | None:
        """The asynchronous mode as an ``AsyncMode`` member, None for ``AsyncMode.NONE``.

        Set it between steps to anything the constructor takes.

        Raises:
            ConfigError: On setting, not one of the modes.
        """
        return None if self._async is AsyncMode.NONE else self._async

    @asynchronous.setter
    def asynchronous(self, value: AsyncMode | str | None) -> None:
        self._async = _async_mode(value)

    @property
    def restarts(self) -> int:
        """Envs rebuilt after an error (``restart_on_error``)."""
        return int(getattr(self._backend, "restarts", 0))

    # ------------------------------------------------------------ stepping

    def reset(
        self,
        id: Ids = None,
        seed: int | Sequence[int] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, Any]:
        """Reset all envs, or those in ``id``; returns ``(observations, infos)``.

        ``seed``: an int seeds the ``k``-th reset env with ``seed + k``; a list gives one
        seed per env. Without it, seeds given to ``seed()`` are used once.

        Raises:
            ConfigError: Bad ids or seeds.
            EnvError: An env failed (everything is closed then).
        """
        self._check_open()
        ids, scalar = self._ids(id)
        seeds = self._seeds_for(ids, seed)
        obs, infos = self._guard(self._backend.reset, ids, seeds, options)
        for i in ids:
            self._pending_seeds[i] = None
        self._done[ids] = False
        if len(ids) == self.num_envs:
            self._obs = obs
        if scalar:
            return obs[0], infos[0]
        return obs, infos

    def seed(self, seed: int | Sequence[int] | None) -> list[int | None]:
        """Seed env ``i`` with ``seed + i`` (or ``seed[i]``) at its next reset.

        Also seeds ``action_space``. Returns the seeds.

        Raises:
            ConfigError: A list of the wrong length, or seeds that are not integers.
        """
        self._check_open()
        seeds = self._seeds_for(np.arange(self.num_envs), seed)
        self._pending_seeds = list(seeds)
        if seeds[0] is not None:
            self.action_space.seed(seeds[0])
        return seeds

    def step(self, action: Any, id: Ids = None, align: Literal["item", "batch"] = "item") -> Any:
        """Step all envs, or those in ``id`` (one action each, in the same order).

        Returns:
            With ``align="item"``: ``(observations, rewards, terminated, truncated, infos)``,
            arrays (object arrays holding None for envs that are done, in the ``None`` and
            ``"idle"`` modes) and a list of info dicts. With ``align="batch"``: a list of
            per-env 5-tuples. An int ``id`` gives that env's 5-tuple.

        Raises:
            ConfigError: Bad ids, the wrong number of actions, or an unknown ``align``.
            EnvError: An env failed (everything is closed then, unless ``restart_on_error``).
        """
        self._check_open()
        if align not in ("item", "batch"):
            raise ConfigError(f"align must be 'item' or 'batch', got {align!r}")
        ids, scalar = self._ids(id)
        actions = self._actions(action, len(ids), scalar)
        mode = self._async
        if mode is AsyncMode.RESTART or mode is AsyncMode.CONTINUE:
            live = None  # every env steps
        elif mode is AsyncMode.NONE and self._done.any():
            live = np.zeros(len(ids), dtype=bool)
        else:
            live = ~self._done[ids]
        if live is None or live.all():
            batch = self._guard(self._backend.step, ids, actions, mode is AsyncMode.RESTART)
            result: StepResult = (
                batch.obs,
                batch.rewards,
                batch.terminated,
                batch.truncated,
                batch.infos,
            )
        else:
            batch, result = self._step_some(ids, actions, live)
        finished = batch.terminated | batch.truncated
        stepped = ids if live is None else ids[live]
        if mode is AsyncMode.NONE:
            if finished.any():
                self._done[:] = True
        elif mode is AsyncMode.IDLE:
            self._done[stepped] |= finished
        else:
            self._done[stepped] = finished
        if live is None and len(ids) == self.num_envs:
            self._obs = batch.obs
        if scalar:
            return tuple(part[0] for part in result)
        if align == "batch":
            return list(zip(*result, strict=True))
        return result

    def _step_some(
        self, ids: np.ndarray, actions: Any, live: np.ndarray
    ) -> tuple[StepBatch, StepResult]:
        """Step only the live envs; the others get None results, terminated and empty infos."""
        positions = np.flatnonzero(live)
        if len(positions):
            batch = self._guard(
                self._backend.step, ids[positions], [actions[p] for p in positions], False
            )
        else:
            batch = StepBatch([], np.zeros(0), np.zeros(0, bool), np.zeros(0, bool), [])
        n = len(ids)
        obs = np.empty(n, dtype=object)
        rewards = np.empty(n, dtype=object)
        terminated = np.ones(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        infos: list[dict[str, Any]] = [{} for _ in range(n)]
        for j, p in enumerate(positions):
            obs[p] = batch.obs[j]
            rewards[p] = float(batch.rewards[j])
            terminated[p] = batch.terminated[j]
            truncated[p] = batch.truncated[j]
            infos[p] = batch.infos[j]
        return batch, (obs, rewards, terminated, truncated, infos)

    def rollout(self, policy: Callable[[Any], Any] | None, steps: int) -> dict[str, np.ndarray]:
        """Run ``steps`` steps of every env with ``policy(observations) -> actions``.

        A None policy samples ``action_space`` for each env. The envs are reset first if
        they never were. ``next_observations`` holds each step's true last observation,
        also where ``"restart"`` reset the env. Stops early once every env is done in the
        ``None`` and ``"idle"`` modes.

        Returns:
            ``observations``, ``actions``, ``rewards``, ``terminated``, ``truncated`` and
            ``next_observations``, each stacked to ``(steps, num_envs, ...)``.
        """
        self._check_open()
        if self._obs is None or self._async in _STOPPING:
            self._obs = self.reset()[0]
        records: dict[str, list[Any]] = {
            k: []
            for k in (
                "observations",
                "actions",
                "rewards",
                "terminated",
                "truncated",
                "next_observations",
            )
        }
        obs = self._obs
        for _ in range(steps):
            if self._async in _STOPPING and self.all_done():
                break
            if policy is None:
                actions = [self.action_space.sample() for _ in range(self.num_envs)]
            else:
                actions = policy(obs)
            next_obs, rewards, terminated, truncated, infos = self.step(actions)
            final = list(next_obs) if not isinstance(next_obs, np.ndarray) else next_obs.copy()
            for i, info in enumerate(infos):
                if "ended_state" in info:
                    final[i] = info["ended_state"]
            for key, value in zip(
                records, (obs, actions, rewards, terminated, truncated, final), strict=True
            ):
                records[key].append(_stackable(value))
            obs = next_obs
        self._obs = obs
        return {
            key: np.stack(values) if values else np.zeros((0, self.num_envs))
            for key, values in records.items()
        }

    def has_done(self) -> bool:
        """True if any env is done (in the sense of the asynchronous mode)."""
        return bool(self._done.any())

    def all_done(self) -> bool:
        """True if every env is done."""
        return bool(self._done.all())

    # ------------------------------------------------------ env attributes

    def get_env_attr(self, key: str, id: Ids = None) -> Any:
        """The attribute ``key`` of each env (None where missing); one value for an int id."""
        self._check_open()
        ids, scalar = self._ids(id)
        values = self._guard(self._backend.get_attr, ids, key)
        return values[0] if scalar else values

    def set_env_attr(self, key: str, value: Any, id: Ids = None) -> None:
        """Set the attribute ``key`` of each env (or of those in ``id``) to ``value``."""
        self._check_open()
        ids, _ = self._ids(id)
        self._guard(self._backend.set_attr, ids, key, [value] * len(ids))

    def customized_method(self, env_method: str, data: Any = None, id: Ids = None) -> Any:
        """Call ``env.<env_method>(**kwargs)`` on each env, in parallel where the mode allows.

        ``data`` is None (no arguments), one dict for every env, or a list of dicts, one per
        env in ``id``. Returns the results (one value for an int id).

        Raises:
            ConfigError: ``data`` does not match the envs.
            EnvError: The method is missing or failed.
        """
        self._check_open()
        ids, scalar = self._ids(id)
        if data is None:
            kwargs: list[dict[str, Any]] = [{} for _ in ids]
        elif isinstance(data, dict):
            kwargs = [data] * len(ids)
        elif isinstance(data, Sequence) and all(isinstance(d, dict) for d in data):
            if len(data) != len(ids):
                raise ConfigError(f"expected {len(ids)} argument dicts in data, got {len(data)}")
            kwargs = list(data)
        else:
            raise ConfigError("data must be None, a dict, or a list of dicts (one per env)")
        results = self._guard(self._backend.call, ids, env_method, kwargs)
        return results[0] if scalar else results

    # ------------------------------------------------------------- helpers

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError("the ParallelEnv is closed")

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except (EnvError, StepInterrupted):
            self.close()
            raise

    def _ids(self, id: Ids) -> tuple[np.ndarray, bool]:
        if id is None:
            return self._every_id, False
        scalar = isinstance(id, (int, np.integer)) and not isinstance(id, bool)
        try:
            ids = np.atleast_1d(np.asarray(id))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"id must be an int or a list of ints, got {id!r}") from e
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ConfigError(f"id must be an int or a list of ints, got {id!r}")
        ids = ids.astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_envs):
            raise ConfigError(f"env ids must be in 0..{self.num_envs - 1}, got {id!r}")
        if len(np.unique(ids)) != len(ids):
            raise ConfigError(f"env ids must not repeat, got {id!r}")
        return ids, scalar

    def _actions(self, action: Any, count: int, scalar: bool) -> Any:
        if scalar:
            return [action]
        try:
            size = len(action)
        except TypeError as e:
            raise ConfigError(f"expected {count} actions, one per env, got {action!r}") from e
        if size != count:
            raise ConfigError(f"expected {count} actions, one per env, got {size}")
        return action

    def _seeds_for(self, ids: np.ndarray, seed: int | Sequence[int] | None) -> list[int | None]:
        if seed is None:
            return [self._pending_seeds[i] for i in ids]
        if isinstance(seed, (int, np.integer)):
            if isinstance(seed, bool):
                raise ConfigError(f"seeds must be integers, got {seed!r}")
            return [int(seed) + k for k in range(len(ids))]
        seeds = list(seed)
        if len(seeds) != len(ids):
            raise ConfigError(f"expected {len(ids)} seeds, one per env, got {len(seeds)}")
        if not all(
            s is None or (isinstance(s, (int, np.integer)) and not isinstance(s, bool))
            for s in seeds
        ):
            raise ConfigError(f"seeds must be integers, got {seed!r}")
        return [None if s is None else int(s) for s in seeds]


def _close_at_exit(ref: weakref.ref[ParallelEnv]) -> None:
    penv = ref()
    if penv is not None:
        penv.close()


def _stackable(value: Any) -> Any:
    return (
        value
        if isinstance(value, np.ndarray)
        else np.asarray(value, dtype=object if any(v is None for v in value) else None)
    )


def _async_mode(value: AsyncMode | str | None) -> AsyncMode:
    """The mode ``asynchronous`` names: None or any case of ``"none"``, or an exact spelling.

    Raises:
        ConfigError: Not one of the modes.
    """
    if value is None or (isinstance(value, str) and value.lower() == AsyncMode.NONE):
        return AsyncMode.NONE
    try:
        return AsyncMode(value)
    except (ValueError, TypeError):
        raise ConfigError(
            f"unknown asynchronous mode {value!r}; expected None, 'idle', 'restart' or 'continue'"
        ) from None


def _make_backend(
    para_mode: EnvMode,
    factories: Sequence[Callable[[], gym.Env[Any, Any]]],
    num_cpus: int | None,
    num_gpus: int | float,
    no_warning: bool,
    restart_on_error: bool,
    address: str | None,
    step_timeout: float | None,
) -> Backend:
    if para_mode is EnvMode.DUMMY:
        from expcli.envs.dummy_backend import DummyBackend

        return DummyBackend(factories, restart_on_error, no_warning, step_timeout)
    if para_mode is EnvMode.SUBPROC:
        from expcli.envs.subproc_backend import SubprocBackend

        return SubprocBackend(
            factories, num_cpus, restart_on_error, no_warning, step_timeout=step_timeout
        )
    from expcli.envs.ray_backend import RayBackend

    return RayBackend(
        factories,
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        no_warning=no_warning,
        restart_on_error=restart_on_error,
        address=address,
        subproc=para_mode is EnvMode.RAY_SUBPROC,
        step_timeout=step_timeout,
    )
