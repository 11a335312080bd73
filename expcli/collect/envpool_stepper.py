"""Stepping EnvPool so that every result is a real transition and each end keeps its true last step.

EnvPool's own autoreset spends the step after an episode's end on the reset: the action
sent is ignored and the result is the first observation of the next episode, with reward
0 (envpool#194: "two wrong transitions" in a replay buffer). expcli never sends that step.
The step that ends an episode returns the true final observation; the ended envs are then
reset at once by ``pool.reset(ids)`` (EnvPool resets a subset in synchronous mode), and
the next row starts from their first observations. So every env makes a transition on
every step, and no row is staged or dropped.

``--async`` modes: ``restart`` resets an ended env at once (as above); ``none`` cuts the
others' episodes (marked truncated) and resets every env when one ends; ``idle`` steps
only the envs still running (``pool.step(actions, env_id)``) until all have ended, then
resets them all. ``continue`` (stepping past the end) does not apply.

The time limit: ``make_envpool_envs`` builds the pool one step past the limit and this
stepper truncates at it (``info["elapsed_step"]``), so an episode that terminates on its
last step is ``terminated`` and ``truncated``, as Gymnasium's ``TimeLimit`` reports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from expcli.collect.step_outcome import StepOutcome
from expcli.envs.envpool_envs import EnvPoolEnvs

__all__ = ["EnvPoolStepper"]

# Infos that say nothing per transition, or nothing scalar.
_SKIPPED_INFOS = frozenset({"env_id", "players"})


class EnvPoolStepper:
    """Steps an ``EnvPoolEnvs`` (see the module's docstring)."""

    def __init__(self, envs: EnvPoolEnvs) -> None:
        self.envs = envs
        self.pool = envs.pool
        self.num_envs = envs.num_envs
        self.observation_space = envs.observation_space
        self.action_space = envs.action_space
        self.mode = envs.asynchronous
        self._limit = envs.time_limit
        self._live = np.ones(self.num_envs, dtype=bool)
        self._obs: Any = None

    def reset(self, seed: int | None) -> Any:
        """Reset every env; ``seed`` must be the one the pool was built with (or None)."""
        self.envs.check_seed(seed)
        obs, _ = self.pool.reset()
        self._live[:] = True
        self._obs = obs
        return obs

    def step(self, actions: np.ndarray) -> StepOutcome:
        """Step every env (the running ones, in ``idle`` mode) and reset those that ended."""
        if self.mode == "idle" and not self._live.all():
            return self._step_live(actions)
        obs, rewards, terminated, truncated, info = self.pool.step(actions)
        if self._limit is not None:
            truncated = info["elapsed_step"] >= self._limit
        infos = _PoolInfos(info, self.num_envs)
        if not np.count_nonzero(terminated) and not np.count_nonzero(truncated):
            self._obs = obs
            return StepOutcome(obs, obs, rewards, terminated, truncated, None, infos)
        finished = terminated | truncated
        if self.mode == "restart":
            ended = np.flatnonzero(finished).astype(np.int32)
            fresh, _ = self.pool.reset(ended)
            next_obs = _with_rows(obs, ended, fresh)
        elif self.mode is None:
            truncated = truncated | ~finished  # the collector cuts these episodes
            next_obs, _ = self.pool.reset()
        else:  # idle: the ended envs wait until all have ended
            self._live &= ~finished
            next_obs = obs if self._live.any() else self._reset_all()
        self._obs = next_obs
        return StepOutcome(next_obs, obs, rewards, terminated, truncated, None, infos)

    def _step_live(self, actions: np.ndarray) -> StepOutcome:
        """``idle`` mode once some envs have ended: step the others only."""
        live = self._live.copy()
        ids = np.flatnonzero(live).astype(np.int32)
        obs_l, rewards_l, terminated_l, truncated_l, info = self.pool.step(
            np.asarray(actions)[ids], ids
        )
        if self._limit is not None:
            truncated_l = info["elapsed_step"] >= self._limit
        n = self.num_envs
        obs = _with_rows(self._obs, ids, obs_l)
        rewards = np.zeros(n, dtype=np.float32)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        rewards[ids], terminated[ids], truncated[ids] = rewards_l, terminated_l, truncated_l
        infos: list[dict[str, Any]] = [{} for _ in range(n)]
        for k, env in enumerate(ids):
            infos[env] = _PoolInfos(info, len(ids))[k]
        self._live &= ~(terminated | truncated)
        next_obs = obs if self._live.any() else self._reset_all()
        self._obs = next_obs
        return StepOutcome(next_obs, obs, rewards, terminated, truncated, live, infos)

    def _reset_all(self) -> Any:
        obs, _ = self.pool.reset()
        self._live[:] = True
        return obs

    def close(self) -> None:
        """Close the pool."""
        self.envs.close()


class _PoolInfos(Sequence[dict[str, Any]]):
    """EnvPool's batched info dict as one dict per env, built only when read."""

    __slots__ = ("_info", "_n")

    def __init__(self, info: Mapping[str, Any], num_envs: int) -> None:
        self._info = info
        self._n = num_envs

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return {
            key: value[i]
            for key, value in self._info.items()
            if key not in _SKIPPED_INFOS
            and isinstance(value, np.ndarray)
            and value.shape[:1] == (self._n,)
        }

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(self._n))


def _with_rows(batch: Any, ids: np.ndarray, rows: Any) -> Any:
    """A copy of ``batch`` (an array, or a dict of them) with ``rows`` at ``ids``."""
    if isinstance(batch, Mapping):
        return {key: _with_rows(batch[key], ids, rows[key]) for key in batch}
    out = np.array(batch, copy=True)
    out[ids] = rows
    return out
