"""Uniform stepping over a ParallelEnv (any asynchronous mode), a Gymnasium vector env or EnvPool.

Each stepper answers one question per step: which of the results are real transitions,
and what is each one's true next observation. That is where the autoreset conventions
differ, and where bogus rows come from when they are ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.collect.step_outcome import StepOutcome, Stepper
from expcli.errors import InvalidTypeError, InvalidValueError

if TYPE_CHECKING:
    pass

__all__ = ["make_stepper"]


class ParallelEnvStepper:
    """A ``ParallelEnv`` in any asynchronous mode.

    ``"restart"``: the env resets at once; the true last observation is
    ``info["ended_state"]``. ``"continue"``: results are taken as they come. ``None``:
    when any env ends, the others' episodes are cut (marked truncated) and all reset.
    ``"idle"``: ended envs wait (their results are not transitions) until all have ended.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.num_envs = len(env)
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.mode = env.asynchronous
        self._live = np.ones(self.num_envs, dtype=bool)
        self._obs: Any = None
        self._batched_actions: Any = None

    def reset(self, seed: int | None) -> Any:
        obs, _ = self.env.reset(seed=seed)
        self._live[:] = True
        self._obs = obs
        return obs

    def step(self, actions: Any) -> StepOutcome:
        if isinstance(actions, (dict, tuple)):
            actions = self._per_env(actions)
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        finished = terminated | truncated
        mode = self.mode
        if mode == "restart":
            final = obs
            if np.count_nonzero(finished):  # per step: much cheaper than .any()
                final = _copy_batch(obs)
                for i in np.flatnonzero(finished):
                    final[i] = infos[i].get("ended_state", obs[i])
            self._obs = obs
            return StepOutcome(obs, final, rewards, terminated, truncated, None, infos)
        if mode == "continue":
            self._obs = obs
            return StepOutcome(obs, obs, rewards, terminated, truncated, None, infos)
        if mode is None:
            if finished.any():
                truncated = truncated | ~finished  # the collector cuts these episodes
                next_obs, _ = self.env.reset()
            else:
                next_obs = obs
            self._obs = next_obs
            return StepOutcome(next_obs, obs, rewards, terminated, truncated, None, infos)
        # idle: envs that had ended return None results; theirs are not transitions.
        valid = self._live.copy()
        if not valid.all():
            obs = _fill_missing(obs, self._obs, valid)
            rewards = np.where(valid, rewards, 0.0).astype(np.float64)
            terminated = terminated & valid
            truncated = truncated & valid
        self._live &= ~(terminated | truncated)
        next_obs = obs
        if not self._live.any():
            next_obs, _ = self.env.reset()
            self._live[:] = True
        self._obs = next_obs
        return StepOutcome(next_obs, obs, rewards, terminated, truncated, valid, infos)

    def _per_env(self, actions: Any) -> list[Any]:
        """Gymnasium's batched Dict/Tuple actions as one action per env (what envs step)."""
        from gymnasium.vector.utils import batch_space, iterate

        if self._batched_actions is None:
            self._batched_actions = batch_space(self.action_space, self.num_envs)
        return list(iterate(self._batched_actions, actions))

    def close(self) -> None:
        self.env.close()


class VectorEnvStepper:
    """A Gymnasium ``VectorEnv`` (e.g. from ``gym.make_vec``) in either autoreset mode.

    Next-step autoreset (Gymnasium's default, and the only one its batched CartPole has):
    the step after an env ends only resets it; that result is not a transition. Same-step
    autoreset: the true last observation is ``infos["final_obs"]``.
    """

    def __init__(self, env: Any) -> None:
        from gymnasium.vector import AutoresetMode

        self.env = env
        self.num_envs = int(env.num_envs)
        self.observation_space = env.single_observation_space
        self.action_space = env.single_action_space
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise InvalidValueError(
                f"unsupported autoreset mode {mode}; expected NextStep or SameStep"
            )
        self._next_step = mode == AutoresetMode.NEXT_STEP
        self._ended = np.zeros(self.num_envs, dtype=bool)
        self._no_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]

    def reset(self, seed: int | None) -> Any:
        obs, _ = self.env.reset(seed=seed)
        self._ended[:] = False
        return obs

    def step(self, actions: Any) -> StepOutcome:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        finished = terminated | truncated
        if self._next_step:
            valid = ~self._ended if np.count_nonzero(self._ended) else None
            self._ended = finished
            return StepOutcome(
                obs, obs, rewards, terminated, truncated, valid, _split_infos(infos, self)
            )
        final = obs
        if "final_obs" in infos and np.count_nonzero(finished):
            if isinstance(obs, np.ndarray):
                final = obs.copy()
            else:  # a batched Dict or Tuple: one sample per env, then the final ones
                from gymnasium.vector.utils import iterate

                final = list(iterate(self.env.observation_space, obs))
            for i in np.flatnonzero(finished):
                final[i] = infos["final_obs"][i]
        return StepOutcome(
            obs, final, rewards, terminated, truncated, None, _split_infos(infos, self)
        )

    def close(self) -> None:
        self.env.close()


def make_stepper(env: object) -> Stepper:
    """The stepper for a ``ParallelEnv``, EnvPool's envs or a Gymnasium ``VectorEnv``."""
    from expcli.envs import ParallelEnv
    from expcli.envs.envpool_envs import EnvPoolEnvs

    if isinstance(env, ParallelEnv):
        return ParallelEnvStepper(env)
    pool = EnvPoolEnvs.of(env)  # before VectorEnv: EnvPool's envs are VectorEnvs too
    if pool is not None:
        from expcli.collect.envpool_stepper import EnvPoolStepper

        return EnvPoolStepper(pool)
    from gymnasium.vector import VectorEnv

    if isinstance(env, VectorEnv):
        return VectorEnvStepper(env)
    raise InvalidTypeError(
        f"expected a ParallelEnv, EnvPool's envs or a gymnasium VectorEnv, got {type(env).__name__}"
    )


def _copy_batch(obs: Any) -> Any:
    return obs.copy() if isinstance(obs, np.ndarray) else list(obs)


def _fill_missing(obs: Any, previous: Any, valid: np.ndarray) -> Any:
    """Observations of the live envs, with the previous ones where an env returned None."""
    rows = [obs[i] if valid[i] else previous[i] for i in range(len(valid))]
    if isinstance(previous, np.ndarray) and previous.dtype != object:
        return np.stack(rows)
    return rows


def _split_infos(infos: dict[str, Any], stepper: VectorEnvStepper) -> list[dict[str, Any]]:
    """Gymnasium's batched info dict (arrays with ``_key`` masks) as one dict per env."""
    if not infos:
        return stepper._no_infos
    out: list[dict[str, Any]] = [{} for _ in range(stepper.num_envs)]
    for key, value in infos.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = infos.get(f"_{key}")
        if not isinstance(value, np.ndarray) or value.shape[:1] != (stepper.num_envs,):
            continue
        for i in range(stepper.num_envs):
            if mask is None or mask[i]:
                out[i][key] = value[i]
    return out
